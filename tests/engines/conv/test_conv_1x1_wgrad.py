"""conv_gemm_1x1 wgrad (1x1 stride-1 unpadded): NHWC as one GEMM, NCHW as per-image GEMMs summed through
the split-K workspace, on the fast-mainloop tiles; simulator, tiny shapes, vs the float64 oracle with
poisoned outputs (beta blends a random dw)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.conv import gemm_1x1 as c1
from ncudnn.engines import device as dev_mod
from ncudnn.ir import ConvWgrad, OpGraph, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.reference import conv as ref
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnConvolutionMode_t as CM
from ncudnn.types import cudnnDataType_t as DT, cudnnStatus_t as S
from ncudnn.engines.conv import gemm_1x1 as E
from ncudnn.ir import ConvDgrad, ConvFprop
from ncudnn.engines.gemm import common as gc

F32 = DT.CUDNN_DATA_FLOAT
ENG = "conv_gemm_1x1"
T64 = c1.FIRST_WGRAD_TILE + 3          # "64x64x8 t8x8 vec4 fast"
T64B = c1.FIRST_WGRAD_TILE + 4         # "64x64x8 t8x4 vec4 fast" (128 threads)


def tensor(uid, dims, nhwc):
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), F32, name=f"t{uid}")


def attrs(stride=1):
    return dict(spatial_dims=2, stride=(stride,) * 2, pre_padding=(0, 0), post_padding=(0, 0), dilation=(1, 1),
                mode=CM.CUDNN_CROSS_CORRELATION)


def wgrad_graph(n, c, k, hw, nhwc, alpha=1.0, beta=0.0, stride=1):
    po = (hw - 1) // stride + 1
    x, dy = tensor(1, (n, c, hw, hw), nhwc), tensor(2, (n, k, po, po), nhwc)
    dw = tensor(3, (k, c, 1, 1), nhwc)
    node = ConvWgrad("wgrad", {"X": x, "DY": dy}, {"DW": dw}, alpha=alpha, beta=beta, **attrs(stride))
    return OpGraph([node]).finalize(), x, dy, dw


def dev(a, t):
    order = sorted(range(a.ndim), key=lambda i: -t.strides[i])
    return cuda.to_device(np.ascontiguousarray(np.transpose(a, order)).reshape(-1))


def read(buf, t):
    h = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).copy()


def run_case(rng, n, c, k, hw, nhwc, split, alpha=1.0, beta=0.0, tile=T64, stride=1):
    g, x, dy, dw = wgrad_graph(n, c, k, hw, nhwc, alpha, beta, stride)
    eng = registry.by_name(ENG)
    sub = api.problem(g)
    cfg = eng.default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K,
                                                                                          split)
    assert api.check_support(g, cfg) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg)
    p = eng.problem(sub)
    if p.pixels_last is None:
        assert p.sum_batch == (not nhwc and n > 1)
    item = 4
    want_ws = (n if p.sum_batch else 1) * split * k * c * item if (split > 1 or p.sum_batch) else 0
    if p.pixels_last is not None:          # dy and x copied pixels-last first (256-byte rounded each)
        po = (hw - 1) // stride + 1
        want_ws += sum(-(-n * po * po * ch * 4 // 256) * 256 for ch in (k, c))
    assert eng.workspace_size(sub, cfg) == want_ws <= plan.workspace_size
    xv = rng.uniform(-1, 1, x.dims).astype(np.float32)
    dyv = rng.uniform(-1, 1, dy.dims).astype(np.float32)
    dw0 = rng.uniform(-1, 1, dw.dims).astype(np.float32) if beta else np.full(dw.dims, poison_value(np.float32),
                                                                              np.float32)
    out = dev(dw0, dw)
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8)) if plan.workspace_size else None
    api.execute(plan, {1: dev(xv, x), 2: dev(dyv, dy), 3: out}, ws)
    bl = plan.parts[0].bl
    assert bl.bk.fallback is not None and (bl._fallback is None) == p.fast_ok   # fast mainloop iff it fits
    want = alpha * ref.conv_wgrad(xv, dyv, dw.dims, stride=(stride, stride), pre_pad=(0, 0), post_pad=(0, 0),
                                  dilation=(1, 1), cross_correlation=True)
    if beta:
        want = want + beta * dw0.astype(np.float64)
    assert_close(read(out, dw), want, "float32")
    return p


@pytest.mark.parametrize("nhwc,split", [(True, 1), (True, 2), (False, 1), (False, 2)])
def test_w1x_wgrad_layouts_and_splits(rng, nhwc, split):
    p = run_case(rng, 2, 8, 8, 4, nhwc, split)
    assert p.fast_ok                     # NPQ / PQ multiples of 8, channels multiples of 4: fast mainloop


@pytest.mark.parametrize("nhwc", [True, False])
def test_w1x_wgrad_t8x4_tile(rng, nhwc):
    p = run_case(rng, 2, 8, 8, 4, nhwc, 1, tile=T64B)
    assert p.fast_ok


@pytest.mark.parametrize("n,hw,split", [(2, 6, 1), (2, 6, 2), (3, 3, 1)])
def test_w1x_wgrad_nchw_pixels_last(rng, n, hw, split):
    # NCHW with H*W % 8 != 0 (7², 14² at real sizes): dy and x copied pixels-last, one GEMM over N*H*W
    p = run_case(rng, n, 8, 4, hw, False, split, alpha=0.75, beta=0.5)
    assert p.pixels_last is not None and not p.sum_batch
    assert p.fast_ok == (n * hw * hw % 8 == 0)


def test_w1x_wgrad_alpha_beta_unaligned(rng):
    # C = 6, K = 5 (not multiples of 4) and PQ = 9: the generic mainloop of the same tile runs
    p = run_case(rng, 2, 6, 5, 3, False, 1, alpha=0.5, beta=-1.5)
    assert p.sum_batch and not p.fast_ok


def test_w1x_wgrad_alpha_beta_nhwc(rng):
    run_case(rng, 1, 4, 8, 4, True, 2, alpha=2.0, beta=0.25)


@pytest.mark.parametrize("nhwc,hw", [(True, 4), (False, 5)])
def test_w1x_wgrad_stride2(rng, nhwc, hw):
    # stride-2 1x1 (ResNet downsample): x's strided pixels and dy copied pixels-last, one GEMM
    p = run_case(rng, 2, 8, 4, hw, nhwc, 1, alpha=1.0, beta=0.5, stride=2)
    assert p.pixels_last is not None and p.fast_ok == (2 * ((hw + 1) // 2) ** 2 % 8 == 0)


def test_w1x_wgrad_refuses_stride2_and_atomic_nchw():
    g, *_ = wgrad_graph(2, 6, 4, 4, True, stride=2)        # C = 6: no pixels-last copy
    eng = registry.by_name(ENG)
    st, why = eng.check_support(api.problem(g), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "stride" in why
    g, *_ = wgrad_graph(2, 8, 8, 4, False)
    sub = api.problem(g)
    cfg = eng.default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, T64).with_knob(
        K.CUDNN_KNOB_TYPE_SPLIT_K, 2).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 0)
    st, why = eng.keep(sub, cfg, None)
    assert st != S.CUDNN_STATUS_SUCCESS and "atomic" in why


@pytest.mark.parametrize("nhwc", [True, False])
def test_w1x_wgrad_ranks_fast_tiles_with_splits_at_resnet_shapes(nhwc):
    # ResNet-50 conv2 1x1 C64 -> K64 at 56x56, N = 32: M = N = 64, reduction 100 352 pixels
    g, *_ = wgrad_graph(32, 64, 64, 56, nhwc)
    eng = registry.by_name(ENG)
    sub = api.problem(g)
    dev_h200 = dev_mod.H200

    class Ctx:
        device = dev_h200
    cands = eng.candidates(sub, Ctx())
    assert cands
    best = cands[0]
    assert best.get(K.CUDNN_KNOB_TYPE_TILE_SIZE) >= c1.FIRST_WGRAD_TILE
    assert best.get(K.CUDNN_KNOB_TYPE_SPLIT_K) > 1       # 1 tile of 64x64 (x 32 images) fills no H200
    costs = [eng.cost(sub, c, dev_h200) for c in cands]
    assert costs == sorted(costs)
    assert eng.cost(sub, best, dev_h200) < 80e-6        # cuDNN 9.19: 77 us


@pytest.mark.parametrize("nhwc,n,hw,split", [(True, 2, 8, 8), (False, 2, 8, 4)])
def test_w1x_wgrad_wide_reduce(rng, nhwc, n, hw, split):
    # 8 partial slices (NHWC SPLIT_K 8; NCHW 2 images x SPLIT_K 4): the wide split-K reduce runs
    from ncudnn.kernels.gemm import splitk
    assert split * (1 if nhwc else n) >= splitk.WIDE_FROM
    run_case(rng, n, 8, 4, hw, nhwc, split, alpha=1.25, beta=0.5)


def test_w1x_fprop_on_a_fast_tile(rng):
    # fprop 1x1 NHWC (x . w^T, K-fast A) through the 64x64 fast tile: 32 pixels x 8 channels -> 8
    x, w, y = tensor(1, (2, 8, 4, 4), True), tensor(2, (8, 8, 1, 1), True), tensor(3, (2, 8, 4, 4), True)
    from ncudnn.ir import ConvFprop
    g = OpGraph([ConvFprop("fp", {"X": x, "W": w}, {"Y": y}, **attrs())]).finalize()
    eng = registry.by_name(ENG)
    cfg = eng.default_config(api.problem(g)).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, T64)
    assert api.check_support(g, cfg) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg)
    xv, wv = rng.uniform(-1, 1, x.dims).astype(np.float32), rng.uniform(-1, 1, w.dims).astype(np.float32)
    out = dev(np.full(y.dims, poison_value(np.float32), np.float32), y)
    api.execute(plan, {1: dev(xv, x), 2: dev(wv, w), 3: out}, None)
    assert plan.parts[0].bl._fallback is None                # ran the fast mainloop
    want = ref.conv_fprop(xv, wv, stride=(1, 1), pre_pad=(0, 0), post_pad=(0, 0), dilation=(1, 1),
                          cross_correlation=True)
    assert_close(read(out, y), want, "float32")


# conv_gemm_1x1's fprop / dgrad and wgrad mappings (no kernels run): refusals naming node and field, GEMM shapes and strides
def _t(uid, dims, nhwc=False, dt=DT.CUDNN_DATA_FLOAT):
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), dt, name=f"t{uid}")


def _sub(kind, x, w, y, stride=1, pad=0):
    a = dict(spatial_dims=2, stride=(stride,) * 2, pre_padding=(pad,) * 2, post_padding=(pad,) * 2,
             dilation=(1, 1), mode=CM.CUDNN_CROSS_CORRELATION)
    node = {"fprop": lambda: ConvFprop("cv", {"X": x, "W": w}, {"Y": y}, **a),
            "dgrad": lambda: ConvDgrad("cv", {"DY": y, "W": w}, {"DX": x}, **a),
            "wgrad": lambda: ConvWgrad("cv", {"X": x, "DY": y}, {"DW": w}, **a)}[kind]()
    return api.problem(OpGraph([node]).finalize())


def _map(sub):
    return (E.wgrad1x1_mapping if sub.kind == "conv_wgrad" else E.conv1x1_mapping)(sub)


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_1x1_mapping_refusals_name_the_field(kind):
    filt = "DW" if kind == "wgrad" else "W"
    cases = [((2, 4, 6, 6), (8, 4, 3, 3), (2, 8, 4, 4), 1, 0, f"{filt}: filter (3, 3) is not 1x1"),
             ((2, 4, 6, 6), (8, 4, 1, 1), (2, 8, 8, 8), 1, 1, "padding (1, 1) / (1, 1) is not 0"),
             ((2, 4, 6, 6), (8, 2, 1, 1), (2, 8, 6, 6), 1, 0, "2 groups (one GEMM needs groups = 1)")]
    for xd, wd, yd, stride, pad, why in cases:
        with pytest.raises(gc.Reject, match=r"node 'cv': " + why.replace("(", r"\(").replace(")", r"\)")):
            _map(_sub(kind, _t(1, xd), _t(2, wd), _t(3, yd), stride, pad))
    strided = _sub(kind, _t(1, (2, 4, 6, 6)), _t(2, (8, 4, 1, 1)), _t(3, (2, 8, 3, 3)), stride=2)
    if kind == "wgrad":                     # fp32, channels % 4: copied pixels-last, one GEMM over N*P*Q
        p = _map(strided)
        assert (p.M, p.N, p.K, p.pixels_last[:3]) == (8, 4, 18, (2, 9, 3))
        half = _sub(kind, _t(1, (2, 4, 6, 6), dt=DT.CUDNN_DATA_HALF), _t(2, (8, 4, 1, 1), dt=DT.CUDNN_DATA_HALF),
                    _t(3, (2, 8, 3, 3), dt=DT.CUDNN_DATA_HALF), stride=2)
        with pytest.raises(gc.Reject, match="stride .* needs a 2-D fp32 conv"):
            _map(half)
    else:
        with pytest.raises(gc.Reject, match=r"stride \(2, 2\) is not 1"):
            _map(strided)


def test_1x1_mappings_keep_their_gemms():
    # fprop NCHW: per-image GEMMs, rows = pixels (contiguous), k = channels
    p = _map(_sub("fprop", _t(1, (3, 4, 5, 5)), _t(2, (8, 4, 1, 1)), _t(3, (3, 8, 5, 5))))
    assert (p.M, p.N, p.K, p.batch) == (25, 8, 4, (1, 3))
    assert p.a_strides == (0, 100, 1, 25) and p.b_strides == (0, 0, 1, 4) and p.c_strides == (0, 200, 1, 25)
    # dgrad NHWC: one GEMM over every pixel, the filter read transposed
    p = _map(_sub("dgrad", _t(1, (3, 4, 5, 5), True), _t(2, (8, 4, 1, 1), True), _t(3, (3, 8, 5, 5), True)))
    assert (p.M, p.N, p.K, p.batch) == (75, 4, 8, (1, 1))
    assert p.a_strides == (0, 0, 8, 1) and p.b_strides == (0, 0, 4, 1) and p.c_strides == (0, 0, 4, 1)
    # wgrad NHWC: one GEMM over N*H*W; NCHW with H*W % 8 == 0: per-image GEMMs summed (sum_batch)
    p = _map(_sub("wgrad", _t(1, (3, 4, 5, 5), True), _t(2, (8, 4, 1, 1), True), _t(3, (3, 8, 5, 5), True)))
    assert (p.M, p.N, p.K, p.sum_batch, p.pixels_last) == (8, 4, 75, False, None)
    assert p.a_strides == (0, 0, 1, 8) and p.b_strides == (0, 0, 4, 1)
    p = _map(_sub("wgrad", _t(1, (3, 4, 4, 4)), _t(2, (8, 4, 1, 1)), _t(3, (3, 8, 4, 4))))
    assert (p.M, p.N, p.K, p.batch, p.sum_batch) == (8, 4, 16, (3, 1), True)
    assert p.a_strides == (128, 0, 16, 1) and p.b_strides == (64, 0, 1, 16)
