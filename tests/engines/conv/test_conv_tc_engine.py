"""Engine conv_tc end to end (simulator at tiny shapes; real shapes with NCUDNN_SHAPES=gpu): NHWC conv
fprop + bias + relu graphs -> heuristics -> plan -> execute vs the float64 oracle, poisoned outputs."""
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.engines import api, registry
from ncudnn.engines.conv.tc import TILES
from ncudnn.ir import ConvFprop, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.testing import SIM, assert_close, poison_value, size
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendNumericalNote_t as NN
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnDataType_t as DT
from ncudnn.types import cudnnPointwiseMode_t as PM, cudnnStatus_t as S

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
NP = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16}
TOL = {F32: "float32", F16: "float16", BF16: "bfloat16"}


def ctx(tc=True):
    return replace(api.context(), allow_tensor_cores=tc)


def tensor(uid, dims, dtype, nhwc=True):
    return TensorDesc(uid, tuple(dims), packed_strides(dims, nhwc_order(len(dims)) if nhwc else None), dtype,
                      name=f"t{uid}")


def virt(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def graph(dims, wdims, dtype, out_dtype, stride=(1, 1), pad=(1, 1), dil=(1, 1), nhwc=True,
          mode=CM.CUDNN_CROSS_CORRELATION):
    ydims = ref.conv_output_shape(dims, wdims, stride=stride, pre_pad=pad, post_pad=pad, dilation=dil)
    x, w = tensor(1, dims, dtype, nhwc), tensor(2, wdims, dtype, nhwc)
    b, y = tensor(3, (1, wdims[0], 1, 1), out_dtype, nhwc), tensor(4, ydims, out_dtype, nhwc)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, spatial_dims=2, stride=stride, pre_padding=pad,
                     post_padding=pad, dilation=dil, mode=mode)
    add = Pointwise("bias", {"X": conv.outputs["Y"], "B": b}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([conv, add, relu]).finalize(), (x, w, b, y)


def to_dev(a, t):
    st = np.dtype(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a.dtype
    buf = np.full(t.span_elements(), 0x7FC0 if st == np.uint16 else poison_value(st), st)
    view = np.lib.stride_tricks.as_strided(buf.view(a.dtype), a.shape, [s * a.itemsize for s in t.strides])
    view[...] = a
    return cuda.to_device(buf)


def read(buf, t):
    h = buf.copy_to_host()
    if NP[t.dtype] is ml_dtypes.bfloat16:
        h = h.view(ml_dtypes.bfloat16)
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).astype(np.float64)


def run(rng, dims, wdims, dtype, out_dtype, tile=None, **kw):
    g, (x, w, b, y) = graph(dims, wdims, dtype, out_dtype, **kw)
    cx = ctx()
    eng = registry.by_name("conv_tc")
    cfg = eng.candidates(api.problem(g), cx)[0]
    if tile is not None:
        from ncudnn.types import cudnnBackendKnobType_t as K
        cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile).with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages)
    assert api.check_support(g, cfg, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg, cx)
    xv = rng.uniform(-1, 1, x.dims).astype(NP[dtype])
    wv = (rng.uniform(-1, 1, w.dims) / np.sqrt(np.prod(w.dims[1:]))).astype(NP[dtype])
    bv = rng.uniform(-1, 1, b.dims).astype(NP[out_dtype])
    out = to_dev(np.full(y.dims, np.nan, NP[out_dtype]), y)
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8)) if plan.workspace_size else None
    api.execute(plan, {1: to_dev(xv, x), 2: to_dev(wv, w), 3: to_dev(bv, b), 4: out}, ws)
    stride, pad, dil = kw.get("stride", (1, 1)), kw.get("pad", (1, 1)), kw.get("dil", (1, 1))
    f = lambda a: a.astype(np.float64)  # noqa: E731
    expect = np.maximum(ref.conv_fprop(f(xv), f(wv), stride=stride, pre_pad=pad, post_pad=pad, dilation=dil)
                        + f(bv), 0)
    assert_close(read(out, y), expect, TOL[out_dtype] if out_dtype != F32 else TOL[dtype])


def test_bf16_nhwc_3x3_bias_relu(rng):
    dims, wdims = size(((2, 16, 5, 4), (24, 16, 3, 3)), ((8, 64, 28, 28), (128, 64, 3, 3)))
    run(rng, dims, wdims, BF16, BF16)


def test_f16_strided_1x1_f32_out(rng):
    dims, wdims = size(((1, 8, 6, 6), (16, 8, 1, 1)), ((8, 256, 28, 28), (512, 256, 1, 1)))
    run(rng, dims, wdims, F16, F32, stride=(2, 2), pad=(0, 0))


def test_heuristics_notes_and_refusals():
    g, _ = graph((32, 64, 56, 56), (64, 64, 3, 3), BF16, BF16)
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A, ctx())
    assert ecs[0].config.engine == "conv_tc"
    assert NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE in ecs[0].numerical_notes
    eng = registry.by_name("conv_tc")
    for kw, status, text in [
            (dict(nhwc=False), S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, "channels-last"),
            (dict(mode=CM.CUDNN_CONVOLUTION), S.CUDNN_STATUS_NOT_SUPPORTED, "CONVOLUTION mode")]:
        g, _ = graph((1, 16, 8, 8), (16, 16, 3, 3), BF16, BF16, **kw)
        st, why = eng.check_support(api.problem(g), ctx())
        assert st == status and text in why, why
    g, _ = graph((1, 12, 8, 8), (16, 12, 3, 3), BF16, BF16)      # packed C % 8 != 0: padded in the workspace
    sub = api.problem(g)
    assert eng.check_support(sub, ctx()) == (S.CUDNN_STATUS_SUCCESS, "")
    assert eng.workspace_size(sub, eng.default_config(sub)) == 8 * 8 * 16 * 2 + 16 * 9 * 16 * 2   # x, w at Cp = 16
    g, _ = graph((1, 16, 8, 8), (16, 16, 3, 3), F32, F32)      # FP32 x / w: TF32 only when allowed
    st, why = eng.check_support(api.problem(g), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "TF32" in why, why
    assert eng.check_support(api.problem(g), replace(ctx(), allow_tf32=True)) == (S.CUDNN_STATUS_SUCCESS, "")
    g, _ = graph((1, 16, 8, 8), (16, 16, 3, 3), BF16, BF16)
    assert "tensor cores" in eng.check_support(api.problem(g), ctx(tc=False))[1]


@pytest.mark.gpu
@pytest.mark.parametrize("tile", range(len(TILES) - 1), ids=lambda i: TILES[i].label.replace(" ", "_"))
def test_gpu_every_tile(rng, tile):
    run(rng, (4, 64, 14, 14), (96, 64, 3, 3), BF16, BF16, tile=tile)


def test_kernel_config_one_tap_gather():
    from ncudnn.types import cudnnBackendKnobType_t as K
    eng = registry.by_name("conv_tc")
    for C, version in ((64, 4), (40, 3)):
        g, _ = graph((2, C, 8, 8), (32, C, 3, 3), BF16, BF16)
        sub = api.problem(g)
        d = eng.default_config(sub)
        assert eng.kernel_config(sub, d).VERSION == version
        assert eng.kernel_config(sub, d.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 1)).VERSION == 1


def test_bf16_one_tap_gather_c32(rng):
    dims, wdims = size(((2, 32, 5, 4), (16, 32, 3, 3)), ((8, 64, 28, 28), (128, 64, 3, 3)))
    run(rng, dims, wdims, BF16, BF16, stride=(2, 1))


def test_stem_c3_padded_channels(rng):
    """C = 3 (the ResNet stem, 7x7 stride 2): x and w zero-padded to 8 channels in the workspace, then the
    tensor-core conv (two padding launches + the conv, one plan)."""
    dims, wdims = size(((1, 3, 9, 9), (16, 3, 7, 7)), ((8, 3, 112, 112), (64, 3, 7, 7)))
    run(rng, dims, wdims, BF16, BF16, stride=(2, 2), pad=(3, 3))
