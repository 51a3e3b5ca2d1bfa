"""Split-K for the tensor-core conv fprop: the K = R*S*C range split over grid y, every slice's raw fp32
partials in a workspace laid out ``[SPLIT_K, M, N]`` (M = N*P*Q pixels, N = K channels), then one
deterministic reduce that sums the slices in order and applies the real epilogue (alpha / beta, bias,
pointwise chain, residual, cast) once per output: the same reduce kernels the SIMT GEMMs use
(:mod:`ncudnn.kernels.gemm.splitk`: one thread an output below ``WIDE_FROM`` slices, the wide reduce from
there), over the output addressing of :func:`ncudnn.kernels.gemm.operands.strided_output`.

``make_split_reduce(spec, bias_dtype, res_dtype, splits)`` -> reduce kernel;
``reduce_args(ws, splits, y, bias, res, M, N, ldc_m, ldc_n, bias_i, res_m, res_n, alpha, beta)`` its
arguments; ``reduce_launch(splits, M, N)`` its (grid, threads); ``workspace_bytes(M, N, splits)``;
``partial_args(...)`` the main kernel's argument tuple writing partials (kernels/tc_conv/fprop.py's
``conv_args`` with the workspace as output).

The generic reduce spends its time on 64-bit index division (three to five a thread: about 50 G outputs/s
on an H200). ``make_split_reduce_vec(spec,
bias_dtype, res_dtype)`` is the same ordered sum for N % 4 == 0 with a 2-D grid and no division:
thread (x, y) of block (bx, by) owns row m = by * VEC_ROWS + y, columns n = (bx * VEC_THREADS + x) * 4
.. + 3, reads each slice's four partials as one 16-byte load (a warp: 512 contiguous bytes) and calls
the same epilogue on its four sums; ``vec_args(ws, splits, y, bias, res, M, N, ldc_m, ldc_n, bias_i,
res_m, res_n, alpha, beta)`` / ``vec_launch(M, N)``. Sums are bit-identical to the generic reduce's
(same slice order, f32).
"""
import numpy as np
from numba import cuda, float32, int64, uint64

from ..pointwise import epilogue as ep
from ..gemm import splitk as sk
from ..gemm.operands import strided_output
from ..primitives.vec import ld4
from .fprop import conv_args

__all__ = ["make_split_reduce", "reduce_args", "reduce_launch", "workspace_bytes", "partial_args",
           "make_split_reduce_vec", "vec_args", "vec_launch", "VEC_THREADS", "VEC_ROWS"]

#: threads along n of the vector reduce (4 columns each) and rows a block: 64 x 4 = 256 threads
VEC_THREADS = 64
VEC_ROWS = 4
_VEC = {}


def workspace_bytes(M, N, splits):
    """Bytes of the fp32 partials (0 without a split)."""
    return 4 * sk.workspace_elems(1, M, N, splits)


def make_split_reduce(spec, bias_dtype, res_dtype, splits):
    """The reduce kernel summing ``splits`` slices and applying ``spec`` (an EpilogueSpec)."""
    built = ep.build(spec, bias_dtype, res_dtype)
    if splits >= sk.WIDE_FROM:
        return sk.make_reduce_wide(strided_output(), built)
    return sk.make_reduce(strided_output(), built)


def reduce_launch(splits, M, N):
    """(grid, threads) of the reduce over the M x N outputs."""
    if splits >= sk.WIDE_FROM:
        return sk.wide_grid(M * N, splits=splits)
    return max(1, -(-(M * N) // sk.REDUCE_THREADS)), sk.REDUCE_THREADS


def reduce_args(ws, splits, y, bias, res, M, N, ldc_m, ldc_n, bias_i=1, res_m=0, res_n=0, alpha=1.0, beta=0.0):
    """The reduce's arguments: output pixel m, channel n at ``m * ldc_m + n * ldc_n`` of ``y`` (residual
    likewise), bias element ``n * bias_i``."""
    i64 = np.int64
    o_args = (y, i64(0), i64(0), i64(1), i64(ldc_m), i64(ldc_n))
    r_args = (res, i64(0), i64(0), i64(1), i64(res_m), i64(res_n))
    return (ws, i64(splits), o_args, (bias, i64(0), i64(bias_i)), r_args, i64(1), i64(M), i64(N), np.float32(alpha),
            np.float32(beta))


def partial_args(kern, x, w, ws, N, C, H, W, K, P, Q, R, S, stride, pad, dil, x_strides, w_k):
    """The split kernel's arguments: as ``conv_args`` with the workspace ``ws`` (fp32) as the output,
    rows of K channels (bias / residual unused: any array)."""
    return conv_args(kern, x, w, ws, ws, ws, N, C, H, W, K, P, Q, R, S, stride, pad, dil, x_strides, w_k, K, 1)


def make_split_reduce_vec(spec, bias_dtype, res_dtype, batch=1):
    """The vector reduce (N % 4 == 0, 16-byte aligned workspace) applying ``spec``. ``batch`` 4: four
    slices' 16-byte loads issued before their adds (then one at a time); 1: one slice an iteration.
    Same sums either way (slices added in order)."""
    assert batch in (1, 4)
    built = ep.build(spec, bias_dtype, res_dtype)
    key = (built.key, batch)
    if key in _VEC:
        return _VEC[key]
    epi = built.fn
    FOUR_SLICES = batch == 4     # four slices' loads issued before their adds

    @cuda.jit
    def reduce_vec(ws, SPLITS, y, bias, res, M, N, ldc_m, ldc_n, bias_i, res_m, res_n, alpha, beta):
        n = (cuda.blockIdx.x * VEC_THREADS + cuda.threadIdx.x) * 4
        m = cuda.blockIdx.y * VEC_ROWS + cuda.threadIdx.y
        if m >= M or n >= N:
            return
        step = int64(M) * N
        p = int64(m) * N + n
        a0 = float32(0.0)
        a1 = float32(0.0)
        a2 = float32(0.0)
        a3 = float32(0.0)
        s = 0
        if FOUR_SLICES:
            while s + 4 <= SPLITS:
                x0 = ld4(ws, p)
                x1 = ld4(ws, p + step)
                x2 = ld4(ws, p + 2 * step)
                x3 = ld4(ws, p + 3 * step)
                a0 = (((a0 + x0[0]) + x1[0]) + x2[0]) + x3[0]
                a1 = (((a1 + x0[1]) + x1[1]) + x2[1]) + x3[1]
                a2 = (((a2 + x0[2]) + x1[2]) + x2[2]) + x3[2]
                a3 = (((a3 + x0[3]) + x1[3]) + x2[3]) + x3[3]
                p += 4 * step
                s += 4
        while s < SPLITS:
            v0, v1, v2, v3 = ld4(ws, p)
            a0 += v0
            a1 += v1
            a2 += v2
            a3 += v3
            p += step
            s += 1
        o = int64(m) * ldc_m + int64(n) * ldc_n
        r = int64(m) * res_m + int64(n) * res_n
        b = int64(n) * bias_i
        epi(a0, y, uint64(o), bias, uint64(b), res, uint64(r), alpha, beta)
        epi(a1, y, uint64(o + ldc_n), bias, uint64(b + bias_i), res, uint64(r + res_n), alpha, beta)
        epi(a2, y, uint64(o + 2 * ldc_n), bias, uint64(b + 2 * bias_i), res, uint64(r + 2 * res_n), alpha, beta)
        epi(a3, y, uint64(o + 3 * ldc_n), bias, uint64(b + 3 * bias_i), res, uint64(r + 3 * res_n), alpha, beta)

    _VEC[key] = reduce_vec
    return reduce_vec


def vec_launch(M, N):
    """(grid, block) of the vector reduce over M x N outputs."""
    return (max(1, -(-N // (4 * VEC_THREADS))), max(1, -(-M // VEC_ROWS)), 1), (VEC_THREADS, VEC_ROWS, 1)


def vec_args(ws, splits, y, bias, res, M, N, ldc_m, ldc_n, bias_i=1, res_m=0, res_n=0, alpha=1.0, beta=0.0):
    i32, i64 = np.int32, np.int64
    return (ws, i32(splits), y, bias, res, i32(M), i32(N), i64(ldc_m), i64(ldc_n), i64(bias_i), i64(res_m),
            i64(res_n), np.float32(alpha), np.float32(beta))
