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
"""
import numpy as np

from .. import epilogue as ep
from ..gemm import splitk as sk
from ..gemm.operands import strided_output
from .fprop import conv_args

__all__ = ["make_split_reduce", "reduce_args", "reduce_launch", "workspace_bytes", "partial_args"]


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
        return sk.wide_grid(M * N)
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
