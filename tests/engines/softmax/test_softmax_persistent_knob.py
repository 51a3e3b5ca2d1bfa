"""Engine "softmax_fused" knob STAGES (the persistent row kernel) through the engine API against the
float64 oracle; the heuristic's default for long rows; refusals with reasons."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.engines.softmax.fused import PERSIST_BLOCK, PERSIST_STAGES
from ncudnn.ir.partition import partition
from ncudnn.testing import assert_close, size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnStatus_t as S

import membound_util as U
from test_softmax_engine import _softmax_ref, fwd_graph

KB, KL, KR, KU, KS = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_LOAD_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS,
                      K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, K.CUDNN_KNOB_TYPE_STAGES)


def _cfg(g, knobs):
    cfg = api.get_heuristics(g)[0].config
    for k, v in knobs.items():
        cfg = cfg.with_knob(k, v)
    return cfg


def _keep(g, cfg):
    eng, sub = registry.by_name("softmax_fused"), partition(g)[0][0]
    return eng.keep(sub, cfg, None)


@pytest.mark.parametrize("dims,dtype,algo,block,stages", [
    ((4, 1024), U.F32, "accurate", 128, 2), ((3, 600), U.F32, "log", 128, 2), ((3, 512), U.F32, "accurate", 128, 1),
    ((3, 1024), U.DT.CUDNN_DATA_BFLOAT16, "accurate", 128, 2), ((4, 512), U.F32, "accurate", 128, 3)],
    ids=["f32-pf", "f32-log-guarded", "f32-regs", "bf16-pf", "f32-pf2"])
def test_esm_persist_knob_runs(rng, dims, dtype, algo, block, stages):
    g, x, y = fwd_graph(dims, (dims[0], 1), dtype=dtype, algo=algo)
    cfg = _cfg(g, {KB: block, KL: 16, KR: 0, KU: 0, KS: stages})
    st, why = _keep(g, cfg)
    assert st == S.CUDNN_STATUS_SUCCESS, why
    a = rng.uniform(-4, 4, dims)
    out = U.poisoned(y)
    plan = U.run_ec(g, {1: U.upload(a, x), 2: out}, cfg)
    step = plan.parts[0].steps[0]
    assert step.key.startswith("softmax_persist:") and step.block == block
    assert step.shared == (stages - 1) * dims[1] * (4 if dtype == U.F32 else 2)   # rows in x's type
    ref = _softmax_ref(U.download(U.upload(a, x), x), (1,), algo == "log")
    assert_close(U.download(out, y), ref, U.TOLNAME[dtype])


def test_esm_persist_refusals():
    g, _, _ = fwd_graph((3, 512), (3, 1))
    base = _cfg(g, {KB: 128, KL: 16, KR: 0, KU: 0, KS: 2})
    st, why = _keep(g, base.with_knob(KL, 0))
    assert st != S.CUDNN_STATUS_SUCCESS and "LOAD_SIZE 16" in why
    st, why = _keep(g, base.with_knob(KU, 4))
    assert st != S.CUDNN_STATUS_SUCCESS and "persistent" in why
    st, why = _keep(g, base.with_knob(KB, 32))                         # not 64..1024 threads
    assert st != S.CUDNN_STATUS_SUCCESS and "BLOCK_SIZE 32" in why
    g2, _, _ = fwd_graph((3, 65536), (3, 1))                            # 64 values a thread at 1024 threads
    st, why = _keep(g2, _cfg(g2, {KB: 1024, KL: 16, KR: 0, KU: 0, KS: 2}))
    assert st != S.CUDNN_STATUS_SUCCESS and "does not fit" in why
    g4, _, _ = fwd_graph((3, 32768), (3, 1))                           # two FP32 rows: 256 KB of shared memory
    st, why = _keep(g4, _cfg(g4, {KB: 0, KL: 16, KR: 0, KU: 0, KS: 3}))
    assert st != S.CUDNN_STATUS_SUCCESS and "does not fit" in why
    assert _keep(g4, _cfg(g4, {KB: 0, KL: 16, KR: 0, KU: 0, KS: 2}))[0] == S.CUDNN_STATUS_SUCCESS
    g3, _, _ = fwd_graph((3, 258), (3, 1))                              # no 16-byte vectors
    assert not any(e.config.get(KS) for e in api.get_heuristics(g3))


def _first(dims, dtype=U.F32, algo="accurate"):
    c = api.get_heuristics(fwd_graph(dims, dims[:-1] + (1,), dtype=dtype, algo=algo)[0])[0].config
    return c.engine, (c.get(KB), c.get(KL), c.get(KR), c.get(KU), c.get(KS))


def test_esm_default_is_persistent_for_long_rows():
    """The heuristic's first config at the H200 benchmark's shapes (no kernel runs)."""
    persist = ("softmax_fused", (PERSIST_BLOCK, 16, 0, 0, PERSIST_STAGES))
    assert _first((8192, 32768)) == persist
    assert _first((8192, 32768), algo="log") == persist
    assert _first((8192, 32768), dtype=U.DT.CUDNN_DATA_BFLOAT16) == persist
    assert _first((64, 20000)) == persist
    assert _first((64, 65536), dtype=U.DT.CUDNN_DATA_HALF) == ("softmax_fused", (512, 16, 0, 4, 0))   # too long
    assert _first((8192, 1024)) == ("softmax_fused", (0, 0, 0, 0, 0))        # warp per row, registers
    assert _first((64, 32770)) == ("softmax_fused", (0, 0, 0, 0, 0))         # no 16-byte vectors


@pytest.mark.gpu
def test_esm_default_runs_persistent(rng):
    """The default config of a long row runs the persistent kernel: the benchmark shape (a GPU only:
    the simulator takes minutes for 1024 threads a row; the knob tests above run it at small shapes)."""
    dims = size((2, 16400), (8192, 32768))     # > 16384: past the one-block-per-row register kernels
    g, x, y = fwd_graph(dims, (dims[0], 1))
    ec = api.get_heuristics(g)[0]
    assert (ec.config.get(KL), ec.config.get(KS)) == (16, PERSIST_STAGES)
    a = rng.uniform(-4, 4, dims)
    out = U.poisoned(y)
    plan = U.run_ec(g, {1: U.upload(a, x), 2: out}, ec.config)
    assert plan.parts[0].steps[0].key.startswith("softmax_persist:")
    assert_close(U.download(out, y), _softmax_ref(a, (1,), False), "float32")


@pytest.mark.parametrize("dims", [(8, 32768), (8, 1024), (8, 4096), (3, 48)])
def test_esm_search_space_equals_the_base_enumeration(dims):
    """configs() walks only the accepted knob values: the same list as the base class's full walk."""
    from ncudnn.engines.base import Engine
    g, _, _ = fwd_graph(dims, (dims[0], 1))
    eng, sub, ctx = registry.by_name("softmax_fused"), partition(g)[0][0], api.context()
    assert eng.configs(sub, ctx) == Engine.configs(eng, sub, ctx)
