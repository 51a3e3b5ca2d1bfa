"""The wide split-K reduce (splitk.make_reduce_wide): flat and rows layouts, 16-byte and scalar paths
(N % 4, a shifted workspace), batches, the epilogue (alpha / beta, column bias, residual, relu) against
the float64 sum of the partials; its summation order bit-identical to the first wide reduce (v1) and,
up to WIDE_ROWS slices, to the narrow reduce."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.gemm import splitk
from ncudnn.kernels.gemm.operands import strided_output
from ncudnn.testing import assert_close, poison_value, size

i64 = np.int64
OUT = strided_output()
SPEC = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))


def flat_grid(total):
    return max(1, -(-total // (4 * splitk.WIDE_FLAT_THREADS))), splitk.WIDE_FLAT_THREADS


def rows_grid(total):
    return max(1, -(-total // 128)), 32 * splitk.WIDE_ROWS


def run(kern, grid, ws_h, shift, S, B, M, N, alpha, beta, c0, bias, res, ftype=np.float32):
    """Launch ``kern`` over ``ws_h[shift:]`` (B x S x M x N partials); the output starts as ``c0``."""
    ws_d = cuda.to_device(ws_h)
    ws = ws_d[shift:] if shift else ws_d
    c = cuda.to_device(c0)
    o_args = (c, i64(M * N), i64(0), i64(1), i64(N), i64(1))
    r_args = (cuda.to_device(res), i64(M * N), i64(0), i64(1), i64(N), i64(1))
    b_args = (cuda.to_device(bias), i64(0), i64(1))
    kern[grid[0], grid[1]](ws, i64(S), o_args, b_args, r_args, i64(B), i64(M), i64(N), ftype(alpha), ftype(beta))
    return c.copy_to_host().reshape(B, M, N)


def case(rng, S, B, M, N, shift, dtype=np.float32):
    ws_h = rng.uniform(-1, 1, B * S * M * N + shift).astype(dtype)
    c0 = rng.uniform(-1, 1, B * M * N).astype(dtype)
    bias = rng.uniform(-1, 1, N).astype(dtype)
    res = rng.uniform(-1, 1, B * M * N).astype(dtype)
    return ws_h, c0, bias, res


def oracle(ws_h, shift, S, B, M, N, alpha, beta, c0, bias, res):
    p = ws_h[shift:].astype(np.float64).reshape(B, S, M, N).sum(1)
    v = alpha * p + beta * c0.astype(np.float64).reshape(B, M, N) + bias + res.astype(np.float64).reshape(B, M, N)
    return np.maximum(v, 0)


@pytest.mark.parametrize("S,B,M,N,shift,layout", [
    (8, 1, 3, 12, 0, "flat"),      # 16-byte loads
    (9, 2, 3, 7, 0, "flat"),       # odd N: scalar path, batch 2
    (16, 1, 5, 8, 1, "flat"),      # misaligned workspace: scalar path
    (9, 2, 2, 12, 0, "rows"),
    (16, 1, 3, 7, 1, "rows"),
    (37, 2, 2, 12, 0, "flat"),     # more slices than groups: 1-3 slices a group
    (70, 1, 3, 5, 0, "rows"),      # groups with the four-accumulator step
])
def test_skw_wide_matches_oracle(rng, S, B, M, N, shift, layout):
    ws_h, c0, bias, res = case(rng, S, B, M, N, shift)
    kern = splitk.make_reduce_wide(OUT, ep.build(SPEC))
    grid = (flat_grid if layout == "flat" else rows_grid)(B * M * N)
    got = run(kern, grid, ws_h, shift, S, B, M, N, 0.75, 0.5, c0, bias, res)
    assert_close(got, oracle(ws_h, shift, S, B, M, N, 0.75, 0.5, c0, bias, res), "float32")


@pytest.mark.parametrize("store_mode", ["direct", "transpose"])
@pytest.mark.parametrize("S,N,shift", [(8, 12, 0), (12, 9, 0), (19, 8, 0)])
def test_skw_wide_beta0_poisoned_output(rng, store_mode, S, N, shift):
    """beta == 0: the poisoned output is never read; every output written (both store modes)."""
    B, M = 1, 37          # 444 / 333 / 296 outputs: two flat warps, four rows blocks, partial last ones
    ws_h, _, bias, res = case(rng, S, B, M, N, shift)
    c0 = np.full(B * M * N, poison_value(np.float32), np.float32)
    kern = splitk.make_reduce_wide(OUT, ep.build(SPEC), store_mode=store_mode)
    want = oracle(ws_h, shift, S, B, M, N, 1.5, 0.0, np.zeros_like(c0), bias, res)
    for grid in (flat_grid(B * M * N), rows_grid(B * M * N)):
        got = run(kern, grid, ws_h, shift, S, B, M, N, 1.5, 0.0, c0, bias, res)
        assert_close(got, want, "float32")


@pytest.mark.parametrize("S,N,shift", [(8, 12, 0), (9, 7, 0), (16, 8, 1), (19, 12, 0), (70, 4, 0)])
def test_skw_wide_same_bits_as_v1(rng, S, N, shift):
    """The summation order is v1's: bit-identical sums in both layouts and both store modes (plain
    epilogue, alpha 1, beta 0); up to WIDE_ROWS slices also the narrow reduce's."""
    B, M = 2, 5
    ws_h, _, _, _ = case(rng, S, B, M, N, shift)
    epi = ep.build(ep.EpilogueSpec())
    z = np.zeros(B * M * N, np.float32)
    args = (ws_h, shift, S, B, M, N, 1.0, 0.0, z, np.zeros(N, np.float32), z)
    old = run(splitk.make_reduce_wide_v1(OUT, epi), splitk.wide_grid_v1(B * M * N), *args)
    assert_close(old, ws_h[shift:].astype(np.float64).reshape(B, S, M, N).sum(1), "float32")
    for mode, batch in (("direct", 8), ("transpose", 8), ("direct", 4)):
        kern = splitk.make_reduce_wide(OUT, epi, store_mode=mode, batch=batch)
        for grid in (flat_grid(B * M * N), rows_grid(B * M * N)):
            assert np.array_equal(run(kern, grid, *args), old), (mode, batch, grid)
    if S <= splitk.WIDE_ROWS:
        narrow = splitk.make_reduce(OUT, epi)
        assert np.array_equal(run(narrow, (1, 128), *args), old)


def test_skw_wide_float64(rng):
    S, B, M, N = 9, 1, 3, 12
    spec = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()), out_dtype="float64", ftype="float64")
    ws_h, c0, bias, res = case(rng, S, B, M, N, 0, np.float64)
    kern = splitk.make_reduce_wide(OUT, ep.build(spec, "float64", "float64"), "float64")
    for grid in (flat_grid(B * M * N), rows_grid(B * M * N)):
        got = run(kern, grid, ws_h, 0, S, B, M, N, 0.75, 0.5, c0, bias, res, np.float64)
        assert_close(got, oracle(ws_h, 0, S, B, M, N, 0.75, 0.5, c0, bias, res), "float64")


def test_skw_wide_grid_layouts():
    t = splitk.WIDE_FLAT_THREADS
    assert splitk.wide_grid(65536 * 1024, splits=8) == (65536 * 1024 // (4 * t), t)
    assert splitk.wide_grid(65536 * 1024) == (65536 * 1024 // (4 * t), t)      # many outputs: flat
    assert splitk.wide_grid(4096, splits=16) == (4, t)                          # few slices: flat
    assert splitk.wide_grid(4096, splits=512) == (32, 32 * splitk.WIDE_ROWS)    # few outputs, many slices
    assert splitk.wide_grid(4096) == (32, 32 * splitk.WIDE_ROWS)
    assert splitk.wide_grid(1, splits=8) == (1, t)


@pytest.mark.parametrize("S,B,M,N,shift,layout", [
    size((8, 1, 7, 12, 0, "flat"), (8, 1, 4096, 1024, 0, "flat")),
    size((9, 1, 5, 7, 0, "flat"), (9, 1, 1000, 1023, 0, "flat")),      # scalar path: odd N
    size((16, 2, 3, 8, 1, "flat"), (16, 2, 1024, 1024, 1, "flat")),    # scalar path: shifted workspace
    size((40, 1, 3, 12, 0, "rows"), (512, 1, 64, 64, 0, "rows")),      # few outputs, many slices
])
def test_skw_wide_shapes(rng, S, B, M, N, shift, layout):
    """Tiny in the simulator, real sizes on a GPU (NCUDNN_SHAPES=gpu): the launchers' layout choice,
    the oracle, a poisoned output (beta 0)."""
    ws_h, _, bias, res = case(rng, S, B, M, N, shift)
    total = B * M * N
    grid = splitk.wide_grid(total, splits=S)
    assert (grid[1] == splitk.WIDE_FLAT_THREADS) == (layout == "flat") or total < splitk.WIDE_FLAT_FROM
    if layout == "rows":
        grid = rows_grid(total)
    c0 = np.full(total, poison_value(np.float32), np.float32)
    kern = splitk.make_reduce_wide(OUT, ep.build(SPEC))
    got = run(kern, grid, ws_h, shift, S, B, M, N, 1.25, 0.0, c0, bias, res)
    assert_close(got, oracle(ws_h, shift, S, B, M, N, 1.25, 0.0, np.zeros_like(c0), bias, res), "float32")
