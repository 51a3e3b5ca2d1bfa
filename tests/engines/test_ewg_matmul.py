"""Engine matmul_wgmma end to end (simulator at tiny shapes, real shapes with NCUDNN_SHAPES=gpu): IR graph ->
candidates -> plan -> execute, against the float64 oracle with poisoned outputs; refusals name the cause."""
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.matmul_wgmma import TILES
from ncudnn.ir import Matmul, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.testing import SIM, assert_close, poison_value, size
from ncudnn.types import cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as DT
from ncudnn.types import cudnnPointwiseMode_t as PM, cudnnStatus_t as S

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
NP = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16}
TOL = {F32: "float32", F16: "float16", BF16: "bfloat16"}
ENGINE = "matmul_wgmma"


def ctx(tc=True, cc=None):
    c = replace(api.context(), allow_tensor_cores=tc)
    return replace(c, device=replace(c.device, cc=cc)) if cc else c


def tensor(uid, dims, dtype, strides=None):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dtype, name=f"t{uid}")


def virt(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def to_dev(a, t):
    st = np.dtype(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a.dtype
    buf = np.full(t.span_elements(), 0x7FC0 if st == np.uint16 else poison_value(st), st)
    view = np.lib.stride_tricks.as_strided(buf.view(a.dtype), a.shape, [s * a.itemsize for s in t.strides])
    view[...] = a
    return cuda.to_device(buf)


def out_dev(t):
    dt = NP[t.dtype]
    if dt is ml_dtypes.bfloat16:
        return cuda.to_device(np.full(t.span_elements(), 0x7FC0, np.uint16))
    return cuda.to_device(np.full(t.span_elements(), poison_value(dt), dt))


def read(buf, t):
    h = buf.copy_to_host()
    if NP[t.dtype] is ml_dtypes.bfloat16:
        h = h.view(ml_dtypes.bfloat16)
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).astype(np.float64)


def bias_relu(bsz, m, n, k, dtype, out_dtype=None, a_strides=None, b_strides=None, b_dims=None):
    a = tensor(1, (bsz, m, k), dtype, a_strides)
    b = tensor(2, b_dims or (bsz, k, n), dtype, b_strides)
    bias, c = tensor(3, (1, 1, n), out_dtype or dtype), tensor(4, (bsz, m, n), out_dtype or dtype)
    mm = Matmul("mm", {"A": a, "B": b}, {"C": virt(10)})
    add = Pointwise("bias", {"X": mm.outputs["C"], "B": bias}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": c}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([mm, add, relu]).finalize(), (a, b, bias, c)


def run_bias_relu(rng, g, tensors, dtype, tile=None):
    a, b, bias, c = tensors
    cx = ctx()
    eng = registry.by_name(ENGINE)
    cfg = eng.candidates(api.problem(g), cx)[0]
    if tile is not None:
        cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile).with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages)
    assert cfg.engine == ENGINE
    assert api.check_support(g, cfg, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg, cx)
    assert plan.workspace_size == 0
    av, bv = rng.uniform(-1, 1, a.dims).astype(NP[dtype]), rng.uniform(-1, 1, b.dims).astype(NP[dtype])
    biasv = rng.uniform(-1, 1, bias.dims).astype(NP[c.dtype])
    out = out_dev(c)
    api.execute(plan, {1: to_dev(av, a), 2: to_dev(bv, b), 3: to_dev(biasv, bias), 4: out})
    f = lambda x: x.astype(np.float64)  # noqa: E731
    expect = np.maximum(ref_mm(f(av), f(bv)) + f(biasv), 0)
    assert_close(read(out, c), expect, TOL[c.dtype])
    return plan


def test_wgmma_bf16_bias_relu_batched_edges(rng):
    # M, N not multiples of the tile; K a multiple of 8 but not of 64 (zero-filled tail)
    bsz, m, n, k = size((2, 24, 40, 40), (3, 1000, 776, 1032))
    g, ts = bias_relu(bsz, m, n, k, BF16)
    run_bias_relu(rng, g, ts, BF16)


def test_wgmma_f16_transposed_a_broadcast_b_f32_out(rng):
    # A m-contiguous (MN-major, transpose flag), B n-contiguous (MN-major) broadcast over the batch, FP32 out
    bsz, m, n, k = size((2, 16, 24, 32), (2, 520, 264, 200))
    g, ts = bias_relu(bsz, m, n, k, F16, F32, a_strides=(m * k, 1, m), b_dims=(1, k, n))
    run_bias_relu(rng, g, ts, F16)


def test_wgmma_notes_knobs_and_keep():
    g, _ = bias_relu(4, 1024, 1024, 1024, BF16)
    eng = registry.by_name(ENGINE)
    sub = api.problem(g)
    cands = eng.candidates(sub, ctx())
    assert cands and all(c.engine == ENGINE for c in cands)
    assert NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE in eng.config_notes(sub, cands[0])
    kinds = {k.type for k in eng.knobs(sub)}
    assert {K.CUDNN_KNOB_TYPE_TILE_SIZE, K.CUDNN_KNOB_TYPE_STAGES, K.CUDNN_KNOB_TYPE_SWIZZLE} <= kinds
    assert "SWIZZLE = 3" in eng.keep(sub, cands[0].with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, 3), ctx())[1]
    st, why = eng.keep(sub, cands[0].with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0).with_knob(K.CUDNN_KNOB_TYPE_STAGES, 6),
                       ctx())
    assert st != S.CUDNN_STATUS_SUCCESS and "shared memory" in why


def test_wgmma_refusals_name_the_cause():
    eng = registry.by_name(ENGINE)
    g, _ = bias_relu(1, 64, 64, 64, BF16)
    st, why = eng.check_support(api.problem(g), ctx(cc=(8, 0)))
    assert st == S.CUDNN_STATUS_ARCH_MISMATCH and "sm_90a" in why
    st, why = eng.check_support(api.problem(g), ctx(cc=(10, 0)))
    assert st == S.CUDNN_STATUS_ARCH_MISMATCH and "sm_100" in why
    st, why = eng.check_support(api.problem(g), ctx(tc=False))
    assert st != S.CUDNN_STATUS_SUCCESS and "tensor cores" in why
    g, _ = bias_relu(1, 64, 64, 64, F32)
    st, why = eng.check_support(api.problem(g), replace(ctx(), allow_tf32=True))
    assert st != S.CUDNN_STATUS_SUCCESS
    g, _ = bias_relu(1, 64, 64, 60, BF16)
    st, why = eng.check_support(api.problem(g), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "K=60" in why


@pytest.mark.gpu
@pytest.mark.parametrize("tile", range(len(TILES)))
def test_wgmma_gpu_every_tile(rng, tile):
    g, ts = bias_relu(2, 1000, 1032, 1096, BF16)
    run_bias_relu(rng, g, ts, BF16, tile)
