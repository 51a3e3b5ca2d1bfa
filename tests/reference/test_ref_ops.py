"""reference.ops: the IR-shaped dispatcher wires ports and attributes to the right oracle.

Expected values come from the per-op functions (tested on their own against loops, identities and
finite differences) or from direct NumPy expressions; what is checked here is the wiring."""
import numpy as np
import pytest

from ncudnn import reference as R
from ncudnn.reference.ops import SUPPORTED_OPS, run_node, run_op

CONV_ATTRS = dict(mode=1, stride=(2, 1), pre_padding=(1, 0), post_padding=(0, 1), dilation=(1, 2),
                  alpha=1.0, beta=0.0, spatial_dims=2)


def test_every_ir_op_is_supported():
    ir = pytest.importorskip("ncudnn.ir.ops")
    assert set(ir.NODE_TYPES) <= SUPPORTED_OPS | {"signal"}


def test_pointwise_ports(rng):
    x, b = rng.uniform(-1, 1, size=(2, 3)), rng.uniform(-1, 1, size=(1, 3))
    np.testing.assert_array_equal(run_op("pointwise", {"X": x, "B": b}, dict(mode=0, alpha2=2.0))["Y"],
                                  x + 2 * b)
    dy = rng.uniform(-1, 1, size=(2, 3))
    got = run_op("pointwise", {"DY": dy, "X": x}, dict(mode="RELU_BWD"))["DX"]
    np.testing.assert_array_equal(got, np.where(x > 0, dy, 0.0))
    sel = run_op("pointwise", {"X": x, "B": -x, "T": x > 0}, dict(mode="BINARY_SELECT"))["Y"]
    np.testing.assert_array_equal(sel, np.abs(x))


def test_conv_family_with_blending(rng):
    x, w = rng.uniform(-1, 1, size=(2, 4, 6, 5)), rng.uniform(-1, 1, size=(6, 2, 3, 2))
    kw = dict(stride=(2, 1), pre_pad=(1, 0), post_pad=(0, 1), dilation=(1, 2), groups=2)
    y = R.conv_fprop(x, w, **kw)
    prior = rng.uniform(-1, 1, size=y.shape)
    got = run_op("conv_fprop", {"X": x, "W": w, "Y_PRIOR": prior}, dict(CONV_ATTRS, alpha=0.5,
                                                                         beta=2.0))["Y"]
    np.testing.assert_allclose(got, 0.5 * y + 2.0 * prior, rtol=1e-14)
    dy = rng.uniform(-1, 1, size=y.shape)
    dx = run_op("conv_dgrad", {"DY": dy, "W": w}, CONV_ATTRS, {"DX": x.shape})["DX"]
    np.testing.assert_allclose(dx, R.conv_dgrad(dy, w, x.shape, **kw), rtol=1e-14)
    dw = run_op("conv_wgrad", {"X": x, "DY": dy}, CONV_ATTRS, {"DW": w.shape})["DW"]
    np.testing.assert_allclose(dw, R.conv_wgrad(x, dy, w.shape, **kw), rtol=1e-14)
    flipped = run_op("conv_fprop", {"X": x, "W": w}, dict(CONV_ATTRS, mode=0))["Y"]
    np.testing.assert_allclose(flipped, R.conv_fprop(x, w, cross_correlation=False, **kw),
                               rtol=1e-14)
    with pytest.raises(ValueError):
        run_op("conv_fprop", {"X": x, "W": w}, dict(CONV_ATTRS, beta=1.0))


def test_norm_bn_and_stats_ops(rng):
    x = rng.uniform(-1, 1, size=(3, 2, 2, 2))
    s, q = run_op("genstats", {"X": x}).values()
    np.testing.assert_allclose(s.ravel(), x.sum(axis=(0, 2, 3)), rtol=1e-14)
    scale, bias = rng.uniform(0.5, 1, size=(1, 2, 1, 1)), rng.uniform(size=(1, 2, 1, 1))
    fin = run_op("bn_finalize", {"SUM": s, "SQSUM": q, "SCALE": scale, "BIAS": bias,
                                 "EPSILON": 1e-3, "ACCUM_COUNT": 12})
    ref = R.batchnorm_forward_training(x, scale, bias, 1e-3)
    np.testing.assert_allclose(fin["EQ_SCALE"] * x + fin["EQ_BIAS"], ref[0], rtol=1e-11)
    assert "UPDATED_RUNNING_MEAN" not in fin
    out = run_op("norm_fwd", {"X": x, "SCALE": scale, "BIAS": bias, "EPSILON": np.array([1e-3])},
                 dict(mode=2, phase=1))
    np.testing.assert_allclose(out["Y"], ref[0], rtol=1e-12)
    dy = rng.uniform(-1, 1, size=x.shape)
    bwd = run_op("norm_bwd", {"X": x, "DY": dy, "SCALE": scale, "MEAN": out["MEAN"],
                              "INV_VARIANCE": out["INV_VARIANCE"]}, dict(mode=2))
    np.testing.assert_allclose(bwd["DX"], R.batchnorm_backward(x, dy, scale, ref[1], ref[2])[0],
                               rtol=1e-12)
    w = run_op("bn_bwd_weights", {"X": x, "MEAN": ref[1], "INV_STD": ref[2], "SCALE": scale,
                                  "DY_SUM": dy.sum(axis=(0, 2, 3)),
                                  "DY_X_SUM": (dy * x).sum(axis=(0, 2, 3))})
    np.testing.assert_allclose(w["EQ_DY_SCALE"] * dy + w["EQ_X_SCALE"] * x + w["EQ_BIAS"],
                               bwd["DX"], rtol=1e-10, atol=1e-12)


def test_resample_matmul_reduction_misc(rng):
    x = rng.uniform(-1, 1, size=(1, 2, 4, 4))
    a = dict(mode=3, window=(2, 2), stride=(2, 2), pre_padding=(0, 0), post_padding=(0, 0),
             spatial_dims=2)
    out = run_op("resample_fwd", {"X": x}, a)
    np.testing.assert_array_equal(out["Y"], x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))
    dy = rng.uniform(-1, 1, size=out["Y"].shape)
    dx = run_op("resample_bwd", {"DY": dy, "IDX": out["IDX"]}, a, {"DX": x.shape})["DX"]
    assert np.count_nonzero(dx) == dy.size and np.isclose(dx.sum(), dy.sum())
    A, B = rng.uniform(size=(2, 3, 4)), rng.uniform(size=(1, 4, 2))
    np.testing.assert_allclose(run_op("matmul", {"A": A, "B": B})["C"], A @ B, rtol=1e-14)
    np.testing.assert_allclose(run_op("reduction", {"X": A}, dict(mode="ADD"), {"Y": (2, 1, 1)})["Y"],
                               A.sum(axis=(1, 2), keepdims=True), rtol=1e-14)
    y = run_op("rng", {"SEED": 5, "OFFSET": 3}, dict(distribution=1), {"Y": (2, 3)})["Y"]
    np.testing.assert_array_equal(y, R.rng_generate((2, 3), "UNIFORM", 5, 3))
    E = rng.uniform(size=(1, 3, 2))
    c = run_op("concat", {"X1": E, "X0": A[:1]}, dict(axis=2))["Y"]
    np.testing.assert_array_equal(c, np.concatenate([A[:1], E], axis=2))
    q = run_op("block_scale_quantize", {"X": rng.uniform(-1, 1, size=(2, 32))}, dict(block_size=32))
    assert q["SCALE"].shape == (2, 1)


def test_sdpa_ports_and_dropout(rng):
    q, k, v = (rng.uniform(-1, 1, size=(1, 2, 3, 4)) for _ in range(3))
    a = dict(attn_scale=0.5, causal_mask=True, dropout_probability=0.25)
    out = run_op("sdpa_fwd", {"Q": q, "K": k, "V": v, "SEED": 11, "OFFSET": 2}, a)
    keep = R.rng_generate((1, 2, 3, 3), "BERNOULLI", 11, 2, bernoulli_probability=0.75)
    o, st = R.sdpa_forward(q, k, v, 0.5, causal=True, dropout_mask=keep, dropout_scale=1 / 0.75)
    np.testing.assert_array_equal(out["O"], o)
    np.testing.assert_array_equal(out["STATS"], st)
    do = rng.uniform(-1, 1, size=o.shape)
    g = run_op("sdpa_bwd", {"Q": q, "K": k, "V": v, "O": o, "DO": do, "STATS": st, "SCALE": 0.5,
                            "SEED": 11, "OFFSET": 2}, dict(causal_mask=True, dropout_probability=0.25))
    ref = R.sdpa_backward(q, k, v, o, do, st, 0.5, causal=True, dropout_mask=keep,
                          dropout_scale=1 / 0.75)
    for got, want in zip((g["DQ"], g["DK"], g["DV"]), ref):
        np.testing.assert_array_equal(got, want)


def test_run_node_on_real_ir_nodes(rng):
    ops = pytest.importorskip("ncudnn.ir.ops")
    tensor = pytest.importorskip("ncudnn.ir.tensor")
    T = tensor.TensorDesc
    x, w = rng.uniform(-1, 1, size=(1, 2, 5, 5)), rng.uniform(-1, 1, size=(3, 2, 3, 3))
    node = ops.ConvFprop(inputs={"X": T(1, dims=x.shape), "W": T(2, dims=w.shape)},
                         outputs={"Y": T(3)}, spatial_dims=2, stride=(1, 1), pre_padding=(1, 1),
                         post_padding=(1, 1), dilation=(1, 1))
    y = run_node(node, {"X": x, "W": w})["Y"]
    np.testing.assert_allclose(y, R.conv_fprop(x, w, pre_pad=1, post_pad=1), rtol=1e-14)
    red = ops.Reduction(inputs={"X": T(4, dims=(2, 3))}, outputs={"Y": T(5, dims=(2, 1))}, mode=3)
    xx = rng.uniform(size=(2, 3))
    np.testing.assert_array_equal(run_node(red, {"X": xx})["Y"], xx.max(axis=1, keepdims=True))


def test_run_graph_conv_bias_relu(rng):
    ops = pytest.importorskip("ncudnn.ir.ops")
    tensor = pytest.importorskip("ncudnn.ir.tensor")
    T = tensor.TensorDesc
    x, w = rng.uniform(-1, 1, size=(1, 2, 4, 4)), rng.uniform(-1, 1, size=(3, 2, 3, 3))
    b = rng.uniform(-1, 1, size=(1, 3, 1, 1))
    tx, tw, tb = T(1, dims=x.shape), T(2, dims=w.shape), T(3, dims=b.shape)
    tc, ta, ty = T(4, is_virtual=True), T(5, is_virtual=True), T(6)
    conv = ops.ConvFprop(inputs={"X": tx, "W": tw}, outputs={"Y": tc}, spatial_dims=2,
                         stride=(1, 1), pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1))
    add = ops.Pointwise(inputs={"X": tc, "B": tb}, outputs={"Y": ta}, mode=0)
    relu = ops.Pointwise(inputs={"X": ta}, outputs={"Y": ty}, mode=100)
    env = R.run_graph([relu, add, conv][::-1], {1: x, 2: w, 3: b})
    want = np.maximum(R.conv_fprop(x, w, pre_pad=1, post_pad=1) + b, 0.0)
    np.testing.assert_allclose(env[6], want, rtol=1e-14)
    with pytest.raises(ValueError):
        R.run_graph([add], {3: b})


def test_run_graph_rounds_virtual_tensors(rng):
    ops = pytest.importorskip("ncudnn.ir.ops")
    T = pytest.importorskip("ncudnn.ir.tensor").TensorDesc
    import ml_dtypes
    x = rng.uniform(-1, 1, size=(4, 4))
    tx, tv, ty = T(1, dims=x.shape), T(2, is_virtual=True), T(3)
    n1 = ops.Pointwise(inputs={"X": tx}, outputs={"Y": tv}, mode=13)  # EXP
    n2 = ops.Pointwise(inputs={"X": tv}, outputs={"Y": ty}, mode=16)  # NEG
    exact = R.run_graph([n1, n2], {1: x})
    rounded = R.run_graph([n1, n2], {1: x}, round_virtual=ml_dtypes.bfloat16)
    np.testing.assert_array_equal(exact[3], -np.exp(x))
    want = -np.exp(x).astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(rounded[3], want)
    assert not np.array_equal(rounded[3], exact[3])
