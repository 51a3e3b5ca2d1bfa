"""Split-K helpers shared by GEMM and the implicit-GEMM convolutions.

* deterministic ("workspace"): the block kernel stores raw partial sums to a workspace laid out
  ``[batch, SPLITS, M, N]`` (``ftype``); :func:`make_reduce` sums the SPLITS slices in a fixed order
  (slice 0 first; loads issued four slices at a time) and applies the real epilogue. :func:`workspace_elems` is exact.
  :func:`make_reduce_wide` is the same sum for many slices (wgrad splits a long reduction 64-1024
  ways): a block of 32 x WIDE_ROWS threads owns 32 consecutive outputs, row r sums slices r, r + ROWS,
  ... with four independent accumulators (coalesced 128-byte warp reads, 4 loads in flight per
  thread), then row 0 adds the ROWS partials in order: deterministic, order fixed by (SPLITS, ROWS).
* atomic (NONDETERMINISTIC: float addition order varies run to run): :func:`make_prescale` sets
  ``out = beta * out`` (``0`` when beta == 0, never reading out), then the block kernel atomically
  adds ``alpha * partial``. Only for a linear epilogue (alpha/beta) and fp32/fp64 outputs.
"""
import numpy as np
from numba import cuda, float32, float64, uint64

_CACHE = {}
REDUCE_THREADS = 256


def k_slice(K, splits, block_k):
    """K range per split, a multiple of BLOCK_K (the last split may be shorter or empty)."""
    per = -(-K // splits)
    return -(-per // block_k) * block_k


def workspace_elems(batch, M, N, splits):
    return 0 if splits <= 1 else batch * splits * M * N


def workspace_args(ws, M, N):
    """Output args addressing the workspace as [batch*SPLITS, M, N] (strided_output layout)."""
    return (ws, M * N, 0, 1, N, 1)


def make_store(OUT, EPI, ftype="float32"):
    """Device function ``store(v, z, m, n, o_args, bias_args, r_args, alpha, beta)``: the epilogue of one
    summed output (batch z, row m, column n): bias / residual / output addressing, then ``EPI.fn``.
    Both reduce kernels end in it."""
    key = ("store", OUT.key, EPI.key, ftype)
    if key in _CACHE:
        return _CACHE[key]
    o_row, o_col, epi = OUT.row, OUT.col, EPI.fn
    BIAS_ROW, BIAS_COL, RESIDUAL = EPI.BIAS == "row", EPI.BIAS == "col", EPI.RESIDUAL

    @cuda.jit(device=True, inline=True)
    def store(v, z, m, n, o_args, bias_args, r_args, alpha, beta):
        b_off = z * bias_args[1]
        if BIAS_ROW:
            b_off += m * bias_args[2]
        if BIAS_COL:
            b_off += n * bias_args[2]
        r_off = o_row(r_args, z, m) + o_col(r_args, z, n) if RESIDUAL else 0
        epi(v, o_args[0], o_row(o_args, z, m) + o_col(o_args, z, n), bias_args[0], b_off,
            r_args[0], r_off, alpha, beta)

    _CACHE[key] = store
    return store


def make_reduce(OUT, EPI, ftype="float32"):
    """kernel(ws, splits, o_args, bias_args, r_args, batch, M, N, alpha, beta): grid over batch*M*N."""
    key = ("reduce", OUT.key, EPI.key, ftype)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    store = make_store(OUT, EPI, ftype)

    @cuda.jit
    def reduce_kernel(ws, SPLITS, o_args, bias_args, r_args, BATCH, M, N, alpha, beta):
        idx = cuda.grid(1)
        if idx >= BATCH * M * N:
            return
        n = idx % N
        m = (idx // N) % M
        z = idx // (M * N)
        MN = M * N
        # slices in a fixed order (0, 1, ..., SPLITS-1), their loads issued four at a time (independent
        # of the sum: four DRAM round trips overlap instead of queueing behind each add)
        p = uint64(z * SPLITS * MN + m * N + n)
        step = uint64(MN)
        v = ACC(0)
        s = 0
        while s + 4 <= SPLITS:
            a0 = ws[p]
            a1 = ws[p + step]
            a2 = ws[p + uint64(2) * step]
            a3 = ws[p + uint64(3) * step]
            v = (((v + a0) + a1) + a2) + a3
            p += uint64(4) * step
            s += 4
        while s < SPLITS:
            v += ws[p]
            p += step
            s += 1
        store(v, z, m, n, o_args, bias_args, r_args, alpha, beta)

    _CACHE[key] = reduce_kernel
    return reduce_kernel


#: slice groups (warps) per block of the wide reduce: 16 x 32 = 512 threads
WIDE_ROWS = 16
#: slices from which the launchers use the wide reduce
WIDE_FROM = 8


def make_reduce_wide(OUT, EPI, ftype="float32", rows=WIDE_ROWS):
    """kernel(ws, splits, o_args, bias_args, r_args, batch, M, N, alpha, beta) like :func:`make_reduce`,
    launched with :func:`wide_grid` blocks of ``32 * rows`` threads."""
    key = ("reduce_wide", OUT.key, EPI.key, ftype, rows)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    ROWS = rows
    store = make_store(OUT, EPI, ftype)

    @cuda.jit
    def reduce_wide_kernel(ws, SPLITS, o_args, bias_args, r_args, BATCH, M, N, alpha, beta):
        part = cuda.shared.array((ROWS, 33), ACC)
        tid = cuda.threadIdx.x
        tx = tid % 32
        ty = tid // 32
        idx = cuda.blockIdx.x * 32 + tx
        MN = M * N
        live = idx < BATCH * MN
        z = idx // MN
        r = idx - z * MN
        a0 = ACC(0)
        a1 = ACC(0)
        a2 = ACC(0)
        a3 = ACC(0)
        if live:
            p = uint64(z * SPLITS * MN + r + ty * MN)
            step = uint64(ROWS * MN)
            step2 = uint64(2 * ROWS * MN)
            step3 = uint64(3 * ROWS * MN)
            step4 = uint64(4 * ROWS * MN)
            s = ty
            while s + 3 * ROWS < SPLITS:
                a0 += ws[p]
                a1 += ws[p + step]
                a2 += ws[p + step2]
                a3 += ws[p + step3]
                p += step4
                s += 4 * ROWS
            while s < SPLITS:
                a0 += ws[p]
                p += step
                s += ROWS
        part[ty, tx] = (a0 + a1) + (a2 + a3)
        cuda.syncthreads()
        if ty == 0 and live:
            v = ACC(0)
            for j in range(ROWS):
                v += part[j, tx]
            store(v, z, r // N, r % N, o_args, bias_args, r_args, alpha, beta)

    _CACHE[key] = reduce_wide_kernel
    return reduce_wide_kernel


def wide_grid(total, rows=WIDE_ROWS):
    """(blocks, threads) of :func:`make_reduce_wide` over ``total`` outputs."""
    return max(1, -(-total // 32)), 32 * rows


def make_prescale(OUT, ftype="float32"):
    """kernel(o_args, batch, M, N, beta): out = beta * out, or 0 when beta == 0 (out not read)."""
    key = ("prescale", OUT.key, ftype)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    o_row, o_col = OUT.row, OUT.col

    @cuda.jit
    def prescale_kernel(o_args, BATCH, M, N, beta):
        idx = cuda.grid(1)
        if idx >= BATCH * M * N:
            return
        n = idx % N
        m = (idx // N) % M
        z = idx // (M * N)
        off = o_row(o_args, z, m) + o_col(o_args, z, n)
        out = o_args[0]
        if beta == 0:
            out[off] = ACC(0)
        else:
            out[off] = ACC(beta) * out[off]

    _CACHE[key] = prescale_kernel
    return prescale_kernel


def launch_1d(kernel, total, stream, *args):
    blocks = max(1, -(-total // REDUCE_THREADS))
    kernel[blocks, REDUCE_THREADS, stream](*args)


def f(ftype):
    return np.float64 if ftype == "float64" else np.float32
