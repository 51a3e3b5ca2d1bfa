"""conv_tc with FP32 x / w run as TF32 (opt-in): every mainloop path the engine can pick for FP32 (v4 one-tap
gather, v3, v1, split-K with the ordered reduce, the channel padding of the stem; alpha and a residual) against the float64 oracle at
the TF32 tolerance, and against the oracle of TF32-truncated inputs at the FP32 one (so a gather mistake cannot
hide in the TF32 error); the notes and refusals; pygraph's opt-in (a selected TENSOR_CORE /
DOWN_CONVERT_INPUTS note; never without it or under NVIDIA_TF32_OVERRIDE=0) with the default plan and every
plan of build_plans(ALL). Simulator at tiny shapes (its mma model drops the low 13 mantissa bits as the tensor
core does); real shapes with NCUDNN_SHAPES=gpu."""
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn import reference as ref
from ncudnn.engines import api, registry
from ncudnn.engines.conv.tc import TILES
from ncudnn.ir import ConvFprop, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.testing import TOL, assert_close, poison_value, rel_err, size
from ncudnn.types import cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN
from ncudnn.types import cudnnDataType_t as DT
from ncudnn.types import cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
NP = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16}
TF32_NOTES = {NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE, NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS}


def ctx(tf32=True, tc=True):
    return replace(api.context(), allow_tensor_cores=tc, allow_tf32=tf32)


def tf32_truncate(a):
    """What the tensor core reads of FP32 ``a``: the low 13 mantissa bits dropped."""
    return (np.ascontiguousarray(a, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _tensor(uid, dims, dtype):
    return TensorDesc(uid, tuple(dims), packed_strides(dims, nhwc_order(len(dims))), dtype, name=f"t{uid}")


def _virt(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def graph(dims, wdims, out_dtype=F32, stride=(1, 1), pad=(1, 1), dil=(1, 1), dtype=F32, w_dtype=None):
    """NHWC x, KRSC w (FP32), conv -> + bias -> relu into y (``out_dtype``)."""
    ydims = ref.conv_output_shape(dims, wdims, stride=stride, pre_pad=pad, post_pad=pad, dilation=dil)
    x, w = _tensor(1, dims, dtype), _tensor(2, wdims, w_dtype or dtype)
    b, y = _tensor(3, (1, wdims[0], 1, 1), out_dtype), _tensor(4, ydims, out_dtype)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": _virt(10)}, spatial_dims=2, stride=stride, pre_padding=pad,
                     post_padding=pad, dilation=dil)
    add = Pointwise("bias", {"X": conv.outputs["Y"], "B": b}, {"Y": _virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([conv, add, relu]).finalize(), (x, w, b, y)


def _to_dev(a, t):
    st = np.dtype(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a.dtype
    buf = np.full(t.span_elements(), 0x7FC0 if st == np.uint16 else poison_value(st), st)
    view = np.lib.stride_tricks.as_strided(buf.view(a.dtype), a.shape, [s * a.itemsize for s in t.strides])
    view[...] = a
    return cuda.to_device(buf)


def _read(buf, t):
    h = buf.copy_to_host()
    if NP[t.dtype] is ml_dtypes.bfloat16:
        h = h.view(ml_dtypes.bfloat16)
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).astype(np.float64)


def data(rng, dims, wdims, out_dtype=F32):
    x = rng.uniform(-1, 1, dims).astype(np.float32)
    w = (rng.uniform(-1, 1, wdims) / np.sqrt(np.prod(wdims[1:]))).astype(np.float32)
    b = rng.uniform(-1, 1, (1, wdims[0], 1, 1)).astype(NP[out_dtype])
    return x, w, b


def oracle(x, w, b, stride=(1, 1), pad=(1, 1), dil=(1, 1)):
    f = lambda a: np.asarray(a).astype(np.float64)  # noqa: E731
    return np.maximum(ref.conv_fprop(f(x), f(w), stride=stride, pre_pad=pad, post_pad=pad, dilation=dil) + f(b), 0)


def check_tf32(got, x, w, b, out_dtype=F32, **kw):
    """TF32-correct: within the TF32 tolerance of the float64 oracle, within FP32's (or the output type's) of
    the oracle on TF32-truncated inputs, and further from the exact result than FP32 roundoff (TF32 ran).
    Returns the relative error against the float64 oracle."""
    err = assert_close(got, oracle(x, w, b, **kw), "tf32")
    assert_close(got, oracle(tf32_truncate(x), tf32_truncate(w), b, **kw),
                 "float32" if out_dtype == F32 else {F16: "float16", BF16: "bfloat16"}[out_dtype], name="truncated")
    if out_dtype == F32:
        assert err > TOL["float32"], f"error {err:.2e}: the FP32 inputs were not rounded to TF32"
    return err


def run(rng, dims, wdims, out_dtype=F32, knobs=(), version=None, **kw):
    """Build conv_tc's first candidate (with ``knobs``) for FP32 x / w under TF32 and check it."""
    g, (x, w, b, y) = graph(dims, wdims, out_dtype, **kw)
    cx = ctx()
    eng = registry.by_name("conv_tc")
    sub = api.problem(g)
    cfg = eng.candidates(sub, cx)[0]
    for k, v in knobs:
        cfg = cfg.with_knob(k, v)
    assert api.check_support(g, cfg, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    assert TF32_NOTES <= set(eng.config_notes(sub, cfg))
    if version is not None:
        assert eng.kernel_config(sub, cfg).VERSION == version
    plan = api.build_plan(g, cfg, cx)
    xv, wv, bv = data(rng, dims, wdims, out_dtype)
    out = _to_dev(np.full(y.dims, np.nan, NP[out_dtype]), y)
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8)) if plan.workspace_size else None
    api.execute(plan, {1: _to_dev(xv, x), 2: _to_dev(wv, w), 3: _to_dev(bv, b), 4: out}, ws)
    return check_tf32(_read(out, y), xv, wv, bv, out_dtype, **{k: v for k, v in kw.items() if k != "dtype"})


def test_tf32_3x3_one_tap_gather(rng):
    """C a multiple of BLOCK_K / 2 FP32 channels: the v4 mainloop (one filter tap per k tile)."""
    dims, wdims = size(((2, 16, 5, 4), (24, 16, 3, 3)), ((8, 64, 28, 28), (128, 64, 3, 3)))
    run(rng, dims, wdims, version=4)


def test_tf32_c8_several_taps_per_k_tile(rng):
    """C = 8 < BLOCK_K / 2 = 16 channels: v3, each k tile spans two taps."""
    run(rng, (2, 8, 5, 4), (8, 8, 3, 3), version=3)


def test_tf32_c12_strided_dilated_half_out(rng):
    """C = 12 (a multiple of 4, so no padding: 16-byte chunks are 4 FP32 channels), stride, dilation, FP16 out."""
    run(rng, (1, 12, 7, 6), (16, 12, 3, 2), F16, stride=(2, 1), pad=(1, 0), dil=(1, 2), version=3)


def test_tf32_mainloop_v1(rng):
    run(rng, (1, 16, 4, 4), (16, 16, 3, 3), knobs=((K.CUDNN_KNOB_TYPE_KERNEL_CFG, 1),), version=1)


def test_tf32_split_k(rng):
    """Three k slices (72 FP32 channels of K = 9 * 8: slices cut taps), fp32 partials in a poisoned workspace."""
    run(rng, (2, 8, 4, 4), (8, 8, 3, 3), knobs=((K.CUDNN_KNOB_TYPE_SPLIT_K, 3),))


def test_tf32_stem_c3_padded_channels(rng):
    """C = 3: x and w zero-padded to 4 FP32 channels (one 16-byte chunk) in the workspace, then the conv."""
    dims, wdims = size(((1, 3, 9, 9), (16, 3, 7, 7)), ((8, 3, 112, 112), (64, 3, 7, 7)))
    run(rng, dims, wdims, stride=(2, 2), pad=(3, 3))


def test_tf32_residual_and_alpha(rng):
    """The rest of the fused chain: conv alpha 0.5, + residual (FP32, NHWC), relu."""
    dims, wdims = (1, 8, 4, 4), (8, 8, 3, 3)
    x, w, r, y = (_tensor(u, d, F32) for u, d in ((1, dims), (2, wdims), (3, (1, 8, 4, 4)), (4, (1, 8, 4, 4))))
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": _virt(10)}, spatial_dims=2, stride=(1, 1), pre_padding=(1, 1),
                     post_padding=(1, 1), dilation=(1, 1), alpha=0.5)
    add = Pointwise("res", {"X": r, "B": conv.outputs["Y"]}, {"Y": _virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    g = OpGraph([conv, add, relu]).finalize()
    cx = ctx()
    cfg = registry.by_name("conv_tc").candidates(api.problem(g), cx)[0]
    plan = api.build_plan(g, cfg, cx)
    xv, wv, _ = data(rng, dims, wdims)
    rv = rng.uniform(-1, 1, r.dims).astype(np.float32)
    out = _to_dev(np.full(y.dims, np.nan, np.float32), y)
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8)) if plan.workspace_size else None
    api.execute(plan, {1: _to_dev(xv, x), 2: _to_dev(wv, w), 3: _to_dev(rv, r), 4: out}, ws)
    expect = lambda a, b: np.maximum(0.5 * ref.conv_fprop(a.astype(np.float64), b.astype(np.float64),  # noqa: E731
                                                          stride=(1, 1), pre_pad=(1, 1), post_pad=(1, 1),
                                                          dilation=(1, 1)) + rv, 0)
    got = _read(out, y)
    assert_close(got, expect(xv, wv), "tf32")
    assert_close(got, expect(tf32_truncate(xv), tf32_truncate(wv)), "float32", name="truncated")


def test_tf32_notes_refusals_and_workspace():
    eng = registry.by_name("conv_tc")
    sub = api.problem(graph((1, 16, 8, 8), (16, 16, 3, 3))[0])
    assert eng.check_support(sub, ctx()) == (S.CUDNN_STATUS_SUCCESS, "")
    for cx in (ctx(tf32=False), ctx(tf32=False, tc=False)):      # TENSOR_OP without TF32, FMA_MATH
        st, why = eng.check_support(sub, cx)
        assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "TF32" in why, why
    assert set(eng.config_notes(sub, eng.default_config(sub))) == TF32_NOTES
    bf = api.problem(graph((1, 16, 8, 8), (16, 16, 3, 3), BF16, dtype=BF16)[0])
    assert NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS not in eng.config_notes(bf, eng.default_config(bf))
    mixed = api.problem(graph((1, 16, 8, 8), (16, 16, 3, 3), w_dtype=BF16)[0])
    assert eng.check_support(mixed, ctx())[0] == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE
    stem = api.problem(graph((1, 3, 8, 8), (16, 3, 3, 3))[0])   # x, w padded to Cp = 4 FP32 channels
    assert eng.check_support(stem, ctx()) == (S.CUDNN_STATUS_SUCCESS, "")
    assert eng.workspace_size(stem, eng.default_config(stem)) == 8 * 8 * 4 * 4 + 16 * 9 * 4 * 4
    x = TensorDesc(1, (1, 6, 8, 8), (6 * 64 + 8, 1, 8 * 6, 6), F32, name="x")   # C = 6, not packed: no padding
    w = _tensor(2, (8, 6, 3, 3), F32)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": _tensor(3, (1, 8, 8, 8), F32)}, spatial_dims=2, stride=(1, 1),
                     pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1))
    st, why = eng.check_support(api.problem(OpGraph([conv]).finalize()), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "multiple of 4" in why, why


@pytest.mark.gpu
@pytest.mark.parametrize("tile", range(len(TILES) - 1), ids=lambda i: TILES[i].label.replace(" ", "_"))
def test_gpu_tf32_every_tile(rng, tile):
    run(rng, (4, 64, 14, 14), (96, 64, 3, 3), knobs=((K.CUDNN_KNOB_TYPE_TILE_SIZE, tile),
                                                     (K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages)))


@pytest.mark.gpu
def test_gpu_tf32_split_k_c5(rng):
    run(rng, (1, 512, 7, 7), (512, 512, 3, 3), knobs=((K.CUDNN_KNOB_TYPE_SPLIT_K, 4),))


# ------------------------------------------------------------------------------------------ pygraph

def _pygraph(dims, wdims):
    """pygraph FP32 NHWC conv + bias + relu (pad 1)."""
    n, c, h, w = dims
    k = wdims[0]
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=list(dims), stride=[c * h * w, 1, w * c, c], data_type=cudnn.data_type.FLOAT)
    r, s = wdims[2:]
    W = g.tensor(name="W", dim=list(wdims), stride=[c * r * s, 1, s * c, c], data_type=cudnn.data_type.FLOAT)
    B = g.tensor(name="B", dim=[1, k, 1, 1], stride=[k, 1, k, k], data_type=cudnn.data_type.FLOAT)
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                        compute_data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=g.bias(input=conv, bias=B))
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    Y.set_dim([n, k, h, w]).set_stride([k * h * w, 1, w * k, k])
    g.validate()
    g.build_operation_graph()
    return g, X, W, B, Y


def _strided(a, stride):
    buf = np.full(max(sum((d - 1) * s for d, s in zip(a.shape, stride)) + 1, 1), np.nan, np.float32)
    np.lib.stride_tricks.as_strided(buf, a.shape, [s * 4 for s in stride])[...] = a
    return cuda.to_device(buf)


def _run_plan(g, X, W, B, Y, x, w, b, index=None):
    y = _strided(np.full(Y.get_dim(), np.nan, np.float32), Y.get_stride())
    pack = {X: _strided(x, X.get_stride()), W: _strided(w, W.get_stride()), B: _strided(b, B.get_stride()), Y: y}
    if index is None:
        g.execute(pack, cuda.device_array(max(g.get_workspace_size(), 1), np.uint8))
    else:
        g.execute_plan_at_index(pack, cuda.device_array(max(g.get_workspace_size_plan_at_index(index), 1), np.uint8),
                                index)
    h = y.copy_to_host()
    return np.lib.stride_tricks.as_strided(h, Y.get_dim(), [s * 4 for s in Y.get_stride()]).astype(np.float64)


@pytest.mark.parametrize("note", ["TENSOR_CORE", "DOWN_CONVERT_INPUTS"])
def test_pygraph_selected_note_runs_conv_tc_tf32(rng, note):
    dims, wdims = size(((2, 8, 5, 4), (16, 8, 3, 3)), ((8, 64, 28, 28), (128, 64, 3, 3)))
    g, X, W, B, Y = _pygraph(dims, wdims)
    g.select_numeric_notes([getattr(cudnn.numerical_note, note)])
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    x, w, b = data(rng, dims, wdims)
    assert "conv_tc" in g.get_plan_name_at_index(g.get_selected_plan_index())
    check_tf32(_run_plan(g, X, W, B, Y, x, w, b), x, w, b)           # the selected (default) plan
    ran = 0
    for i in range(g.get_execution_plan_count()):
        name = g.get_plan_name_at_index(i)
        notes = {str(x) for x in g.get_numerical_notes_for_plan_at_index(i)}
        if not any(note in s for s in notes):     # barred by the filter: never built or run
            with pytest.raises(cudnn.cudnnGraphNotSupportedError):
                _run_plan(g, X, W, B, Y, x, w, b, i)
            continue
        assert "conv_tc" in name and any("TENSOR_CORE" in s for s in notes) and \
            any("DOWN_CONVERT" in s for s in notes), (name, notes)
        check_tf32(_run_plan(g, X, W, B, Y, x, w, b, i), x, w, b)
        ran += 1
    assert ran >= 1


def test_pygraph_fp32_conv_without_opt_in_stays_fp32(monkeypatch):
    g, *_ = _pygraph((1, 8, 4, 4), (8, 8, 3, 3))
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    names = [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]
    assert names and not any("conv_tc" in s for s in names), names
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    g2, *_ = _pygraph((1, 8, 4, 4), (8, 8, 3, 3))
    g2.select_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    with pytest.raises(cudnn.cudnnGraphNotSupportedError):
        g2.create_execution_plans([cudnn.heur_mode.A])
        g2.check_support()
