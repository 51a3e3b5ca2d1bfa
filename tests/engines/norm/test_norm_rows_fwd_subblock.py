"""Engine "norm_rows": the sub-block forward variants (KERNEL_CFG 1..16) through the engine API vs the
float64 oracle, and their pruning (odd rows, BF16 .cs stores, rows too long for a warp)."""
import pytest

from ncudnn.engines import api
from ncudnn.testing import size
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnBackendNormMode_t as NM, cudnnDataType_t as DT)

from test_norm_batch_engine import _execute
from test_norm_rows_engine import fwd_graph

KC, BS, TR, KS = (K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS,
                  K.CUDNN_KNOB_TYPE_STAGES)


def _sub_ecs(g):
    return {(e.config.get(KC), e.config.get(BS), e.config.get(TR), e.config.get(KS)): e
            for e in api.get_heuristics(g) if e.config.get(KC, 0)}


@pytest.mark.parametrize("variant", [(1, 32, 4, 0), (4, 64, 2, 0), (2, 128, 1, 1), (4, 256, 1, 0), (5, 32, 4, 0),
                                     (6, 64, 2, 0), (2, 64, 2, 1), (1, 32, 8, 0), (8, 128, 1, 1),
                                     (10, 128, 1, 1), (10, 32, 4, 1)],
                         ids=lambda v: "kc%d-b%d-r%d-s%d" % v)
@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
def test_nrh_sub_variants_run(rng, mode, variant):
    # 5 rows of 256: not a multiple of 2 or 4 rows a block (GPU: the benchmark's 8192 rows of 1024 and 4099 rows)
    g = fwd_graph(mode, dims=size((5, 4, 8, 8), (4099, 1024)))
    ecs = _sub_ecs(g)
    assert variant in ecs, sorted(ecs)
    plan = _execute(g, rng, positive=("X",), ec=ecs[variant])
    assert plan.engine_names == ["norm_rows"]


@pytest.mark.parametrize("variant", [(9, 128, 1, 1), (12, 128, 1, 0), (11, 64, 1, 1), (10, 64, 2, 1)],
                         ids=lambda v: "kc%d-b%d-r%d-s%d" % v)
def test_nrh_sub_rows_a_thread_by_knobs(rng, variant):
    """KERNEL_CFG 9-12 (2 or 4 rows a thread) set by knobs (not all ranked): 5 rows, a ragged last thread."""
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(5, 4, 8, 8))
    cfg = api.get_heuristics(g)[0].config
    for k, v in zip((KC, BS, TR, KS), variant):
        cfg = cfg.with_knob(k, v)
    cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 16)
    plan = _execute(g, rng, positive=("X",), ec=cfg)
    rpt = 2 if variant[0] < 11 else 4
    assert plan.parts[0].steps[0].grid == -(-5 // (variant[2] * rpt))


@pytest.mark.parametrize("variant", [(13, 128, 1, 1), (14, 32, 4, 1), (15, 64, 2, 0), (16, 128, 1, 1)],
                         ids=lambda v: "kc%d-b%d-r%d-s%d" % v)
@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
def test_nrh_sub_l2_policies_by_knobs(rng, mode, variant):
    """KERNEL_CFG 13-16 (L2 eviction policies on x's loads / y's stores) set by knobs: 5 rows of 256 (GPU: 4099 of
    1024); the policies show in the kernel source only on a GPU (the simulator's accesses are plain)."""
    g = fwd_graph(mode, dims=size((5, 4, 8, 8), (4099, 1024)))
    cfg = api.get_heuristics(g)[0].config
    for k, v in zip((KC, BS, TR, KS), variant):
        cfg = cfg.with_knob(k, v)
    plan = _execute(g, rng, positive=("X",), ec=cfg.with_knob(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 16))
    assert plan.engine_names == ["norm_rows"] and plan.parts[0].steps[0].name == "norm_rows_fwd_sub"


def test_nrh_sub_l2_policies_pruned():
    from ncudnn.engines.norm.rows_fwd import FWD_SUB_KCFG
    assert [FWD_SUB_KCFG[k][4:] for k in (13, 14, 15, 16)] == [("evict_first", None), ("evict_first", "evict_last"),
                                                              (None, "evict_last"), ("evict_first", "evict_first")]
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dtype=DT.CUDNN_DATA_BFLOAT16, dims=(3, 256))
    cfg = api.get_heuristics(g)[0].config.with_knob(KC, 14).with_knob(BS, 128).with_knob(TR, 1)
    st, why = api.check_support(g, cfg.with_knob(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 16))
    assert int(st) != 0 and "L2 policies" in why


def test_nrh_sub_bf16(rng):
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dtype=DT.CUDNN_DATA_BFLOAT16, dims=size((3, 256), (8192, 2048)))
    ecs = _sub_ecs(g)
    assert not any(k[0] in (3, 4, 5, 6, 7, 8) for k in ecs) and any(k[0] == 10 for k in ecs)   # .cs stores / loads: float32 only
    _execute(g, rng, positive=("X",), tol="bfloat16", ec=ecs[(1, 64, 2, 0)])


def test_nrh_sub_pruned():
    odd = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 255))
    assert not _sub_ecs(odd)                          # rows that do not divide into 16-byte vectors
    long_rows = fwd_graph(NM.CUDNN_RMS_NORM, dims=(2, 4096))
    ecs = _sub_ecs(long_rows)
    assert not any(k[1] in (32, 64) for k in ecs)     # > 32 values a thread
    assert (1, 128, 1, 0) in ecs and (2, 256, 1, 0) in ecs
    def first(mode, dims, dtype=DT.CUDNN_DATA_FLOAT):
        c = api.get_heuristics(fwd_graph(mode, dims=dims, dtype=dtype))[0].config
        return c.get(KC), c.get(BS), c.get(TR), c.get(KS)
    # 128 threads a row, x loaded with the L2 evict-first policy, y stored plain (y evict-first, KERNEL_CFG 16, left
    # y out of the L2 for the next kernel on the H200)
    assert first(NM.CUDNN_LAYER_NORM, (4, 1024)) == (13, 128, 1, 1)
    assert first(NM.CUDNN_RMS_NORM, (4, 1024)) == (13, 128, 1, 1)
    # 16-bit data (no policies): LN the same geometry plain, RMS a warp a row; short RMS rows a warp a row too
    assert first(NM.CUDNN_LAYER_NORM, (4, 1024), DT.CUDNN_DATA_BFLOAT16) == (2, 128, 1, 1)
    assert first(NM.CUDNN_RMS_NORM, (4, 1024), DT.CUDNN_DATA_BFLOAT16) == (2, 32, 4, 1)
    assert first(NM.CUDNN_RMS_NORM, (4, 256)) == (2, 32, 4, 1)


def test_nrh_sub_default_table(rng, monkeypatch):
    """FWD_SUB_DEFAULT makes a sub-block config the heuristic's first where it fits, the row kernel elsewhere;
    the row kernel's config stays among the candidates."""
    from ncudnn.engines import heuristics
    from ncudnn.engines.norm import rows_fwd as E

    # rankings are cached per problem and heuristics generation: a generation of this test's own, restored after
    monkeypatch.setattr(heuristics, "generation", heuristics.generation + 7919001)
    monkeypatch.setattr(E, "FWD_SUB_DEFAULT", ((256, (2, 64, 2, 0)),))
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(5, 256))
    ecs = api.get_heuristics(g)
    first = ecs[0].config
    assert (first.get(KC), first.get(BS), first.get(TR), first.get(KS)) == (2, 64, 2, 0)
    assert any(e.config.get(KC) == 0 and e.config.get(K.CUDNN_KNOB_TYPE_LOAD_SIZE) == 16 for e in ecs[1:])
    _execute(g, rng, positive=("X",), ec=ecs[0])
    long_rows = api.get_heuristics(fwd_graph(NM.CUDNN_LAYER_NORM, dims=(2, 2048)))[0].config
    assert long_rows.get(KC, 0) == 0                  # 512 vectors > 256: the row kernel
    monkeypatch.setattr(heuristics, "generation", heuristics.generation + 1)
    monkeypatch.setattr(E, "FWD_SUB_DEFAULT", ((256, (6, 32, 4, 0), "rms"), (256, (1, 64, 2, 1))))
    ln = api.get_heuristics(fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 512)))[0].config
    rms = api.get_heuristics(fwd_graph(NM.CUDNN_RMS_NORM, dims=(3, 512)))[0].config
    assert (ln.get(KC), ln.get(BS), ln.get(TR), ln.get(KS)) == (1, 64, 2, 1)
    assert (rms.get(KC), rms.get(BS), rms.get(TR), rms.get(KS)) == (6, 32, 4, 0)
