"""pointwise_fused CTA_COUNT knob (grid cap in waves; 0 = one trip a thread) through the engine API:
an NCHW per-channel bias DAG on the vector path, every cap against the float64 oracle."""
import math

import numpy as np
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir.partition import partition
from ncudnn.reference.pointwise import pointwise as ref_pw
from ncudnn.testing import assert_close, size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnPointwiseMode_t as PM, cudnnStatus_t as S

import engine_graphs as G

DIMS = (2, 8, 16, 16)
KW, KB, KU = K.CUDNN_KNOB_TYPE_CTA_COUNT, K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD


@pytest.mark.parametrize("waves", [0, 1, 8])
def test_bias_dag_every_grid_cap(rng, waves):
    g = G.bias_relu_mul(DIMS)
    cfg = api.get_heuristics(g)[0].config
    assert cfg.engine == "pointwise_fused" and (cfg.get(KB), cfg.get(KU), cfg.get(KW)) == (128, 2, 0)
    cfg = cfg.with_knob(KW, waves).with_knob(KB, 128).with_knob(KU, 1)
    plan = api.build_plan(g, cfg)
    (part,) = plan.parts
    assert part.meta.spec.vec == 4 and part.meta.spec.waves == waves
    # 1024 vectors, 128-thread blocks of one vector a thread: 8 blocks; capped grids (4 blocks in the
    # simulator) loop twice, the uncapped one runs 8 blocks once
    x, y = (rng.uniform(-1, 1, DIMS).astype(np.float32) for _ in range(2))
    b = rng.uniform(-1, 1, (1, DIMS[1], 1, 1)).astype(np.float32)
    out = G.poisoned(x.size)
    api.execute(plan, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out})
    want = ref_pw(PM.CUDNN_POINTWISE_MUL, ref_pw(PM.CUDNN_POINTWISE_ADD, x, b), ref_pw(PM.CUDNN_POINTWISE_RELU_FWD, y))
    assert_close(out.copy_to_host().reshape(DIMS), want, "float32")


def test_grid_cap_values_checked():
    g = G.bias_relu_mul(DIMS)
    eng, sub = registry.by_name("pointwise_fused"), partition(g)[0][0]
    st, why = eng.keep(sub, api.get_heuristics(g)[0].config.with_knob(KW, 3), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "CTA_COUNT" in why


@pytest.mark.parametrize("dims", [(16, 256, 128, 128), (64, 64, 56, 56), (3, 5, 7, 9)], ids=["537MB", "resnet", "odd"])
def test_default_config_ranks_first(dims):
    """128 threads, 2 vectors a trip, uncapped grid: the heuristic's first config (no kernel runs)."""
    cfg = api.get_heuristics(G.bias_relu_mul(dims))[0].config
    assert cfg.engine == "pointwise_fused" and (cfg.get(KB), cfg.get(KU), cfg.get(KW)) == (128, 2, 0)


def test_default_config_runs_uncapped(rng):
    dims = size(DIMS, (16, 256, 64, 64))
    g = G.bias_relu_mul(dims)
    ec = api.get_heuristics(g)[0]
    plan = api.build_plan(g, ec)
    (part,) = plan.parts
    spec = part.meta.spec
    assert (spec.block, spec.unroll, spec.waves, spec.vec) == (128, 2, 0, 4)
    assert part.grid == math.prod(dims) // (4 * 128 * 2)    # 128 threads of 2 vectors each: one trip
    x, y = (rng.uniform(-1, 1, dims).astype(np.float32) for _ in range(2))
    b = rng.uniform(-1, 1, (1, dims[1], 1, 1)).astype(np.float32)
    out = G.poisoned(x.size)
    api.execute(plan, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out})
    want = ref_pw(PM.CUDNN_POINTWISE_MUL, ref_pw(PM.CUDNN_POINTWISE_ADD, x, b), ref_pw(PM.CUDNN_POINTWISE_RELU_FWD, y))
    assert_close(out.copy_to_host().reshape(dims), want, "float32")
