"""pointwise_fused CTA_COUNT knob (grid cap in waves; 0 = one trip a thread) through the engine API:
an NCHW per-channel bias DAG on the vector path, every cap against the float64 oracle."""
import numpy as np
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir.partition import partition
from ncudnn.reference.pointwise import pointwise as ref_pw
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnPointwiseMode_t as PM, cudnnStatus_t as S

import engine_graphs as G

DIMS = (2, 8, 16, 16)
KW, KB, KU = K.CUDNN_KNOB_TYPE_CTA_COUNT, K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD


@pytest.mark.parametrize("waves", [0, 1, 8])
def test_bias_dag_every_grid_cap(rng, waves):
    g = G.bias_relu_mul(DIMS)
    cfg = api.get_heuristics(g)[0].config
    assert cfg.engine == "pointwise_fused" and cfg.get(KW) == 4          # the default cap is unchanged
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
