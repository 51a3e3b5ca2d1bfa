"""Engine "norm_rows": the fused layer / RMS norm backward (KERNEL_CFG 1: dx and the dscale / dbias partial
rows in one persistent kernel, then the ordered combine) through the engine API against the float64
oracle, fresh random inputs, poisoned outputs; the two-pass path kept as a config; the ranking."""
import math

import pytest

from ncudnn.engines import api, registry
from ncudnn.engines.norm import rows_bwd as nr
from ncudnn.engines.device import H200
from ncudnn.ir import NormBwd, OpGraph
from ncudnn.ir.partition import partition
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnBackendNormMode_t as NM, cudnnDataType_t as DT

from ncudnn.testing import size

import membound_util as U
from test_norm_batch_engine import _execute

KB, KR, KL = K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_LOAD_SIZE
KC, KW, KS = K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_CTA_COUNT, K.CUDNN_KNOB_TYPE_STAGES
LN, RMS = NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM


def bwd_graph(mode, dims, dtype=U.F32, dbias=True, dscale=True, p_dtype=U.F32):
    """NormBwd on X of ``dims`` (row = dims[1:]); X / DY / DX in ``dtype``, SCALE / DSCALE / DBIAS in
    ``p_dtype``, statistics float32."""
    sc = (1,) + tuple(dims[1:])
    st = (dims[0],) + (1,) * (len(dims) - 1)
    ins = {"X": U.t(1, dims, dtype, name="x"), "DY": U.t(2, dims, dtype, name="dy"),
           "SCALE": U.t(3, sc, p_dtype, name="scale"), "INV_VARIANCE": U.t(5, st, name="inv")}
    if mode == LN:
        ins["MEAN"] = U.t(4, st, name="mean")
    outs = {"DX": U.t(10, dims, dtype, name="dx")}
    if dscale:
        outs["DSCALE"] = U.t(11, sc, p_dtype, name="dscale")
    if dbias:
        outs["DBIAS"] = U.t(12, sc, p_dtype, name="dbias")
    return OpGraph([NormBwd("bwd", ins, outs, mode=mode)]).finalize()


def _ec(g, knobs):
    """The heuristic's config of ``g`` whose knobs include ``knobs`` (type -> value)."""
    for e in api.get_heuristics(g):
        if all(e.config.get(k) == v for k, v in knobs.items()):
            return e
    raise AssertionError(f"no ranked config with {knobs}")


def _keys(plan):
    return [s.key.split(":")[0] for s in plan.parts[0].steps]


@pytest.mark.parametrize("mode", [LN, RMS], ids=["layer", "rms"])
@pytest.mark.parametrize("dims", [(7, 40), (9, 37), (5, 2, 4, 9)], ids=["vec", "odd", "4d-odd"])
def test_default_is_fused_and_matches_oracle(rng, mode, dims):
    g = bwd_graph(mode, dims)
    first = api.get_heuristics(g)[0].config
    assert first.engine == "norm_rows" and first.get(KC) == nr.BWD_FUSED
    assert first.get(KL) == (16 if math.prod(dims[1:]) % 4 == 0 else 0)
    plan = _execute(g, rng, positive=("INV_VARIANCE",))
    assert _keys(plan) == ["norm_rows_bwd_fused", "norm_rows_dparams_combine"]


@pytest.mark.parametrize("mode", [LN, RMS], ids=["layer", "rms"])
@pytest.mark.parametrize("dims", [size((6, 64), (8192, 1024)), size((3, 256), (8192, 4096))], ids=["1024", "4096"])
def test_bench_shapes_default(rng, mode, dims):
    """The benchmark's shapes on a GPU (NCUDNN_SHAPES=gpu), small ones in the simulator: the default
    (fused, 16-byte) plan against the oracle."""
    g = bwd_graph(mode, dims)
    plan = _execute(g, rng, positive=("INV_VARIANCE",))
    assert _keys(plan) == ["norm_rows_bwd_fused", "norm_rows_dparams_combine"]


@pytest.mark.parametrize("mode", [LN, RMS], ids=["layer", "rms"])
@pytest.mark.parametrize("dtype", [DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_HALF], ids=["bf16", "fp16"])
def test_half_io(rng, mode, dtype):
    # 48 elements: 6 vectors of 8 (scale bf16 too: 16-byte accesses of 8 elements)
    g = bwd_graph(mode, (6, 48), dtype, p_dtype=dtype if dtype == DT.CUDNN_DATA_BFLOAT16 else U.F32)
    plan = _execute(g, rng, positive=("INV_VARIANCE",), tol=U.TOLNAME[dtype])
    assert _keys(plan)[0] == "norm_rows_bwd_fused"


@pytest.mark.parametrize("block,rows,ctas,stages", [(32, 4, 1, 0), (32, 2, 0, 0), (128, 1, 0, 0), (32, 2, 1, 2),
                                                    (32, 4, 1, 2)],
                         ids=["b32-r4-c1", "b32-r2", "b128-r1", "b32-r2-c1-prefetch", "b32-r4-c1-prefetch"])
def test_knob_geometries(rng, block, rows, ctas, stages):
    """Hand-picked configs (api.build_plan takes a Config): rows not a multiple of TILE_ROWS, several
    row groups a block (CTA_COUNT 1 on the simulator's 2 SMs), a block wider than the row (idle slots),
    the next row group prefetched (STAGES 2; 11 rows in groups of 4 on 2 blocks: a block with 1 group)."""
    g = bwd_graph(LN, (11, 64))
    cfg = api.get_heuristics(g)[0].config.with_knob(KB, block).with_knob(KR, rows).with_knob(KW, ctas) \
        .with_knob(KS, stages)
    plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=cfg)
    assert _keys(plan)[0] == "norm_rows_bwd_fused"
    assert plan.parts[0].steps[0].block == block


def test_two_pass_kept_and_dscale_only(rng):
    g = bwd_graph(RMS, (6, 40), dbias=False)
    plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=_ec(g, {KC: 0}))
    assert _keys(plan)[:2] == ["norm_rows_bwd", "norm_rows_dparams"]
    plan = _execute(g, rng, positive=("INV_VARIANCE",))
    assert _keys(plan)[0] == "norm_rows_bwd_fused"


def test_refusals():
    eng = registry.by_name("norm_rows")
    g = bwd_graph(LN, (4, 40), dbias=False, dscale=False)       # dx only: the fused kernel has nothing to fuse
    sub = partition(g)[0][0]
    first = api.get_heuristics(g)[0].config
    assert first.get(KC) == 0
    st, why = eng.keep(sub, first.with_knob(KC, 1), None)
    assert st != 0 and "writes neither" in why
    g2 = bwd_graph(LN, (4, 37))
    sub2 = partition(g2)[0][0]
    cfg = api.get_heuristics(g2)[0].config
    st, why = eng.keep(sub2, cfg.with_knob(KL, 16), None)
    assert st != 0 and "LOAD_SIZE" in why
    st, why = eng.keep(sub2, cfg.with_knob(KC, 0).with_knob(KR, 2), None)
    assert st != 0 and "fused backward" in why
    g3 = bwd_graph(LN, (2, 1 << 16))                           # 64 values a thread at 1024 threads
    assert api.get_heuristics(g3)[0].config.get(KC) == 0


@pytest.mark.parametrize("cols", [1024, 4096])
def test_h200_cost_prefers_fused(monkeypatch, cols):
    """At the benchmark's shapes, with the H200's 132 SMs, the fused default ranks first and costs less
    than the two-pass path on the nominal H200 (no kernel runs)."""
    monkeypatch.setattr(nr.kprim, "sm_count", lambda: 132)
    g = bwd_graph(LN, (8192, cols))
    eng, sub = registry.by_name("norm_rows"), partition(g)[0][0]
    cands = eng.candidates(sub, api.context())
    fused = eng.default_config(sub)
    assert fused.get(KC) == 1 and fused.get(KL) == 16 and cands[0] == fused
    two = [c for c in cands if c.get(KC) == 0]
    assert two
    assert eng.cost(sub, fused, H200) < min(eng.cost(sub, c, H200) for c in two)
    assert all(eng.cost(sub, fused, H200) < eng.cost(sub, c, H200) for c in cands[1:])
    assert api.get_heuristics(g)[0].config == fused


def test_h200_default_geometry_is_the_measured_best():
    """The kernel layer's geometry at the benchmark's FP32 shapes on 132 SMs: the H200 probe's fastest
    (experiments/probe_norm_rows.py, 2026-11-30: 8192x1024 0.0372 ms, 8192x4096 0.1093 ms)."""
    from ncudnn.kernels.norm import row_bwd as kb

    c = kb.fused_config(1024, 8192, 132, 4)
    assert (c.block, c.rows, c.stages, c.blocks_per_sm, c.grid) == (128, 4, 2, 2, 264)
    c = kb.fused_config(4096, 8192, 132, 4)
    assert (c.block, c.rows, c.stages, c.blocks_per_sm, c.grid) == (512, 2, 2, 1, 132)
    assert kb.reg_cap(c) == 128
    assert kb.fused_config(1 << 14, 8192, 132, 4) is None          # 64 values a thread: the two-pass path


def test_backward_costed_per_path():
    """The fused and two-pass backwards move different bytes: a two-pass config costs its own steps' time,
    every fused geometry the default's (5% more off the default); the default ranks first."""
    from ncudnn.engines.membound.common import steps_time

    g = bwd_graph(LN, (48, 768))
    eng, ctx = registry.by_name("norm_rows"), api.context()
    sub = partition(g)[0][0]
    cands = eng.candidates(sub, ctx)
    default = eng.default_config(sub)
    assert {c.get(KC) for c in cands} == {0, 1} and cands[0] == default
    fused_t = steps_time(ctx.device, eng._steps(sub, default)[0])
    for cfg in cands:
        base = fused_t if cfg.get(KC) == 1 else steps_time(ctx.device, eng._steps(sub, cfg)[0])
        assert eng.cost(sub, cfg, ctx.device) == base * (1.0 if cfg == default else 1.05)
    assert min(eng.cost(sub, c, ctx.device) for c in cands if c.get(KC) == 0) > eng.cost(sub, default, ctx.device)
