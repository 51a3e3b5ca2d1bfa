"""Winograd conv engines end to end (simulator, tiny shapes): IR graph -> heuristics -> plan ->
execute, against the float64 oracle with poisoned outputs; rejections name the field; workspace exact."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.ir import ConvDgrad, ConvFprop, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.reference import conv as ref
from ncudnn.testing import poison_value, rel_err
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S
from ncudnn.ir import ConvWgrad
from ncudnn.engines.gemm import common as gc
from ncudnn.engines.winograd.common import WgradProblem, WinoProblem

F32 = DT.CUDNN_DATA_FLOAT
ENGINE = "conv_winograd_nonfused"
#: relative-error bounds (max |err| / max |ref|) of fp32 I/O per tile, from docs/winograd.md
TOL = {2: 2e-6, 4: 1e-5}


def tensor(uid, dims, dtype=F32, nhwc=False):
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), dtype, name=f"t{uid}")


def virt(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def attrs(pre=1, post=1, stride=1, dil=1, mode=CM.CUDNN_CROSS_CORRELATION):
    tup = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
    return dict(spatial_dims=2, stride=tup(stride), pre_padding=tup(pre), post_padding=tup(post),
                dilation=tup(dil), mode=mode)


def dev(a, t):
    order = sorted(range(a.ndim), key=lambda i: -t.strides[i])
    return cuda.to_device(np.ascontiguousarray(np.transpose(a, order)).reshape(-1))


def read(buf, t):
    h = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).copy()


def config(g, m):
    eng = registry.by_name(ENGINE)
    sub = api.problem(g)
    cands = [c for c in eng.candidates(sub, api.context()) if c.get(K.CUDNN_KNOB_TYPE_WINO_TILE) == m]
    assert cands, "no candidate for this tile"
    return cands[0]


def run(g, cfg, pack):
    assert api.check_support(g, cfg) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg)
    ws = cuda.to_device(np.full(max(plan.workspace_size, 1), 0xFF, np.uint8))
    api.execute(plan, pack, ws)
    return plan


def conv_graph(dims, k, a, nhwc=False, epilogue=False):
    n, c, h, w_ = dims
    P = ref.conv_output_shape(dims, (k, c, 3, 3), pre_pad=a["pre_padding"], post_pad=a["post_padding"])
    x, w, y = tensor(1, dims, nhwc=nhwc), tensor(2, (k, c, 3, 3), nhwc=nhwc), tensor(4, P, nhwc=nhwc)
    if not epilogue:
        return OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **a)]).finalize(), x, w, None, y
    b = tensor(3, (1, k, 1, 1), nhwc=nhwc)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, **a)
    add = Pointwise("bias", {"X": conv.outputs["Y"], "B": b}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([conv, add, relu]).finalize(), x, w, b, y


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("nhwc", [False, True])
def test_fprop_bias_relu(rng, m, nhwc):
    a = attrs(pre=1, post=1)
    g, x, w, b, y = conv_graph((1, 4, 6, 6), 4, a, nhwc=nhwc, epilogue=True)
    cfg = config(g, m)
    xv = rng.uniform(-1, 1, x.dims).astype(np.float32)
    wv = rng.uniform(-1, 1, w.dims).astype(np.float32)
    bv = rng.uniform(-1, 1, b.dims).astype(np.float32)
    out = cuda.to_device(np.full(y.span_elements(), poison_value(np.float32), np.float32))
    run(g, cfg, {1: dev(xv, x), 2: dev(wv, w), 3: dev(bv, b), 4: out})
    expect = np.maximum(ref.conv_fprop(xv, wv, pre_pad=1, post_pad=1) + bv, 0)
    got = read(out, y)
    assert np.isfinite(got).all()
    assert rel_err(got, expect) < TOL[m]


@pytest.mark.parametrize("m", [2, 4])
def test_fprop_odd_size_asymmetric_padding_convolution_mode(rng, m):
    """7x5 image, padding (0, 2) / (2, 1): partial edge tiles; CONVOLUTION mode flips the filter."""
    a = attrs(pre=(0, 2), post=(2, 1), mode=CM.CUDNN_CONVOLUTION)
    g, x, w, _, y = conv_graph((2, 3, 7, 5), 5, a)
    xv = rng.uniform(-1, 1, x.dims).astype(np.float32)
    wv = rng.uniform(-1, 1, w.dims).astype(np.float32)
    out = cuda.to_device(np.full(y.span_elements(), poison_value(np.float32), np.float32))
    run(g, config(g, m), {1: dev(xv, x), 2: dev(wv, w), 4: out})
    expect = ref.conv_fprop(xv, wv, pre_pad=(0, 2), post_pad=(2, 1), cross_correlation=False)
    assert rel_err(read(out, y), expect) < TOL[m]


def test_notes_workspace_and_knobs():
    g, *_ = conv_graph((1, 4, 6, 6), 8, attrs())
    eng = registry.by_name(ENGINE)
    sub = api.problem(g)
    c2, c4 = config(g, 2), config(g, 4)
    assert eng.config_notes(sub, c2) == (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD,)
    assert NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 in eng.config_notes(sub, c4)
    # U (16 x K x C) + V (16 x C x T) + M (16 x K x T) floats, T = 9 tiles of 2x2 / 4 tiles of 4x4
    assert eng.workspace_size(sub, c2) == 4 * 16 * (8 * 4 + 4 * 9 + 8 * 9)
    assert eng.workspace_size(sub, c4) == 4 * 36 * (8 * 4 + 4 * 4 + 8 * 4)
    assert api.build_plan(g, c2).parts[0].workspace_size == eng.workspace_size(sub, c2)
    bad = c2.with_knob(K.CUDNN_KNOB_TYPE_WINO_TILE, 3)
    assert eng.keep(sub, bad, None)[0] != S.CUDNN_STATUS_SUCCESS


@pytest.mark.parametrize("kw,word", [(dict(stride=2), "stride"), (dict(dil=2), "dilation")])
def test_rejects_stride_dilation(kw, word):
    x, w = tensor(1, (1, 4, 9, 9)), tensor(2, (4, 4, 3, 3))
    y = tensor(4, ref.conv_output_shape(x.dims, w.dims, stride=kw.get("stride", 1), dilation=kw.get("dil", 1),
                                        pre_pad=1, post_pad=1))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs(**kw))]).finalize()
    st, why = registry.by_name(ENGINE).check_support(api.problem(g), api.context())
    assert st != S.CUDNN_STATUS_SUCCESS and word in why and "node 'conv'" in why


def test_rejects_filter_groups_strided_dgrad():
    eng = registry.by_name(ENGINE)
    x, w, y = tensor(1, (1, 4, 6, 6)), tensor(2, (4, 4, 5, 5)), tensor(4, (1, 4, 6, 6))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs(pre=2, post=2))]).finalize()
    st, why = eng.check_support(api.problem(g), api.context())
    assert st != S.CUDNN_STATUS_SUCCESS and "W: filter (5, 5) is not 3x3" in why
    x, w, y = tensor(1, (1, 4, 6, 6)), tensor(2, (4, 2, 3, 3)), tensor(4, (1, 4, 6, 6))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs())]).finalize()
    st, why = registry.by_name("conv_winograd_fused").check_support(api.problem(g), api.context())
    assert st != S.CUDNN_STATUS_SUCCESS and "groups = 2" in why
    dy, w, dx = tensor(1, (1, 4, 3, 3)), tensor(2, (4, 4, 3, 3)), tensor(3, (1, 4, 6, 6))
    g = OpGraph([ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": dx}, **attrs(stride=2, pre=1, post=0))]).finalize()
    st, why = eng.check_support(api.problem(g), api.context())
    assert st != S.CUDNN_STATUS_SUCCESS and "stride (2, 2) is not 1" in why


@pytest.mark.parametrize("m,nhwc,mode,pre,post", [(2, False, CM.CUDNN_CROSS_CORRELATION, (1, 0), (1, 2)),
                                                  (4, True, CM.CUDNN_CONVOLUTION, (0, 1), (2, 1))])
def test_dgrad(rng, m, nhwc, mode, pre, post):
    """dgrad = fprop of DY with the 180-degree rotated filter, channels swapped, padding 2 - pre."""
    a = attrs(pre=pre, post=post, mode=mode)
    xdims, wdims = (1, 3, 6, 5), (5, 3, 3, 3)
    ydims = ref.conv_output_shape(xdims, wdims, pre_pad=pre, post_pad=post)
    dy, w, dx = tensor(1, ydims, nhwc=nhwc), tensor(2, wdims, nhwc=nhwc), tensor(3, xdims, nhwc=nhwc)
    g = OpGraph([ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": dx}, **a)]).finalize()
    dyv, wv = rng.uniform(-1, 1, ydims).astype(np.float32), rng.uniform(-1, 1, wdims).astype(np.float32)
    out = cuda.to_device(np.full(dx.span_elements(), poison_value(np.float32), np.float32))
    run(g, config(g, m), {1: dev(dyv, dy), 2: dev(wv, w), 3: out})
    expect = ref.conv_dgrad(dyv, wv, xdims, pre_pad=pre, post_pad=post,
                            cross_correlation=mode == CM.CUDNN_CROSS_CORRELATION)
    assert rel_err(read(out, dx), expect) < TOL[m]


def test_heuristics_prefer_winograd_on_big_3x3():
    """ResNet-50 3x3 layer shape: the cost model ranks Winograd first; tiny / 1x1 problems not."""
    x, w, y = tensor(1, (32, 128, 28, 28)), tensor(2, (128, 128, 3, 3)), tensor(3, (32, 128, 28, 28))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs())]).finalize()
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    assert ecs[0].config.engine == ENGINE
    assert ecs[0].config.get(K.CUDNN_KNOB_TYPE_WINO_TILE) == 4


@pytest.mark.parametrize("dt,np_dt,tol", [(DT.CUDNN_DATA_HALF, np.float16, 3e-3), (DT.CUDNN_DATA_BFLOAT16, None, 1.5e-2)])
def test_half_io_fp32_math(rng, dt, np_dt, tol):
    """FP16 / BF16 tensors: converted on load, FP32 transforms / GEMM / epilogue, rounded on store."""
    import ml_dtypes

    np_dt = np_dt or ml_dtypes.bfloat16
    a = attrs()
    x, w, y = tensor(1, (1, 3, 5, 6), dt), tensor(2, (4, 3, 3, 3), dt), tensor(4, (1, 4, 5, 6), dt)
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **a)]).finalize()
    xv, wv = rng.uniform(-1, 1, x.dims).astype(np_dt), rng.uniform(-1, 1, w.dims).astype(np_dt)
    store = np.uint16 if np_dt is ml_dtypes.bfloat16 else np_dt
    xd, wd = (cuda.to_device(np.ascontiguousarray(v).view(store).reshape(-1)) for v in (xv, wv))
    out = cuda.to_device(np.full(y.span_elements(), 0x7FC0 if store is np.uint16 else np.nan, store))
    run(g, config(g, 4), {1: xd, 2: wd, 4: out})
    got = out.copy_to_host().view(np_dt).reshape(y.dims).astype(np.float64)
    expect = ref.conv_fprop(xv.astype(np.float64), wv.astype(np.float64), pre_pad=1, post_pad=1)
    assert rel_err(got, expect) < tol


def test_alpha_beta_blend(rng):
    x, w, y = tensor(1, (1, 2, 4, 5)), tensor(2, (3, 2, 3, 3)), tensor(4, (1, 3, 4, 5))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, alpha=2.0, beta=-1.0, **attrs())]).finalize()
    xv, wv, yv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (x.dims, w.dims, y.dims))
    out = dev(yv, y)
    run(g, config(g, 2), {1: dev(xv, x), 2: dev(wv, w), 4: out})
    assert rel_err(read(out, y), 2.0 * ref.conv_fprop(xv, wv, pre_pad=1, post_pad=1) - yv) < TOL[2]


@pytest.mark.parametrize("m,nhwc,dgrad", [(2, False, False), (4, True, False), (2, True, True)])
def test_groups(rng, m, nhwc, dgrad):
    """Two groups: alpha^2 x G GEMMs of Kg x T x Cg over the same workspace layout."""
    xdims, wdims = (1, 4, 5, 6), (6, 2, 3, 3)
    ydims = ref.conv_output_shape(xdims, wdims, pre_pad=1, post_pad=1, groups=2)
    eng = registry.by_name(ENGINE)
    if dgrad:
        dy, w, dx = tensor(1, ydims, nhwc=nhwc), tensor(2, wdims, nhwc=nhwc), tensor(3, xdims, nhwc=nhwc)
        g = OpGraph([ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": dx}, **attrs())]).finalize()
        src, out_t = dy, dx
    else:
        x, w, y = tensor(1, xdims, nhwc=nhwc), tensor(2, wdims, nhwc=nhwc), tensor(3, ydims, nhwc=nhwc)
        g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs())]).finalize()
        src, out_t = x, y
    sv, wv = rng.uniform(-1, 1, src.dims).astype(np.float32), rng.uniform(-1, 1, wdims).astype(np.float32)
    cfg = config(g, m)
    a2, T = (m + 2) ** 2, -(-out_t.dims[2] // m) * -(-out_t.dims[3] // m)
    cin, cout = src.dims[1], out_t.dims[1]
    assert eng.workspace_size(api.problem(g), cfg) == 4 * a2 * (cout * cin // 2 + cin * T + cout * T)
    out = cuda.to_device(np.full(out_t.span_elements(), poison_value(np.float32), np.float32))
    run(g, cfg, {1: dev(sv, src), 2: dev(wv, w), 3: out})
    if dgrad:
        expect = ref.conv_dgrad(sv, wv, xdims, pre_pad=1, post_pad=1, groups=2)
    else:
        expect = ref.conv_fprop(sv, wv, pre_pad=1, post_pad=1, groups=2)
    assert rel_err(read(out, out_t), expect) < TOL[m]


# WinoProblem (fprop / dgrad) and WgradProblem refuse through one check (winograd.common.check_3x3_s1)
def _t(uid, dims):
    return TensorDesc(uid, tuple(dims), packed_strides(dims), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")


def _sub(kind, fs=3, stride=1, dil=1):
    x, w = _t(1, (1, 4, 9, 9)), _t(2, (8, 4, fs, fs))
    o = (9 + 2 - dil * (fs - 1) - 1) // stride + 1
    y = _t(3, (1, 8, o, o))
    a = dict(spatial_dims=2, stride=(stride,) * 2, pre_padding=(1, 1), post_padding=(1, 1), dilation=(dil,) * 2,
             mode=CM.CUDNN_CROSS_CORRELATION)
    node = {"fprop": lambda: ConvFprop("cv", {"X": x, "W": w}, {"Y": y}, **a),
            "dgrad": lambda: ConvDgrad("cv", {"DY": y, "W": w}, {"DX": x}, **a),
            "wgrad": lambda: ConvWgrad("cv", {"X": x, "DY": y}, {"DW": w}, **a)}[kind]()
    return api.problem(OpGraph([node]).finalize())


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_problems_refuse_naming_the_node_and_filter_port(kind):
    make = WgradProblem if kind == "wgrad" else WinoProblem
    port = "DW" if kind == "wgrad" else "W"
    for kw, why in ((dict(fs=5), rf"{port}: filter \(5, 5\) is not 3x3"), (dict(stride=2), r"stride \(2, 2\) is not 1"),
                    (dict(dil=2), r"dilation \(2, 2\) is not 1")):
        with pytest.raises(gc.Reject, match=r"node 'cv': " + why):
            make(_sub(kind, **kw))
    p = make(_sub(kind))
    assert (p.C, p.K, p.pad, p.cfast) == ((8, 4) if kind == "dgrad" else (4, 8)) + ((1, 1), False)
