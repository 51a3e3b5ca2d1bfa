"""Ranking of the skinny FP32 matmuls on the (nominal) H200, and the first pick run end to end.

Measured on the H200 (tools/probe_skinny.py): a 16384 x 64 output over K = 4096 fills the SMs only with the
skinny fast tiles split over K; the big square GEMMs keep the 128x128 fast tile unsplit."""
from dataclasses import replace

import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api
from ncudnn.engines import device as dev_mod
from ncudnn.engines import gemm_common as gc
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
    engine, tile, split = _knobs(_h200_first(16384, 64, 4096))
    assert engine == "matmul_simt" and tile in SKINNY_LABELS and split > 1, (engine, tile, split)


@pytest.mark.parametrize("n", [4096, 8192])
def test_big_square_keeps_the_unsplit_128x128_fast_tile(n):
    assert _knobs(_h200_first(n, n, n)) == ("matmul_simt", "128x128x8 t8x8 vec4 fast", 1)


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
