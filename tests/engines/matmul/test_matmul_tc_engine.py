"""Engine matmul_tc end to end (simulator at tiny shapes, real shapes with NCUDNN_SHAPES=gpu): IR graph ->
heuristics -> plan -> execute, against the float64 oracle with poisoned outputs; refusals name the cause."""
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.matmul.tc import TILES
from ncudnn.ir import Matmul, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.testing import SIM, assert_close, poison_value, size
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as DT
from ncudnn.types import cudnnPointwiseMode_t as PM, cudnnStatus_t as S

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
NP = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16}
TOL = {F32: "float32", F16: "float16", BF16: "bfloat16"}
SIM_TILE = len(TILES) - 2          # 32x32x32 on 2x2 warps: the simulator's tile


def ctx(tc=True):
    return replace(api.context(), allow_tensor_cores=tc)


def tensor(uid, dims, dtype, strides=None):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dtype, name=f"t{uid}")


def virt(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def to_dev(a, t):
    """``a`` at tensor ``t``'s strides in a flat device buffer (gaps poisoned)."""
    st = np.dtype(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a.dtype
    buf = np.full(t.span_elements(), 0x7FC0 if st == np.uint16 else poison_value(st), st)
    view = np.lib.stride_tricks.as_strided(buf.view(a.dtype), a.shape, [s * a.itemsize for s in t.strides])
    view[...] = a
    return cuda.to_device(buf)


def out_dev(t):
    dt = NP[t.dtype]
    if dt is ml_dtypes.bfloat16:
        return cuda.to_device(np.full(t.span_elements(), 0x7FC0, np.uint16))   # bf16 NaN
    return cuda.to_device(np.full(t.span_elements(), poison_value(dt), dt))


def read(buf, t):
    h = buf.copy_to_host()
    if NP[t.dtype] is ml_dtypes.bfloat16:
        h = h.view(ml_dtypes.bfloat16)
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).astype(np.float64)


def rand(rng, dims, dtype):
    return rng.uniform(-1, 1, dims).astype(NP[dtype])


def bias_relu(bsz, m, n, k, dtype, out_dtype=None, a_strides=None, b_strides=None, b_dims=None):
    a = tensor(1, (bsz, m, k), dtype, a_strides)
    b = tensor(2, b_dims or (bsz, k, n), dtype, b_strides)
    bias, c = tensor(3, (1, 1, n), out_dtype or dtype), tensor(4, (bsz, m, n), out_dtype or dtype)
    mm = Matmul("mm", {"A": a, "B": b}, {"C": virt(10)})
    add = Pointwise("bias", {"X": mm.outputs["C"], "B": bias}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": c}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([mm, add, relu]).finalize(), (a, b, bias, c)


def tc_config(g, c, tile=None):
    eng = registry.by_name("matmul_tc")
    cfg = eng.candidates(api.problem(g), c)[0]
    if tile is not None:
        cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile).with_knob(K.CUDNN_KNOB_TYPE_STAGES,
                                                                         TILES[tile].stages)
    return cfg


def run_bias_relu(rng, g, tensors, dtype, tile=None):
    a, b, bias, c = tensors
    cx = ctx()
    cfg = tc_config(g, cx, SIM_TILE if SIM and tile is None else tile)
    assert api.check_support(g, cfg, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg, cx)
    assert plan.workspace_size == 0
    av, bv, biasv = rand(rng, a.dims, dtype), rand(rng, b.dims, dtype), rand(rng, bias.dims, c.dtype)
    out = out_dev(c)
    api.execute(plan, {1: to_dev(av, a), 2: to_dev(bv, b), 3: to_dev(biasv, bias), 4: out})
    f = lambda x: x.astype(np.float64)  # noqa: E731
    expect = np.maximum(ref_mm(f(av), f(bv)) + f(biasv), 0)
    assert_close(read(out, c), expect, TOL[c.dtype])
    return plan


def test_bf16_bias_relu_batched_edges(rng):
    # M, N not multiples of the tile; K a multiple of 8 but not of BLOCK_K (zero-filled tail)
    bsz, m, n, k = size((2, 24, 40, 40), (3, 1000, 776, 1032))
    g, ts = bias_relu(bsz, m, n, k, BF16)
    run_bias_relu(rng, g, ts, BF16)


def test_f16_transposes_broadcast_batch_f32_out(rng):
    # A m-contiguous, B k-contiguous (both transposed), B broadcast over the batch, FP32 output
    bsz, m, n, k = size((2, 16, 24, 32), (2, 520, 264, 200))
    g, ts = bias_relu(bsz, m, n, k, F16, F32, a_strides=(m * k, 1, m), b_strides=(0, 1, k), b_dims=(1, k, n))
    run_bias_relu(rng, g, ts, F16)


def test_notes_knobs_and_heuristics_prefer_tc():
    g, _ = bias_relu(4, 1024, 1024, 1024, BF16)
    all_ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A, ctx())
    # tensor-core engines first (matmul_wgmma, a matmul_tc subclass on sm_90, may rank ahead of matmul_tc)
    assert all_ecs[0].config.engine in ("matmul_tc", "matmul_wgmma")
    ecs = [e for e in all_ecs if e.config.engine == "matmul_tc"]
    assert ecs and all_ecs.index(ecs[0]) < min([i for i, e in enumerate(all_ecs) if "tc" not in e.config.engine
                                                and "wgmma" not in e.config.engine] or [len(all_ecs)])
    assert NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE in ecs[0].numerical_notes
    assert ecs[0].workspace_size == 0
    eng = registry.by_name("matmul_tc")
    kinds = {k.type for k in eng.knobs(api.problem(g))}
    assert {K.CUDNN_KNOB_TYPE_TILE_SIZE, K.CUDNN_KNOB_TYPE_STAGES, K.CUDNN_KNOB_TYPE_SWIZZLE} <= kinds
    bad = ecs[0].config.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, 3)
    assert "SWIZZLE = 3" in eng.keep(api.problem(g), bad, ctx())[1]


def test_refusals_name_the_cause():
    eng = registry.by_name("matmul_tc")
    g, _ = bias_relu(1, 64, 64, 64, BF16)
    st, why = eng.check_support(api.problem(g), ctx(tc=False))
    assert st != S.CUDNN_STATUS_SUCCESS and "tensor cores" in why
    g, _ = bias_relu(1, 64, 64, 64, F32)
    st, why = eng.check_support(api.problem(g), replace(ctx(), allow_tf32=True))
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "TF32" in why
    g, _ = bias_relu(1, 64, 64, 60, BF16)
    st, why = eng.check_support(api.problem(g), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "K=60" in why
    g, _ = bias_relu(1, 64, 64, 64, BF16, a_strides=(64 * 128, 128, 2))
    st, why = eng.check_support(api.problem(g), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "stride is 1" in why


@pytest.mark.gpu
@pytest.mark.parametrize("tile", range(len(TILES) - 2), ids=lambda i: TILES[i].label.replace(" ", "_"))
def test_gpu_every_tile(rng, tile):
    g, ts = bias_relu(2, 520, 392, 264, BF16)
    run_bias_relu(rng, g, ts, BF16, tile=tile)


def test_tf32_nt_bias_relu_notes_and_math(rng):
    # FP32 A (m, k) and B stored (n, k): TF32 when the math type allows it, refused otherwise
    bsz, m, n, k = size((1, 24, 16, 36), (2, 700, 520, 388))
    g, ts = bias_relu(bsz, m, n, k, F32, b_strides=(n * k, 1, k))
    eng = registry.by_name("matmul_tc")
    cx = replace(ctx(), allow_tf32=True)
    st, why = eng.check_support(api.problem(g), ctx())
    assert st != S.CUDNN_STATUS_SUCCESS and "TF32" in why
    assert eng.check_support(api.problem(g), cx) == (S.CUDNN_STATUS_SUCCESS, "")
    cfg = tc_config(g, cx, SIM_TILE if SIM else None)
    assert NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS in eng.config_notes(api.problem(g), cfg)
    a, b, bias, c = ts
    plan = api.build_plan(g, cfg, cx)
    av, bv, biasv = rand(rng, a.dims, F32), rand(rng, b.dims, F32), rand(rng, bias.dims, F32)
    out = out_dev(c)
    api.execute(plan, {1: to_dev(av, a), 2: to_dev(bv, b), 3: to_dev(biasv, bias), 4: out})
    expect = np.maximum(ref_mm(av.astype(np.float64), bv.astype(np.float64)) + biasv, 0)
    assert_close(read(out, c), expect, "tf32")
    g, _ = bias_relu(1, 32, 32, 32, F32)     # B (k, n) n-contiguous: not for TF32
    assert "k-contiguous" in eng.check_support(api.problem(g), cx)[1]
