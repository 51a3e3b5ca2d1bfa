"""Engine "softmax_fused" forward knobs LOAD_SIZE (16-byte vector kernel), TILE_ROWS and
ARRAY_SIZE_PER_THREAD through the engine API against the float64 oracle."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir.partition import partition
from ncudnn.testing import assert_close, size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnStatus_t as S

import membound_util as U
from test_softmax_engine import _softmax_ref, fwd_graph

KB, KL, KR, KU, KS = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_LOAD_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS,
                      K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, K.CUDNN_KNOB_TYPE_STAGES)


def _pick(g, **want):
    """The default config with the given knobs (built directly: the ranked list is capped)."""
    keys = dict(block=KB, load=KL, rows=KR, unroll=KU, stages=KS)
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


def test_short_row_default_and_refusals():
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


def _first(dims, dtype=U.F32, algo="accurate"):
    c = api.get_heuristics(fwd_graph(dims, dims[:-1] + (1,), dtype=dtype, algo=algo)[0])[0].config
    return c.engine, (c.get(KB), c.get(KL), c.get(KR), c.get(KU), c.get(KS))


def test_default_is_the_measured_config():
    """The heuristic's first config (no kernel runs: the shapes are the H200 benchmark's); the persistent
    kernel's defaults are in test_softmax_persistent_knob."""
    assert _first((64, 65536)) == ("softmax_fused", (512, 16, 0, 8, 0))   # too long for a block's registers
    assert _first((64, 65536), dtype=U.DT.CUDNN_DATA_HALF) == ("softmax_fused", (512, 16, 0, 4, 0))
    assert _first((8192, 32768))[1][4] > 0                                  # the persistent kernel
    assert _first((8192, 1024)) == ("softmax_fused", (0, 0, 0, 0, 0))     # warp per row, registers
    assert _first((256, 16384)) == ("softmax_fused", (0, 0, 0, 0, 0))     # block per row, registers
    assert _first((64, 32770)) == ("softmax_fused", (0, 0, 0, 0, 0))      # no 16-byte vectors


def test_long_row_online_kernel(rng):
    dims = size((1, 16400), (256, 32768))     # > 16384: past the scalar kernel's registers
    g, x, y = fwd_graph(dims, (dims[0], 1))   # per-row statistics (a (1, 1) pair would normalize globally)
    cfg = _pick(g, block=512, load=16, rows=0, unroll=8, stages=0)
    a = rng.uniform(-4, 4, dims)
    out = U.poisoned(y)
    plan = U.run_ec(g, {1: U.upload(a, x), 2: out}, cfg)
    assert plan.parts[0].steps[0].key.startswith("softmax_fwd_vec:") and plan.parts[0].steps[0].block == 512
    assert_close(U.download(out, y), _softmax_ref(a, (1,), False), "float32")
