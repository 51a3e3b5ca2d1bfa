"""Engine "norm_rows" forward knobs TILE_ROWS (rows a warp-per-row block) and LOAD_SIZE (16-byte
accesses) through the engine API against the float64 oracle."""
import pytest

from ncudnn.engines import api
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnBackendNormMode_t as NM, cudnnStatus_t as S

import mb_util as U
from test_eng_norm_batch import _execute
from test_eng_norm_rows import fwd_graph

KB, KR, KL = K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_LOAD_SIZE


def _pick(g, block, rows, load):
    ecs = [e for e in api.get_heuristics(g) if (e.config.get(KB), e.config.get(KR), e.config.get(KL))
           == (block, rows, load)]
    assert ecs, (block, rows, load)
    return ecs[0]


@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
@pytest.mark.parametrize("block,rows,load", [(0, 2, 16), (32, 8, 0), (128, 0, 16)],
                         ids=["warp-r2-vec", "warp-r8-scalar", "block128-vec"])
def test_forward_knobs(rng, mode, block, rows, load):
    g = fwd_graph(mode, dims=(5, 2, 4, 8), bias=mode == NM.CUDNN_LAYER_NORM)
    plan = _execute(g, rng, ec=_pick(g, block, rows, load))
    name = plan.parts[0].steps[0].key
    assert name.startswith("norm_rows_fwd_vec:" if load else "norm_rows_fwd:"), name


def test_forward_vec_with_epilogue_half(rng):
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 16), dtype=U.DT.CUDNN_DATA_HALF, training=False, relu=True)
    plan = _execute(g, rng, tol="float16", ec=_pick(g, 32, 0, 16))
    assert plan.parts[0].steps[0].key.startswith("norm_rows_fwd_vec:")


def test_default_config_unchanged_and_refusals():
    from ncudnn.engines import registry
    from ncudnn.ir.partition import partition

    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 6))           # 6 floats a row: no 16-byte vectors
    first = api.get_heuristics(g)[0].config
    assert (first.get(KB), first.get(KR), first.get(KL)) == (0, 0, 0)
    assert not any(e.config.get(KL) for e in api.get_heuristics(g))
    eng, sub = registry.get("norm_rows"), partition(g)[0][0]
    st, why = eng.keep(sub, first.with_knob(KL, 16), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "LOAD_SIZE" in why
    st, why = eng.keep(sub, first.with_knob(KR, 3), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "TILE_ROWS" in why
    g2 = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 2000))       # block per row: TILE_ROWS refused
    sub2 = partition(g2)[0][0]
    st, why = eng.keep(sub2, api.get_heuristics(g2)[0].config.with_knob(KR, 2), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "warp-per-row" in why
