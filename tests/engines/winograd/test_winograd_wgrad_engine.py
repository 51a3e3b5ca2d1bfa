"""conv_winograd_nonfused on conv_wgrad (Winograd F(3x3, r x r) weight gradient) end to end in the
simulator: IR graph -> candidates -> plan -> execute against the float64 oracle with poisoned outputs,
padding 0 / 1 / 2, NCHW / NHWC, alpha / beta, CONVOLUTION mode; rejections name the field; workspace
exact; mode A ranks it first on the ResNet-50 3x3 wgrad layers."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.ir import ConvWgrad, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.reference import conv as ref
from ncudnn.testing import poison_value, rel_err, size
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S

F32 = DT.CUDNN_DATA_FLOAT
ENGINE = "conv_winograd_nonfused"
#: relative L2 error bounds of fp32 I/O per tile (docs/winograd.md)
TOL = {2: 5e-6, 4: 2e-5}


def tensor(uid, dims, nhwc=False, virtual=False):
    if virtual:
        return TensorDesc(uid, is_virtual=True, name=f"v{uid}")
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), F32, name=f"t{uid}")


def wgrad_graph(n, c, h, w, k, pre, post=None, nhwc=False, mode=CM.CUDNN_CROSS_CORRELATION, stride=1,
                alpha=1.0, beta=0.0, rs=3, groups_c=None):
    post = pre if post is None else post
    p = (h + 2 * pre - rs) // stride + 1 if post == pre else h + pre + post - rs + 1
    q = (w + 2 * pre - rs) // stride + 1 if post == pre else w + pre + post - rs + 1
    x, dy = tensor(1, (n, c, h, w), nhwc), tensor(3, (n, k, p, q), nhwc)
    dw = tensor(2, (k, groups_c or c, rs, rs), nhwc)
    node = ConvWgrad("wgrad", {"X": x, "DY": dy}, {"DW": dw}, spatial_dims=2, stride=(stride, stride),
                     pre_padding=(pre, pre), post_padding=(post, post), dilation=(1, 1), mode=mode,
                     alpha=alpha, beta=beta)
    return OpGraph([node]).finalize(), x, dy, dw


def dev(a, t):
    order = sorted(range(a.ndim), key=lambda i: -t.strides[i])
    return cuda.to_device(np.ascontiguousarray(np.transpose(a, order)).reshape(-1))


def read(buf, t):
    h = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).copy()


def config(g, m):
    eng = registry.by_name(ENGINE)
    cands = [c for c in eng.candidates(api.problem(g), api.context()) if c.get(K.CUDNN_KNOB_TYPE_WINO_TILE) == m]
    assert cands, "no candidate for this tile"
    return cands[0]


def run_case(rng, g, x, dy, dw, m, pre, beta=0.0, alpha=1.0, cross=True):
    cfg = config(g, m)
    assert api.check_support(g, cfg) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg)
    xv = rng.standard_normal(x.dims).astype(np.float32)
    dyv = rng.standard_normal(dy.dims).astype(np.float32)
    dw0 = rng.standard_normal(dw.dims).astype(np.float32) if beta else np.full(dw.dims, poison_value(np.float32),
                                                                               np.float32)
    out = dev(dw0, dw)
    ws = cuda.to_device(np.full(max(plan.workspace_size, 1), 0xFF, np.uint8))
    api.execute(plan, {1: dev(xv, x), 3: dev(dyv, dy), 2: out}, ws)
    want = alpha * ref.conv_wgrad(xv, dyv, dw.dims, pre_pad=pre, post_pad=pre, cross_correlation=cross)
    if beta:
        want = want + beta * dw0
    return rel_err(read(out, dw), want), plan


@pytest.mark.parametrize("m,nhwc,pad", [(2, False, 0), (2, True, 1), (2, False, 2), (4, True, 0), (4, False, 1),
                                        (4, True, 2)])
def test_wgrad_oracle(rng, m, nhwc, pad):
    g, x, dy, dw = wgrad_graph(*size((2, 3, 5, 6, 4), (8, 64, 15, 13, 48)), pad, nhwc=nhwc)
    err, _ = run_case(rng, g, x, dy, dw, m, pad)
    assert err < TOL[m], err


@pytest.mark.parametrize("m", [2, 4])
def test_wgrad_alpha_beta_convolution_mode(rng, m):
    g, x, dy, dw = wgrad_graph(1, 2, 7, 5, 3, 1, mode=CM.CUDNN_CONVOLUTION, alpha=0.75, beta=-0.5)
    err, _ = run_case(rng, g, x, dy, dw, m, 1, beta=-0.5, alpha=0.75, cross=False)
    assert err < TOL[m], err


def test_notes_and_workspace_exact():
    g, *_ = wgrad_graph(2, 3, 6, 6, 5, 1)
    eng = registry.by_name(ENGINE)
    sub = api.problem(g)
    c2, c4 = config(g, 2), config(g, 4)
    assert eng.config_notes(sub, c2) == (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD,)
    assert NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 in eng.config_notes(sub, c4)
    # T = 2 x 3 x 3 tiles of 2x2 (one chunk of 32), 2 x 2 x 2 of 4x4 (16): U + V + M floats
    assert eng.workspace_size(sub, c2) == 4 * 16 * (5 * 32 + 3 * 32 + 5 * 3)
    assert eng.workspace_size(sub, c4) == 4 * 36 * (5 * 16 + 3 * 16 + 5 * 3)
    for c in (c2, c4):
        assert api.build_plan(g, c).parts[0].workspace_size == eng.workspace_size(sub, c)


@pytest.mark.parametrize("kw,word", [(dict(stride=2), "stride"), (dict(rs=5), "not 3x3")])
def test_rejects_stride_filter(kw, word):
    g, *_ = wgrad_graph(1, 4, 9, 9, 4, 1, **kw)
    st, why = registry.by_name(ENGINE).check_support(api.problem(g), api.context())
    assert st != S.CUDNN_STATUS_SUCCESS and word in why and "node 'wgrad'" in why


def test_rejects_epilogue():
    x, dy = tensor(1, (1, 4, 6, 6)), tensor(3, (1, 4, 6, 6))
    vdw = TensorDesc(10, (4, 4, 3, 3), packed_strides((4, 4, 3, 3)), F32, is_virtual=True, name="v10")
    node = ConvWgrad("wgrad", {"X": x, "DY": dy}, {"DW": vdw}, spatial_dims=2,
                     stride=(1, 1), pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1),
                     mode=CM.CUDNN_CROSS_CORRELATION)
    scale = Pointwise("scale", {"X": node.outputs["DW"]}, {"Y": tensor(2, (4, 4, 3, 3))},
                      mode=PM.CUDNN_POINTWISE_RELU_FWD)
    g = OpGraph([node, scale]).finalize()
    st, why = registry.by_name(ENGINE).check_support(api.problem(g), api.context())
    assert st != S.CUDNN_STATUS_SUCCESS and "fuses no epilogue" in why


@pytest.mark.parametrize("c,h,k,nhwc", [(64, 56, 64, True), (128, 28, 128, False), (256, 14, 256, True),
                                        (512, 7, 512, False), (128, 56, 256, True)])
def test_mode_a_ranks_winograd_wgrad_first(c, h, k, nhwc):
    g, *_ = wgrad_graph(32, c, h, h, k, 1, nhwc=nhwc)
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    assert ecs[0].name == ENGINE, [str(e) for e in ecs[:3]]


@pytest.mark.parametrize("dt,np_name,tol", [(DT.CUDNN_DATA_HALF, "float16", 3e-3), (DT.CUDNN_DATA_BFLOAT16, "bfloat16",
                                                                                      1.5e-2)])
def test_half_io_fp32_math(rng, dt, np_name, tol):
    """FP16 / BF16 X, DY, DW: converted on load, FP32 transforms / GEMM, rounded on the dw store."""
    import ml_dtypes

    np_dt = ml_dtypes.bfloat16 if np_name == "bfloat16" else np.float16
    store = np.uint16 if np_name == "bfloat16" else np_dt
    mk = lambda uid, dims: TensorDesc(uid, dims, packed_strides(dims), dt, name=f"t{uid}")  # noqa: E731
    x, dy, dw = mk(1, (2, 3, 5, 6)), mk(3, (2, 4, 5, 6)), mk(2, (4, 3, 3, 3))
    g = OpGraph([ConvWgrad("wgrad", {"X": x, "DY": dy}, {"DW": dw}, spatial_dims=2, stride=(1, 1),
                           pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1),
                           mode=CM.CUDNN_CROSS_CORRELATION)]).finalize()
    xv, dyv = rng.uniform(-1, 1, x.dims).astype(np_dt), rng.uniform(-1, 1, dy.dims).astype(np_dt)
    xd, dyd = (cuda.to_device(np.ascontiguousarray(v).view(store).reshape(-1)) for v in (xv, dyv))
    out = cuda.to_device(np.full(dw.span_elements(), 0x7FC0 if store is np.uint16 else np.nan, store))
    cfg = config(g, 4)
    plan = api.build_plan(g, cfg)
    ws = cuda.to_device(np.full(max(plan.workspace_size, 1), 0xFF, np.uint8))
    api.execute(plan, {1: xd, 3: dyd, 2: out}, ws)
    got = out.copy_to_host().view(np_dt).reshape(dw.dims).astype(np.float64)
    want = ref.conv_wgrad(xv.astype(np.float64), dyv.astype(np.float64), dw.dims, pre_pad=1, post_pad=1)
    assert rel_err(got, want) < tol
