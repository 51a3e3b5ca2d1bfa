"""Split-K helpers shared by GEMM and the implicit-GEMM convolutions.

* deterministic ("workspace"): the block kernel stores raw partial sums to a workspace laid out
  ``[batch, SPLITS, M, N]`` (``ftype``); :func:`make_reduce` sums the SPLITS slices in a fixed order
  and applies the real epilogue. :func:`workspace_elems` is exact.
* atomic (NONDETERMINISTIC: float addition order varies run to run): :func:`make_prescale` sets
  ``out = beta * out`` (``0`` when beta == 0, never reading out), then the block kernel atomically
  adds ``alpha * partial``. Only for a linear epilogue (alpha/beta) and fp32/fp64 outputs.
"""
import numpy as np
from numba import cuda, float32, float64

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


def make_reduce(OUT, EPI, ftype="float32"):
    """kernel(ws, splits, o_args, bias_args, r_args, batch, M, N, alpha, beta): grid over batch*M*N."""
    key = ("reduce", OUT.key, EPI.key, ftype)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    o_row, o_col, epi = OUT.row, OUT.col, EPI.fn
    BIAS_ROW, BIAS_COL, RESIDUAL = EPI.BIAS == "row", EPI.BIAS == "col", EPI.RESIDUAL

    @cuda.jit
    def reduce_kernel(ws, SPLITS, o_args, bias_args, r_args, BATCH, M, N, alpha, beta):
        idx = cuda.grid(1)
        if idx >= BATCH * M * N:
            return
        n = idx % N
        m = (idx // N) % M
        z = idx // (M * N)
        MN = M * N
        base = z * SPLITS * MN + m * N + n
        v = ACC(0)
        for s in range(SPLITS):
            v += ws[base + s * MN]
        b_off = z * bias_args[1]
        if BIAS_ROW:
            b_off += m * bias_args[2]
        if BIAS_COL:
            b_off += n * bias_args[2]
        r_off = o_row(r_args, z, m) + o_col(r_args, z, n) if RESIDUAL else 0
        epi(v, o_args[0], o_row(o_args, z, m) + o_col(o_args, z, n), bias_args[0], b_off,
            r_args[0], r_off, alpha, beta)

    _CACHE[key] = reduce_kernel
    return reduce_kernel


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
