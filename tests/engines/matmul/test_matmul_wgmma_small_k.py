"""Small-K BF16 / FP16 matmuls (C-write bound) on matmul_wgmma: the ranking (tiles by their measured rate of
writing C, rings no deeper than k tiles + 1, no split-K) and the plans end to end against the float64
oracle with poisoned outputs (simulator at tiny shapes; real shapes with NCUDNN_SHAPES=gpu)."""
import numpy as np
import pytest

from ncudnn.engines import api, registry
from ncudnn.engines.matmul.tc import SMALL_K_TILES
from ncudnn.engines.matmul.wgmma import SMALL_K_RATE, TILES
from ncudnn.ir import Matmul, OpGraph
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.testing import SIM, assert_close, size
from ncudnn.types import cudnnBackendKnobType_t as K
from ncudnn.types import cudnnDataType_t as DT
from test_matmul_tc_engine import NP, TOL, bias_relu, out_dev, read, tensor, to_dev

F16, BF16 = DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
ENGINE = "matmul_wgmma"
#: the H200 benchmark's small-K shapes (M, N, K)
SHAPES = ((8192, 8192, 128), (8192, 8192, 256), (65536, 1024, 64))


def plain(m, n, k, dtype):
    a, b, c = tensor(1, (1, m, k), dtype), tensor(2, (1, k, n), dtype), tensor(3, (1, m, n), dtype)
    return OpGraph([Matmul("mm", {"A": a, "B": b}, {"C": c})], compute_dtype=DT.CUDNN_DATA_FLOAT).finalize(), (a, b, c)


@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("shape", SHAPES)
def test_sk16_ranking_small_k(shape, dtype):
    # on the (nominal) H200: matmul_wgmma first, its tile the best measured C-write rate at this K, a ring of
    # at most k tiles + 1, no split-K knob, and the prediction no faster than C's bytes at that rate
    M, N, Kd = shape
    g, _ = plain(M, N, Kd, dtype)
    ecs = api.get_heuristics(g)
    first = ecs[0]
    assert first.engine.name == ENGINE, [str(e) for e in ecs[:4]]
    kt = -(-Kd // 64)
    assert kt <= SMALL_K_TILES
    col = {1: 0, 2: 1}.get(kt, 2)
    best = max(SMALL_K_RATE, key=lambda t: SMALL_K_RATE[t][col])
    tile = first.config.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)
    assert tile == best
    assert 2 <= first.config.get(K.CUDNN_KNOB_TYPE_STAGES) <= max(2, kt + 1)
    assert first.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K) is None
    assert first.predicted_time >= M * N * 2 / (SMALL_K_RATE[tile][col] * 1e12) * 0.999
    # every other matmul_wgmma config of the list is predicted no faster than the first
    assert all(e.predicted_time >= first.predicted_time for e in ecs if e.engine.name == ENGINE)


def test_sk16_large_k_keeps_big_tile():
    # K = 8192: no small-K floor; the 128x256 tile at its own 4-deep ring stays first
    g, _ = plain(8192, 8192, 8192, BF16)
    first = api.get_heuristics(g)[0]
    assert first.engine.name == ENGINE
    assert first.config.get(K.CUDNN_KNOB_TYPE_TILE_SIZE) == 0
    assert first.config.get(K.CUDNN_KNOB_TYPE_STAGES) == TILES[0].stages


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_sk16_plan_small_k_end_to_end(rng, dtype):
    # the heuristics' first matmul_wgmma config at one k tile (K 64) with M / N edges, through the API
    m, n, k = size((72, 80, 64), (65536 // 8, 1024, 64))
    g, (a, b, c) = plain(m, n, k, dtype)
    cfg = [e for e in api.get_heuristics(g) if e.engine.name == ENGINE][0].config
    plan = api.build_plan(g, cfg)
    av, bv = rng.uniform(-1, 1, a.dims).astype(NP[dtype]), rng.uniform(-1, 1, b.dims).astype(NP[dtype])
    out = out_dev(c)
    api.execute(plan, {1: to_dev(av, a), 2: to_dev(bv, b), 3: out})
    assert_close(read(out, c), ref_mm(av.astype(np.float64), bv.astype(np.float64)), TOL[dtype])


@pytest.mark.parametrize("stages", [2, 3])
def test_sk16_plan_shallow_ring_fused(rng, stages):
    # STAGES 2 / 3 over 3 k tiles (the ring wraps), bias + relu epilogue, batch 2
    bsz, m, n, k = size((2, 24, 40, 192), (2, 1000, 776, 192))
    g, (a, b, bias, c) = bias_relu(bsz, m, n, k, BF16)
    eng = registry.by_name(ENGINE)
    cfg = eng.candidates(api.problem(g), api.context())[0].with_knob(K.CUDNN_KNOB_TYPE_STAGES, stages)
    assert eng.keep(api.problem(g), cfg, api.context())[0] == 0
    plan = api.build_plan(g, cfg)
    av, bv = rng.uniform(-1, 1, a.dims).astype(NP[BF16]), rng.uniform(-1, 1, b.dims).astype(NP[BF16])
    biasv = rng.uniform(-1, 1, bias.dims).astype(NP[BF16])
    out = out_dev(c)
    api.execute(plan, {1: to_dev(av, a), 2: to_dev(bv, b), 3: to_dev(biasv, bias), 4: out})
    f = lambda x: x.astype(np.float64)  # noqa: E731
    assert_close(read(out, c), np.maximum(ref_mm(f(av), f(bv)) + f(biasv), 0), TOL[BF16])


@pytest.mark.skipif(not SIM, reason="the simulator's tile pick")
def test_sk16_sim_tiny_picks_wgmma():
    # tiny FP16 problems still plan on matmul_wgmma (the shallow ring is not penalised when it holds every k tile)
    g, _ = plain(40, 48, 56, F16)
    assert api.get_heuristics(g)[0].engine.name == ENGINE


def test_sk16_small_k_kernel_epilogue():
    # small-K plans build their kernel with SMALL_K_EPI; large K keeps the tile's own epilogue (vector stores)
    from ncudnn.engines.matmul.wgmma import SMALL_K_EPI
    eng = registry.by_name(ENGINE)
    for k, want in ((128, SMALL_K_EPI), (1024, TILES[0].cfg.EPI)):
        g, _ = plain(256, 256, k, BF16)
        sub = api.problem(g)
        cfg = eng.candidates(sub, api.context())[0]
        assert eng.kernel(sub, cfg)[0].cfg.EPI == want
