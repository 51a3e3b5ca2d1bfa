"""Ranking of the skinny FP32 matmuls on the (nominal) H200, and the first pick run end to end.

Measured on the H200 (experiments/probe_skinny.py, 2026-11-30 21:27 UTC): a 16384 x 64 output over K = 4096 fills
the SMs only with the skinny fast tiles split over K; a 16-row output (GEMV-like) takes the 16-row tile split
4 ways; one 128-row / -column tile row over K = 8192 splits the 128x128 fast tile; the big outputs keep the
128x128 fast tile unsplit. Times in the comments: the probe's medians (L2 flushed)."""
from dataclasses import replace

import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api
from ncudnn.engines import device as dev_mod
from ncudnn.engines.gemm import common as gc
from ncudnn.ir import Matmul, OpGraph, TensorDesc, packed_strides
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.testing import assert_close, poison_value, size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnDataType_t as DT

SKINNY_LABELS = {t.label for t in gc.FAST_SKINNY_TILES}


def _graph(m, n, k):
    def t(uid, d):
        return TensorDesc(uid, d, packed_strides(d), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")
    return OpGraph([Matmul("mm", {"A": t(1, (1, m, k)), "B": t(2, (1, k, n))}, {"C": t(3, (1, m, n))})]).finalize()


def _h200_first(m, n, k):
    ctx = replace(api.context(None), device=dev_mod.H200)
    return api.get_heuristics(_graph(m, n, k), ctx=ctx)[0]


def _knobs(ec):
    c = ec.config
    return (c.engine, gc.SIMT_TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)].label if c.engine == "matmul_simt" else
            c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE), c.get(K.CUDNN_KNOB_TYPE_SPLIT_K))


def test_skinny_n64_deep_k_picks_a_split_skinny_tile():
    # measured 0.254 ms (0.80x cuBLAS; the old pick, 128x128x16 unsplit: 0.556 ms)
    engine, tile, split = _knobs(_h200_first(16384, 64, 4096))
    assert engine == "matmul_simt" and tile in SKINNY_LABELS and split > 1, (engine, tile, split)


def test_gemv_like_m16_picks_the_16_row_tile_split_4():
    # measured 0.103 ms (1.46x cuBLAS; the old pick, matmul_small 32x32 split 8: 0.312 ms)
    assert _knobs(_h200_first(16, 8192, 8192)) == ("matmul_simt", "16x128x32 t4x4 vec4 fast", 4)


@pytest.mark.parametrize("m,n", [(128, 8192), (8192, 128)])
def test_one_tile_row_or_column_of_128_splits_the_128x128_fast_tile(m, n):
    # measured 0.42 / 0.43 ms (0.81x / 0.80x cuBLAS; the old picks, 128x128x16 split 2: 0.57 ms)
    assert _knobs(_h200_first(m, n, 8192)) == ("matmul_simt", "128x128x8 t8x8 vec4 fast", 4)


def test_the_16_row_tile_only_where_one_tile_row_covers_m():
    from ncudnn.engines import registry

    simt = registry.by_name("matmul_simt")
    ctx = replace(api.context(None), device=dev_mod.H200)
    for m, want in ((16, True), (8, True), (17, False), (128, False)):
        g = _graph(m, 8192, 8192)
        tiles = {gc.SIMT_TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)].cfg.BLOCK_M
                 for c in simt.candidates(api.problem(g), ctx)}
        assert (16 in tiles) == want, (m, tiles)


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 256), (65536, 1024, 64)])
def test_big_outputs_keep_the_unsplit_128x128_fast_tile(m, n, k):
    assert _knobs(_h200_first(m, n, k)) == ("matmul_simt", "128x128x8 t8x8 vec4 fast", 1)


def test_skinny_first_pick_matches_float64(rng):
    m, n, k = size((16, 8, 24), (16384, 64, 4096))
    g = _graph(m, n, k)
    ec = api.get_heuristics(g)[0]
    plan = api.build_plan(g, ec)
    av = rng.uniform(-1, 1, (1, m, k)).astype(np.float32)
    bv = rng.uniform(-1, 1, (1, k, n)).astype(np.float32)
    out = cuda.to_device(np.full(m * n, poison_value(np.float32), np.float32))
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8)) if plan.workspace_size else None
    api.execute(plan, {1: cuda.to_device(av.ravel()), 2: cuda.to_device(bv.ravel()), 3: out}, ws)
    assert_close(out.copy_to_host().reshape(1, m, n), ref_mm(av, bv), "float32")
