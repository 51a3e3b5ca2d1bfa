"""Engine matmul_wgmma end to end (simulator at tiny shapes, real shapes with NCUDNN_SHAPES=gpu): IR graph ->
candidates -> plan -> execute, against the float64 oracle with poisoned outputs; refusals name the cause."""
from dataclasses import replace

import numpy as np
import pytest

from ncudnn.engines import api, registry
from ncudnn.engines.matmul.wgmma import TILES
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.testing import assert_close, size
from ncudnn.types import cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as DT
from ncudnn.types import cudnnStatus_t as S
from test_matmul_tc_engine import NP, TOL, bias_relu, out_dev, read, to_dev

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
ENGINE = "matmul_wgmma"


def ctx(tc=True, cc=None):
    c = replace(api.context(), allow_tensor_cores=tc)
    return replace(c, device=replace(c.device, cc=cc)) if cc else c


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
