"""matmul_simt's skinny fast tiles (gemm_common.FAST_SKINNY_TILES, TILE_SIZE 9-13) end to end in the
simulator: IR graph -> plan -> execute against the float64 oracle with poisoned outputs and workspace, unsplit
and split-K (deterministic workspace partials); their sm_90 compile cases are registered."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.gemm import common as gc
from ncudnn.ir import Matmul, OpGraph, TensorDesc, packed_strides
from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.gemm import cases
from ncudnn.kernels.gemm.fastloop import fast_ok
from ncudnn.kernels.gemm.gemm import gemm_args, make_gemm
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnDataType_t as DT, cudnnStatus_t as S

SKINNY = {t.label: gc.SIMT_TILES.index(t) for t in gc.FAST_SKINNY_TILES}


def _graph(m, n, k):
    def t(uid, d):
        return TensorDesc(uid, d, packed_strides(d), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")
    a, b, c = t(1, (1, m, k)), t(2, (1, k, n)), t(3, (1, m, n))
    return OpGraph([Matmul("mm", {"A": a, "B": b}, {"C": c})]).finalize()


def _config(g, tile, split):
    c = registry.by_name("matmul_simt").default_config(api.problem(g))
    return c.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, split)


def test_skinny_tiles_are_fast_and_appended():
    assert gc.SIMT_TILES[:len(gc.MATMUL_TILES)] == gc.MATMUL_TILES      # older knob values keep their tile
    assert len(SKINNY) == len(gc.FAST_SKINNY_TILES) == 5
    for label, i in SKINNY.items():
        assert gc.SIMT_TILES[i].cfg.MAINLOOP == "fast", label


# one small launch per tile: (tile label, m, n, k, SPLIT_K); m, n multiples of 4 and k of BLOCK_K (the fast
# kernel's conditions, asserted below); m, n off the tile size (clamped edge rows / columns)
CASES = [("128x64x8 t8x8 vec4 fast", 12, 8, 16, 2), ("64x128x8 t8x8 vec4 fast", 4, 12, 8, 1),
         ("64x64x8 t8x8 vec4 fast", 8, 4, 32, 4), ("64x64x8 t8x4 vec4 fast", 4, 8, 16, 1),
         ("16x128x32 t4x4 vec4 fast", 4, 8, 64, 2)]


@pytest.mark.parametrize("label,m,n,k,split", CASES)
def test_skinny_tile_matches_float64(rng, label, m, n, k, split):
    g = _graph(m, n, k)
    cfg = _config(g, SKINNY[label], split)
    assert api.check_support(g, cfg) == (S.CUDNN_STATUS_SUCCESS, "")
    eng = registry.by_name("matmul_simt")
    gcfg = eng.gemm_config(cfg)
    assert gcfg.SPLIT_K == split and gcfg.MAINLOOP == "fast"
    av = rng.uniform(-1, 1, (1, m, k)).astype(np.float32)
    bv = rng.uniform(-1, 1, (1, k, n)).astype(np.float32)
    a, b = cuda.to_device(av.ravel()), cuda.to_device(bv.ravel())
    out = cuda.to_device(np.full(m * n, poison_value(np.float32), np.float32))
    kern = make_gemm(gcfg, "mk", "kn")
    packed = gemm_args(kern, a, b, out, M=m, N=n, K=k, a_strides=(k, 1), b_strides=(n, 1), c_strides=(n, 1))
    assert fast_ok(gcfg, kern.A, kern.B, m, n, k, packed[4], packed[5])     # the fast mainloop runs
    plan = api.build_plan(g, cfg)
    want_ws = 4 * split * m * n if split > 1 else 0
    assert eng.workspace_size(api.problem(g), cfg) == want_ws and plan.workspace_size >= want_ws
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8)) if plan.workspace_size else None
    api.execute(plan, {1: a, 2: b, 3: out}, ws)
    assert_close(out.copy_to_host().reshape(1, m, n), ref_mm(av, bv), "float32")


def test_skinny_compile_cases_registered():
    names = compile_check.registered_cases()
    for c in cases.FAST_SKINNY:
        assert f"gemm_fast_{c.BLOCK_M}x{c.BLOCK_N}_t{c.THREAD_M}x{c.THREAD_N}_mk_kn" in names
    assert "gemm_fast_128x64_mk_kn_splitk4" in names and "gemm_fast_128x64_mk_kn_splitk4_reduce" in names


@pytest.mark.parametrize("label", ["16x128x32 t4x4 vec4 fast", "64x64x8 t8x4 vec4 fast"])
def test_skinny_tile_bf16_runs_the_generic_mainloop(rng, label):
    import ml_dtypes

    m, n, k = 4, 8, 40                     # K off BLOCK_K: the k edge predicated
    bf = DT.CUDNN_DATA_BFLOAT16

    def t(uid, d):
        return TensorDesc(uid, d, packed_strides(d), bf, name=f"t{uid}")
    g = OpGraph([Matmul("mm", {"A": t(1, (1, m, k)), "B": t(2, (1, k, n))}, {"C": t(3, (1, m, n))})],
                compute_dtype=DT.CUDNN_DATA_FLOAT).finalize()
    cfg = _config(g, SKINNY[label], 1)
    assert api.check_support(g, cfg) == (S.CUDNN_STATUS_SUCCESS, "")
    av = rng.uniform(-1, 1, (1, m, k)).astype(ml_dtypes.bfloat16)
    bv = rng.uniform(-1, 1, (1, k, n)).astype(ml_dtypes.bfloat16)
    out = cuda.to_device(np.full(m * n, 0x7FC0, np.uint16))                       # bf16 NaN bits
    plan = api.build_plan(g, cfg)
    api.execute(plan, {1: cuda.to_device(av.ravel().view(np.uint16)), 2: cuda.to_device(bv.ravel().view(np.uint16)),
                       3: out}, None)
    got = out.copy_to_host().view(ml_dtypes.bfloat16).reshape(1, m, n)
    assert_close(got, ref_mm(av, bv), "bfloat16")
