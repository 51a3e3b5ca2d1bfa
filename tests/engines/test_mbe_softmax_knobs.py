"""Engine "softmax_fused" forward knobs LOAD_SIZE (16-byte vector kernel), TILE_ROWS and
ARRAY_SIZE_PER_THREAD through the engine API against the float64 oracle."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir.partition import partition
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnStatus_t as S

import mb_util as U
from test_eng_softmax import _softmax_ref, fwd_graph

KB, KL, KR, KU = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_LOAD_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS,
                  K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD)


def _pick(g, **want):
    """The default config with the given knobs (built directly: the ranked list is capped)."""
    keys = dict(block=KB, load=KL, rows=KR, unroll=KU)
    cfg = api.get_heuristics(g)[0].config
    for k, v in want.items():
        cfg = cfg.with_knob(keys[k], v)
    eng, sub = registry.by_name("softmax_fused"), partition(g)[0][0]
    st, why = eng.keep(sub, cfg, None)
    assert st == S.CUDNN_STATUS_SUCCESS, why
    return cfg


@pytest.mark.parametrize("dims,want", [((5, 48), dict(block=0, load=16, rows=2, unroll=0)),
                                       ((2, 1100), dict(block=32, load=16, rows=0, unroll=2))],
                         ids=["warp-registers-r2", "warp-online-u2"])
@pytest.mark.parametrize("algo", ["accurate", "log"])
def test_forward_vec_knobs(rng, dims, want, algo):
    g, x, y = fwd_graph(dims, (dims[0], 1), algo=algo)
    a = rng.uniform(-4, 4, dims)
    out = U.poisoned(y)
    plan = U.run_ec(g, {1: U.upload(a, x), 2: out}, _pick(g, **want))
    assert plan.parts[0].steps[0].key.startswith("softmax_fwd_vec:")
    assert_close(U.download(out, y), _softmax_ref(a, (1,), algo == "log"), "float32")


def test_default_unchanged_and_refusals():
    g, _, _ = fwd_graph((3, 48), (3, 1))
    first = api.get_heuristics(g)[0].config
    assert (first.get(KB), first.get(KL), first.get(KR), first.get(KU)) == (0, 0, 0, 0)
    eng, sub = registry.by_name("softmax_fused"), partition(g)[0][0]
    st, why = eng.keep(sub, first.with_knob(KR, 2), None)             # TILE_ROWS without LOAD_SIZE 16
    assert st != S.CUDNN_STATUS_SUCCESS and "LOAD_SIZE" in why
    st, why = eng.keep(sub, first.with_knob(KL, 16).with_knob(KU, 4), None)   # registers: no unroll knob
    assert st != S.CUDNN_STATUS_SUCCESS and "online" in why
    g2, _, _ = fwd_graph((3, 6), (3, 1))                                  # 6 floats: no vectors
    assert not any(e.config.get(KL) for e in api.get_heuristics(g2))
