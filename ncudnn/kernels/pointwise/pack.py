"""Interleave broadcast vector operands into one small buffer: the packed operand of a GEMM-family epilogue
with two or more vector steps (:mod:`ncudnn.engines.gemm.packing`).

``pack_vector(dst, src, n, nv, j, stride)`` writes ``dst[c * nv + j] = src[c * stride]`` for ``c < n``
(``stride`` 0: a one-element operand repeated), converting ``src``'s dtype to ``dst``'s (float32, or
float64 for fp64 operands). One launch per operand, one thread per element: the epilogue then reads
operand ``j`` of channel ``c`` at ``bias[c * nv + j]``, ``c * nv`` being the kernels' own ``b_off`` with
``nv`` passed as the bias stride.
"""
from numba import cuda

from ..runtime import dtypes

#: threads per block of the pack launch
THREADS = 128

_KERNELS = {}


def make_pack(src_dtype, dst_dtype="float32"):
    """The (cached) pack kernel from ``src_dtype`` to ``dst_dtype`` storage."""
    key = (dtypes.dtype_name(src_dtype), dtypes.dtype_name(dst_dtype))
    hit = _KERNELS.get(key)
    if hit is None:
        ld = dtypes.loader(key[0], "float64" if key[1] == "float64" else "float32")
        st = dtypes.storer(key[1])

        @cuda.jit
        def pack_vector(dst, src, n, nv, j, stride):
            c = cuda.grid(1)
            if c < n:
                st(dst, c * nv + j, ld(src, c * stride))

        hit = _KERNELS[key] = pack_vector
    return hit


def grid(n):
    """Blocks of one pack launch over ``n`` elements."""
    return max(1, -(-int(n) // THREADS))


def signature(src_dtype, dst_dtype="float32"):
    """numba signature text of :func:`make_pack`'s kernel (for the compile check)."""
    return f"void({dtypes.array_sig(dst_dtype)}, {dtypes.array_sig(src_dtype)}, int64, int64, int64, int64)"
