"""GEMM-family conv engines end to end (simulator, tiny shapes): IR graph -> heuristics -> plan ->
execute on device arrays, against the float64 oracle (ncudnn.reference.conv) with poisoned outputs."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.gemm import common as gc
from ncudnn.ir import ConvDgrad, ConvFprop, ConvWgrad, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.reference import conv as ref
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S
from ncudnn.kernels.gemm import splitk

F32 = DT.CUDNN_DATA_FLOAT
NP = {DT.CUDNN_DATA_FLOAT: np.float32, DT.CUDNN_DATA_HALF: np.float16, DT.CUDNN_DATA_DOUBLE: np.float64}
TINY = gc.CONV_TILES.index(next(t for t in gc.CONV_TILES if t.label.startswith("8x8x4")))


def tensor(uid, dims, dtype=F32, nhwc=False):
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), dtype, name=f"t{uid}")


def virt(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def conv_attrs(nsp, stride=1, pre=0, post=0, dil=1, mode=CM.CUDNN_CROSS_CORRELATION):
    tup = lambda v: (v,) * nsp if isinstance(v, int) else tuple(v)  # noqa: E731
    return dict(spatial_dims=nsp, stride=tup(stride), pre_padding=tup(pre), post_padding=tup(post),
                dilation=tup(dil), mode=mode)


def ref_kw(a):
    return dict(stride=a["stride"], pre_pad=a["pre_padding"], post_pad=a["post_padding"], dilation=a["dilation"],
                cross_correlation=a["mode"] == CM.CUDNN_CROSS_CORRELATION)


def dev(a, t):
    """Host array ``a`` laid out at tensor ``t``'s strides in a flat device buffer."""
    order = sorted(range(a.ndim), key=lambda i: -t.strides[i])
    return cuda.to_device(np.ascontiguousarray(np.transpose(a, order)).reshape(-1))


def out_buf(t, dtype=np.float32):
    return cuda.to_device(np.full(t.span_elements(), poison_value(dtype), dtype))


def read(buf, t):
    h = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).copy()


def cfg(g, engine, tile=TINY, **knobs):
    eng = registry.by_name(engine)
    c = eng.default_config(api.problem(g)).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile)
    for k, v in knobs.items():
        c = c.with_knob(getattr(K, "CUDNN_KNOB_TYPE_" + k), v)
    return c


def run(g, config, pack, ws_bytes=None):
    assert api.check_support(g, config) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, config)
    ws = None
    if plan.workspace_size:
        ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8))
    if ws_bytes is not None:
        assert registry.by_name(config.engine).workspace_size(api.problem(g), config) == ws_bytes
    api.execute(plan, pack, ws)
    return plan


def fprop_bias_relu(rng, dims, wdims, attrs, nhwc=False, groups=1, engine="conv_implicit_gemm", **knobs):
    nsp = len(dims) - 2
    x, w = tensor(1, dims, nhwc=nhwc), tensor(2, wdims, nhwc=nhwc)
    ydims = ref.conv_output_shape(dims, wdims, stride=attrs["stride"], pre_pad=attrs["pre_padding"],
                                  post_pad=attrs["post_padding"], dilation=attrs["dilation"], groups=groups)
    b, y = tensor(3, (1, wdims[0]) + (1,) * nsp, nhwc=nhwc), tensor(4, ydims, nhwc=nhwc)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, **attrs)
    add = Pointwise("bias", {"X": conv.outputs["Y"], "B": b}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    g = OpGraph([conv, add, relu]).finalize()
    xv, wv = rng.uniform(-1, 1, dims).astype(np.float32), rng.uniform(-1, 1, wdims).astype(np.float32)
    bv = rng.uniform(-1, 1, b.dims).astype(np.float32)
    out = out_buf(y)
    run(g, cfg(g, engine, **knobs), {1: dev(xv, x), 2: dev(wv, w), 3: dev(bv, b), 4: out})
    expect = np.maximum(ref.conv_fprop(xv, wv, groups=groups, **ref_kw(attrs)) + bv, 0)
    assert_close(read(out, y), expect, "float32")


@pytest.mark.parametrize("engine", ["conv_implicit_gemm", "conv_implicit_precomp"])
def test_fprop_bias_relu_nchw(rng, engine):
    fprop_bias_relu(rng, (1, 3, 5, 5), (4, 3, 3, 3), conv_attrs(2, pre=1, post=1), engine=engine)


@pytest.mark.parametrize("engine", ["conv_implicit_gemm", "conv_implicit_precomp"])
def test_fprop_nhwc_strided_dilated_grouped_convolution_mode(rng, engine):
    attrs = conv_attrs(2, stride=(2, 1), pre=(1, 0), post=(0, 2), dil=(1, 2), mode=CM.CUDNN_CONVOLUTION)
    fprop_bias_relu(rng, (2, 4, 5, 4), (6, 2, 2, 3), attrs, nhwc=True, groups=2, engine=engine)


def test_fprop_1d_and_3d(rng):
    fprop_bias_relu(rng, (1, 2, 7), (3, 2, 3), conv_attrs(1, stride=2, pre=1, post=1))
    fprop_bias_relu(rng, (1, 2, 3, 3, 3), (2, 2, 2, 2, 2), conv_attrs(3, pre=(1, 0, 0)), engine="conv_implicit_precomp")


def test_fprop_split_k_workspace_exact(rng):
    dims, wdims = (1, 4, 4, 4), (4, 4, 3, 3)  # K = 36 = 4 slices of 8 with BLOCK_K 4 ... exact partials
    attrs = conv_attrs(2, pre=1, post=1)
    x, w, y = tensor(1, dims), tensor(2, wdims), tensor(3, (1, 4, 4, 4))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs)]).finalize()
    c = cfg(g, "conv_implicit_gemm", SPLIT_K=4)
    xv, wv = rng.uniform(-1, 1, dims).astype(np.float32), rng.uniform(-1, 1, wdims).astype(np.float32)
    out = out_buf(y)
    run(g, c, {1: dev(xv, x), 2: dev(wv, w), 3: out}, ws_bytes=1 * 4 * 16 * 4 * 4)
    assert_close(read(out, y), ref.conv_fprop(xv, wv, **ref_kw(attrs)), "float32")


@pytest.mark.parametrize("engine", ["conv_implicit_gemm", "conv_implicit_precomp"])
def test_dgrad_strided(rng, engine):
    attrs = conv_attrs(2, stride=2, pre=1, post=0)
    xdims, wdims = (1, 3, 5, 5), (4, 3, 3, 3)
    ydims = ref.conv_output_shape(xdims, wdims, stride=2, pre_pad=1, post_pad=0)
    dy, w, dx = tensor(1, ydims), tensor(2, wdims), tensor(3, xdims)
    g = OpGraph([ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": dx}, **attrs)]).finalize()
    dyv, wv = rng.uniform(-1, 1, ydims).astype(np.float32), rng.uniform(-1, 1, wdims).astype(np.float32)
    out = out_buf(dx)
    run(g, cfg(g, engine), {1: dev(dyv, dy), 2: dev(wv, w), 3: out})
    assert_close(read(out, dx), ref.conv_dgrad(dyv, wv, xdims, **ref_kw(attrs)), "float32")


@pytest.mark.parametrize("engine,nhwc,split,buf", [("conv_implicit_gemm", False, 2, 1),
                                                   ("conv_implicit_precomp", True, 4, 1),
                                                   ("conv_implicit_gemm", True, 2, 0)])
def test_wgrad_split_over_npq(rng, engine, nhwc, split, buf):
    attrs = conv_attrs(2, pre=1, post=1)
    xdims, wdims = (2, 2, 4, 4), (3, 2, 3, 3)
    ydims = ref.conv_output_shape(xdims, wdims, pre_pad=1, post_pad=1)
    x, dy, dw = tensor(1, xdims, nhwc=nhwc), tensor(2, ydims, nhwc=nhwc), tensor(3, wdims, nhwc=nhwc)
    g = OpGraph([ConvWgrad("wgrad", {"X": x, "DY": dy}, {"DW": dw}, **attrs)]).finalize()
    c = cfg(g, engine, SPLIT_K=split, SPLIT_K_BUF=buf)
    notes = registry.by_name(engine).config_notes(api.problem(g), c)
    from ncudnn.types import cudnnBackendNumericalNote_t as NN
    assert (NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC in notes) == (buf == 0)
    xv, dyv = rng.uniform(-1, 1, xdims).astype(np.float32), rng.uniform(-1, 1, ydims).astype(np.float32)
    out = out_buf(dw)
    ws = 3 * 18 * split * 4 if buf else 0  # [groups, SPLIT_K, M = K, N = C*R*S] fp32 partials
    run(g, c, {1: dev(xv, x), 2: dev(dyv, dy), 3: out}, ws_bytes=ws)
    assert_close(read(out, dw), ref.conv_wgrad(xv, dyv, wdims, **ref_kw(attrs)), "float32")


def test_fprop_residual_fp16_and_alpha_beta(rng):
    h = DT.CUDNN_DATA_HALF
    dims, wdims = (1, 2, 4, 4), (3, 2, 3, 3)
    attrs = conv_attrs(2, pre=1, post=1)
    x, w, r, y = tensor(1, dims, h), tensor(2, wdims, h), tensor(3, (1, 3, 4, 4), h), tensor(4, (1, 3, 4, 4), h)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, alpha=0.5, **attrs)
    add = Pointwise("res", {"X": r, "B": conv.outputs["Y"]}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    act = Pointwise("gelu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_GELU_FWD)
    g = OpGraph([conv, add, act]).finalize()
    xv, wv, rv = (rng.uniform(-1, 1, d).astype(np.float16) for d in (dims, wdims, r.dims))
    out = out_buf(y, np.float16)
    run(g, cfg(g, "conv_implicit_precomp"), {1: dev(xv, x), 2: dev(wv, w), 3: dev(rv, r), 4: out})
    from ncudnn.reference.pointwise import pointwise as rpw
    expect = rpw(PM.CUDNN_POINTWISE_GELU_FWD, 0.5 * ref.conv_fprop(xv, wv, **ref_kw(attrs)) + rv.astype(np.float64))
    assert_close(read(out, y), expect, "float16")


def test_fprop_beta_blends_output(rng):
    dims, wdims = (1, 2, 3, 3), (2, 2, 1, 1)
    attrs = conv_attrs(2)
    x, w, y = tensor(1, dims), tensor(2, wdims), tensor(3, (1, 2, 3, 3))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, alpha=2.0, beta=-1.0, **attrs)]).finalize()
    xv, wv, yv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (dims, wdims, y.dims))
    out = dev(yv, y)
    run(g, cfg(g, "conv_gemm_1x1"), {1: dev(xv, x), 2: dev(wv, w), 3: out})
    assert_close(read(out, y), 2.0 * ref.conv_fprop(xv, wv) - yv, "float32")


@pytest.mark.parametrize("nhwc", [True, False])
def test_1x1_gemm_engine(rng, nhwc):
    fprop_bias_relu(rng, (2, 3, 3, 2), (5, 3, 1, 1), conv_attrs(2, dil=2), nhwc=nhwc, engine="conv_gemm_1x1")


def test_heuristics_rank_and_fallback():
    attrs = conv_attrs(2, pre=1, post=1)
    x, w, y = tensor(1, (32, 128, 28, 28)), tensor(2, (256, 128, 3, 3)), tensor(3, (32, 256, 28, 28))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs)]).finalize()
    mine = ("conv_implicit_gemm", "conv_implicit_precomp", "conv_gemm_1x1")
    ecs = [e for e in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A) if e.config.engine in mine]
    assert ecs[0].config.engine == "conv_implicit_precomp"
    assert gc.CONV_TILES[ecs[0].config.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)].label.startswith("128x128x16")
    fb = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_FALLBACK)
    assert "conv_implicit_gemm" in {e.config.engine for e in fb}
    assert not {e.config.engine for e in fb} & {"conv_implicit_precomp", "conv_gemm_1x1"}
    x1, w1, y1 = tensor(1, (32, 256, 56, 56), nhwc=True), tensor(2, (64, 256, 1, 1), nhwc=True), \
        tensor(3, (32, 64, 56, 56), nhwc=True)
    g1 = OpGraph([ConvFprop("conv", {"X": x1, "W": w1}, {"Y": y1}, **conv_attrs(2))]).finalize()
    ecs1 = [e for e in api.get_heuristics(g1, HM.CUDNN_HEUR_MODE_A) if e.config.engine in mine]
    assert ecs1[0].config.engine == "conv_gemm_1x1"


def test_unsupported_cases_name_the_node_and_field():
    attrs = conv_attrs(2, pre=1, post=1)
    x, dy, dw = tensor(1, (1, 2, 4, 4)), tensor(2, (1, 3, 4, 4)), tensor(3, (3, 2, 3, 3))
    g = OpGraph([ConvWgrad("wg", {"X": x, "DY": dy}, {"DW": dw}, **attrs)]).finalize()
    st, why = api.check_support(g, "conv_gemm_1x1")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "'wg'" in why and "DW" in why and "not 1x1" in why
    # a 1x1 wgrad is supported unpadded only: the padding is named
    dw1 = tensor(3, (3, 2, 1, 1))
    g1 = OpGraph([ConvWgrad("wg", {"X": x, "DY": tensor(2, (1, 3, 6, 6))}, {"DW": dw1}, **attrs)]).finalize()
    st, why = api.check_support(g1, "conv_gemm_1x1")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "'wg'" in why and "padding" in why
    # a per-channel MUL (scale) fuses (issue #24); a per-row operand of a conv output does not
    x, w, s, y = tensor(1, (1, 2, 4, 4)), tensor(2, (3, 2, 3, 3)), tensor(3, (1, 3, 1, 1)), tensor(4, (1, 3, 4, 4))
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, **attrs)
    g2 = OpGraph([conv, Pointwise("chscale", {"X": conv.outputs["Y"], "B": s}, {"Y": y},
                                  mode=PM.CUDNN_POINTWISE_MUL)]).finalize()
    srow = tensor(3, (1, 1, 4, 1))
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, **attrs)
    g2b = OpGraph([conv, Pointwise("rowscale", {"X": conv.outputs["Y"], "B": srow}, {"Y": y},
                                   mode=PM.CUDNN_POINTWISE_MUL)]).finalize()
    for eng in ("conv_implicit_gemm", "conv_implicit_precomp"):
        assert api.check_support(g2, eng)[0] == S.CUDNN_STATUS_SUCCESS
        st, why = api.check_support(g2b, eng)
        assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "rowscale" in why and "per-channel" in why
    st, why = api.check_support(g2, "conv_gemm_1x1")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "not 1x1" in why
    # SUB with the conv output as the second operand is not mode(chain, other)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, **attrs)
    r = tensor(5, (1, 3, 4, 4))
    g3 = OpGraph([conv, Pointwise("rsub", {"X": r, "B": conv.outputs["Y"]}, {"Y": y},
                                  mode=PM.CUDNN_POINTWISE_SUB)]).finalize()
    st, why = api.check_support(g3, "conv_implicit_gemm")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "rsub" in why and "commutative" in why


def test_dgrad_fused_drelu(rng):
    # dx = relu_bwd(dgrad(dy, w), x): the backward activation reads the forward input x as its operand
    attrs = conv_attrs(2, pre=1, post=1)
    xdims, wdims = (1, 2, 4, 4), (3, 2, 3, 3)
    dy, w, x, dx = tensor(1, (1, 3, 4, 4)), tensor(2, wdims), tensor(3, xdims), tensor(4, xdims)
    vdx = TensorDesc(10, xdims, packed_strides(xdims), F32, is_virtual=True, name="vdx")
    dg = ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": vdx}, **attrs)
    drelu = Pointwise("drelu", {"DY": dg.outputs["DX"], "X": x}, {"DX": dx}, mode=PM.CUDNN_POINTWISE_RELU_BWD)
    g = OpGraph([dg, drelu]).finalize()
    dyv, wv, xv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (dy.dims, wdims, xdims))
    out = out_buf(dx)
    run(g, cfg(g, "conv_implicit_gemm"), {1: dev(dyv, dy), 2: dev(wv, w), 3: dev(xv, x), 4: out})
    expect = ref.conv_dgrad(dyv, wv, xdims, **ref_kw(attrs)) * (xv > 0)
    assert_close(read(out, dx), expect, "float32")


def test_depthwise_nhwc(rng):
    fprop_bias_relu(rng, (1, 4, 5, 5), (4, 1, 3, 3), conv_attrs(2, pre=1, post=1), nhwc=True, groups=4,
                    engine="conv_implicit_precomp")


def test_fprop_relu_then_genstats_tail(rng):
    # ConvBNfprop-style: y = relu(conv(x, w)) written, then per-channel sum / sum of squares of y
    from ncudnn.ir import GenStats
    from ncudnn.reference.norm import genstats as ref_genstats
    attrs = conv_attrs(2, pre=1, post=1)
    x, w, y = tensor(1, (1, 2, 4, 4)), tensor(2, (3, 2, 3, 3)), tensor(3, (1, 3, 4, 4))
    s1, s2 = tensor(4, (1, 3, 1, 1)), tensor(5, (1, 3, 1, 1))
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, **attrs)
    relu = Pointwise("relu", {"X": conv.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    gs = GenStats("stats", {"X": y}, {"SUM": s1, "SQSUM": s2})
    g = OpGraph([conv, relu, gs]).finalize()
    sub = api.problem(g)
    assert sub.tail is gs
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    assert ecs and ecs[0].config.engine.startswith("conv_")
    xv, wv = rng.uniform(-1, 1, x.dims).astype(np.float32), rng.uniform(-1, 1, w.dims).astype(np.float32)
    out, o1, o2 = out_buf(y), out_buf(s1), out_buf(s2)
    run(g, cfg(g, "conv_implicit_gemm"), {1: dev(xv, x), 2: dev(wv, w), 3: out, 4: o1, 5: o2})
    expect = np.maximum(ref.conv_fprop(xv, wv, **ref_kw(attrs)), 0)
    assert_close(read(out, y), expect, "float32")
    e1, e2 = ref_genstats(expect)
    assert_close(read(o1, s1), e1, "float32", "sum")
    assert_close(read(o2, s2), e2, "float32", "sqsum")


def test_deterministic_context_drops_atomic_split_k():
    from ncudnn.engines.base import BuildContext
    from ncudnn.types import cudnnBackendNumericalNote_t as NN
    attrs = conv_attrs(2, pre=1, post=1)
    x, dy, dw = tensor(1, (8, 64, 14, 14)), tensor(2, (8, 64, 14, 14)), tensor(3, (64, 64, 3, 3))
    g = OpGraph([ConvWgrad("wg", {"X": x, "DY": dy}, {"DW": dw}, **attrs)]).finalize()
    loose = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    assert any(NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC in e.numerical_notes for e in loose)
    strict = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A, BuildContext(deterministic=True))
    assert strict and all(NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC not in e.numerical_notes for e in strict)
    # (engines without a SPLIT_K knob, e.g. conv_winograd_nonfused, are checked by the notes above)
    split = [e for e in strict if (e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K) or 1) > 1]
    assert split  # the rule below is exercised: split-K candidates remain when deterministic
    for e in split:
        assert e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1) == 1, e.name
        assert e.workspace_size > 0, e.name  # deterministic split-K: partials in the workspace


@pytest.mark.parametrize("nhwc", [True, False])
def test_1x1_gemm_engine_dgrad_drelu(rng, nhwc):
    # dx = relu_bwd(dy . w, x) as one plain GEMM (rows = pixels, cols = C, reduction over K)
    xdims, wdims, ydims = (2, 3, 3, 2), (5, 3, 1, 1), (2, 5, 3, 2)
    dy, w, x, dx = (tensor(1, ydims, nhwc=nhwc), tensor(2, wdims, nhwc=nhwc), tensor(3, xdims, nhwc=nhwc),
                    tensor(4, xdims, nhwc=nhwc))
    vdx = TensorDesc(10, xdims, dx.strides, F32, is_virtual=True, name="vdx")
    attrs = conv_attrs(2, mode=CM.CUDNN_CONVOLUTION)
    dg = ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": vdx}, alpha=0.5, **attrs)
    drelu = Pointwise("drelu", {"DY": dg.outputs["DX"], "X": x}, {"DX": dx}, mode=PM.CUDNN_POINTWISE_RELU_BWD)
    g = OpGraph([dg, drelu]).finalize()
    dyv, wv, xv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (ydims, wdims, xdims))
    out = out_buf(dx)
    run(g, cfg(g, "conv_gemm_1x1"), {1: dev(dyv, dy), 2: dev(wv, w), 3: dev(xv, x), 4: out})
    expect = 0.5 * ref.conv_dgrad(dyv, wv, xdims, **ref_kw(attrs)) * (xv > 0)
    assert_close(read(out, dx), expect, "float32")


def test_1x1_gemm_engine_dgrad_refuses_stride_and_ranks_first():
    dy, w, dx = tensor(1, (1, 3, 2, 2)), tensor(2, (3, 2, 1, 1)), tensor(3, (1, 2, 4, 4))
    g = OpGraph([ConvDgrad("dg", {"DY": dy, "W": w}, {"DX": dx}, **conv_attrs(2, stride=2))]).finalize()
    st, why = api.check_support(g, "conv_gemm_1x1")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "stride" in why
    dy, w, dx = (tensor(1, (32, 256, 14, 14), nhwc=True), tensor(2, (256, 1024, 1, 1), nhwc=True),
                 tensor(3, (32, 1024, 14, 14), nhwc=True))
    g = OpGraph([ConvDgrad("dg", {"DY": dy, "W": w}, {"DX": dx}, **conv_attrs(2))]).finalize()
    mine = ("conv_implicit_gemm", "conv_implicit_precomp", "conv_gemm_1x1")
    ecs = [e for e in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A) if e.config.engine in mine]
    assert ecs[0].config.engine == "conv_gemm_1x1"


def test_wgrad_ranking_fits_tile_to_k_and_splits_npq():
    # ResNet-50 conv2 wgrad (M = K = 64, N = C*R*S = 576, reduction N*P*Q = 100 352): the first
    # candidate has no dead tile rows and splits the reduction over at least one wave of blocks
    from ncudnn.engines.conv.common import wgrad_splits
    from ncudnn.engines.device import H200
    attrs = conv_attrs(2, pre=1, post=1)
    x, dy, dw = (tensor(1, (32, 64, 56, 56), nhwc=True), tensor(2, (32, 64, 56, 56), nhwc=True),
                 tensor(3, (64, 64, 3, 3), nhwc=True))
    g = OpGraph([ConvWgrad("wg", {"X": x, "DY": dy}, {"DW": dw}, **attrs)]).finalize()
    mine = ("conv_implicit_gemm", "conv_implicit_precomp")
    best = next(e for e in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A) if e.config.engine in mine)
    tile = gc.CONV_TILES[best.config.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)]
    split = best.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K)
    assert tile.cfg.BLOCK_M == 64 and split >= 32
    assert best.workspace_size == split * 64 * 576 * 4
    big = gc.CONV_TILES[0]
    sp = wgrad_splits(big, 5, 100352, H200)
    assert sp and all(s & (s - 1) == 0 and 100352 >= s * big.cfg.BLOCK_K * 8 for s in sp)
    assert 5 * sp[0] >= 132 // 2
    assert wgrad_splits(big, 5, 64, H200) == ()      # too short a reduction to split at all


def test_dgrad_three_channel_stem_is_supported():
    # M = 32*224*224 rows with N = 3 columns: the narrow tiles would need > 65535 tile rows
    attrs = conv_attrs(2, stride=2, pre=3, post=2)
    dy, w, dx = (tensor(1, (32, 64, 112, 112), nhwc=True), tensor(2, (64, 3, 7, 7), nhwc=True),
                 tensor(3, (32, 3, 224, 224), nhwc=True))
    g = OpGraph([ConvDgrad("dg", {"DY": dy, "W": w}, {"DX": dx}, **attrs)]).finalize()
    for eng in ("conv_implicit_gemm", "conv_implicit_precomp"):
        assert api.check_support(g, eng) == (S.CUDNN_STATUS_SUCCESS, "")
        for c in registry.by_name(eng).candidates(api.problem(g), None):
            assert -(-32 * 224 * 224 // gc.CONV_TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)].cfg.BLOCK_M) <= 65535


def test_precomp_table_packs_coordinates_or_refuses():
    # pack3 holds coordinates < 1024: a tap offset of 2*600 does not pack -> precomp refuses, implicit runs
    from ncudnn.kernels.conv.table import pack3
    assert int(pack3(np.array([3]), np.array([1023]), np.array([7]))[0]) == (3 << 20) | (1023 << 10) | 7
    x, w, y = tensor(1, (1, 1, 1300)), tensor(2, (1, 1, 3)), tensor(3, (1, 1, 100))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **conv_attrs(1, dil=600))]).finalize()
    st, why = api.check_support(g, "conv_implicit_precomp")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE and "conv" in why and "10 bits" in why
    assert api.check_support(g, "conv_implicit_gemm") == (S.CUDNN_STATUS_SUCCESS, "")


@pytest.mark.parametrize("nhwc", [False, True])
def test_dgrad_phased_split_rs_with_drelu(rng, nhwc):
    # SPLIT_RS = 1: one stride-1 GEMM per output phase; the fused relu_bwd reads x at the phase's pixels
    attrs = conv_attrs(2, stride=2, pre=1, post=0)
    xdims, wdims = (1, 3, 5, 6), (4, 3, 3, 3)
    ydims = ref.conv_output_shape(xdims, wdims, stride=2, pre_pad=1, post_pad=0)
    dy, w, x, dx = (tensor(1, ydims, nhwc=nhwc), tensor(2, wdims, nhwc=nhwc), tensor(3, xdims, nhwc=nhwc),
                    tensor(4, xdims, nhwc=nhwc))
    vdx = TensorDesc(10, xdims, dx.strides, F32, is_virtual=True, name="vdx")
    dg = ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": vdx}, **attrs)
    drelu = Pointwise("drelu", {"DY": dg.outputs["DX"], "X": x}, {"DX": dx}, mode=PM.CUDNN_POINTWISE_RELU_BWD)
    g = OpGraph([dg, drelu]).finalize()
    dyv, wv, xv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (ydims, wdims, xdims))
    out = out_buf(dx)
    run(g, cfg(g, "conv_implicit_precomp", SPLIT_RS=1), {1: dev(dyv, dy), 2: dev(wv, w), 3: dev(xv, x), 4: out},
        ws_bytes=0)
    expect = ref.conv_dgrad(dyv, wv, xdims, **ref_kw(attrs)) * (xv > 0)
    assert_close(read(out, dx), expect, "float32")


def test_split_rs_refused_off_strided_dgrad_and_ranked_for_it():
    attrs = conv_attrs(2, pre=1, post=1)
    x, w, y = tensor(1, (1, 2, 4, 4)), tensor(2, (3, 2, 3, 3)), tensor(3, (1, 3, 4, 4))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs)]).finalize()
    st, why = api.check_support(g, cfg(g, "conv_implicit_precomp", SPLIT_RS=1))
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "SPLIT_RS" in why
    # ResNet-50 c3 3x3 stride-2 dgrad at N = 32: the per-phase variant ranks first among precomp configs
    s2 = conv_attrs(2, stride=2, pre=1, post=1)
    dy, w, dx = (tensor(1, (32, 128, 28, 28), nhwc=True), tensor(2, (128, 128, 3, 3), nhwc=True),
                 tensor(3, (32, 128, 56, 56), nhwc=True))
    g2 = OpGraph([ConvDgrad("dg", {"DY": dy, "W": w}, {"DX": dx}, **s2)]).finalize()
    ecs = [e for e in api.get_heuristics(g2, HM.CUDNN_HEUR_MODE_A) if e.config.engine == "conv_implicit_precomp"]
    assert ecs and ecs[0].config.get(K.CUDNN_KNOB_TYPE_SPLIT_RS) == 1


# gemm_common.BlockLaunch's split-K reduce: from splitk.WIDE_FROM slices the wide reduce (the implicit-GEMM wgrad split over N*P*Q)
_bl_TINY = gc.CONV_TILES.index(next(t for t in gc.CONV_TILES if t.label.startswith("8x8x4")))


def _t(uid, dims, nhwc):
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")


def _dev(a, t):
    order = sorted(range(a.ndim), key=lambda i: -t.strides[i])
    return cuda.to_device(np.ascontiguousarray(np.transpose(a, order)).reshape(-1))


@pytest.mark.parametrize("split,nhwc", [(8, False)])
def test_wgrad_split_k_wide_reduce(rng, split, nhwc):
    xdims, wdims, ydims = (2, 2, 5, 5), (3, 2, 3, 3), (2, 3, 5, 5)
    attrs = dict(spatial_dims=2, stride=(1, 1), pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1),
                 mode=CM.CUDNN_CROSS_CORRELATION)
    x, dy, dw = _t(1, xdims, nhwc), _t(2, ydims, nhwc), _t(3, wdims, nhwc)
    g = OpGraph([ConvWgrad("wgrad", {"X": x, "DY": dy}, {"DW": dw}, **attrs)]).finalize()
    eng = registry.by_name("conv_implicit_gemm")
    cfg = eng.default_config(api.problem(g)).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, _bl_TINY)
    cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, split).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1)
    plan = api.build_plan(g, cfg)
    (part,) = plan.parts
    assert (part.bl.wide is not None) == (split >= splitk.WIDE_FROM)
    xv = rng.uniform(-1, 1, xdims).astype(np.float32)
    dyv = rng.uniform(-1, 1, ydims).astype(np.float32)
    out = cuda.to_device(np.full(dw.span_elements(), poison_value(np.float32), np.float32))
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8))
    api.execute(plan, {1: _dev(xv, x), 2: _dev(dyv, dy), 3: out}, ws)
    h = out.copy_to_host()
    got = np.lib.stride_tricks.as_strided(h, wdims, [s * 4 for s in dw.strides]).copy()
    want = ref.conv_wgrad(xv, dyv, wdims, stride=(1, 1), pre_pad=(1, 1), post_pad=(1, 1), dilation=(1, 1),
                          cross_correlation=True)
    assert_close(got, want, "float32")
