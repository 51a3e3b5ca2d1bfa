"""Launcher of the tensor-core GEMM: check -> grid -> launch (no allocation; C is the caller's).

``run_tc_gemm(kern, a, b, c, M, N, K, a_strides, b_strides, c_strides, batch=1,
batch_strides=(0, 0, 0), alpha=1.0, stream=0)`` with element strides ``a_strides = (s_m, s_k)``,
``b_strides = (s_k, s_n)``, ``c_strides = (s_m, s_n)``; ``a`` / ``b`` / ``c`` are 1-D storage arrays
(NumPy under the simulator, device arrays / anything :mod:`ncudnn.kernels.runtime.launch` accepts on a GPU).
"""
import numpy as np
from numba import cuda, float32

from ..runtime.launch import CompiledKernel, data_pointer
from .config import TcGemmConfig

__all__ = ["run_tc_gemm", "tc_gemm_grid", "check_problem", "check_fused", "fused_args", "fused_grid",
           "amax_zero_kernel"]

_COMPILED = {}
_ZERO = []


def amax_zero_kernel():
    """The kernel ``zero_first(a)``: ``a[0] = 0`` (one thread; launch it with any grid). An amax output
    starts at 0 before the fused kernel's atomic max."""
    if not _ZERO:
        def zero_first(a):
            if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
                a[0] = float32(0.0)
        _ZERO.append(cuda.jit(zero_first))
    return _ZERO[0]


def tc_gemm_grid(cfg: TcGemmConfig, M, N, batch=1):
    return (-(-M // cfg.BLOCK_M) * -(-N // cfg.BLOCK_N), batch, 1)


def check_problem(kern, M, N, K, a_strides, b_strides, batch_strides=(0, 0, 0), ptrs=()):
    """(ok, reason): whether ``kern`` can run this problem (layouts, 16-byte chunks, alignment)."""
    if min(M, N, K) < 1:
        return False, f"empty problem M={M} N={N} K={K}"
    sa_m, sa_k = a_strides
    sb_k, sb_n = b_strides
    if kern.a_kmajor and sa_k != 1:
        return False, f"A must have unit k stride (a_strides={a_strides})"
    if not kern.a_kmajor and sa_m != 1:
        return False, f"A must have unit m stride (a_strides={a_strides})"
    if kern.b_kmajor and sb_k != 1:
        return False, f"B must have unit k stride (b_strides={b_strides})"
    if not kern.b_kmajor and sb_n != 1:
        return False, f"B must have unit n stride (b_strides={b_strides})"
    lda = sa_m if kern.a_kmajor else sa_k
    ldb = sb_n if kern.b_kmajor else sb_k
    need8 = {"K": K, "lda": lda, "ldb": ldb, "A batch stride": batch_strides[0],
             "B batch stride": batch_strides[1],
             ("K" if kern.a_kmajor else "M") + " (A contiguous extent)": K if kern.a_kmajor else M,
             ("K" if kern.b_kmajor else "N") + " (B contiguous extent)": K if kern.b_kmajor else N}
    for name, v in need8.items():
        if v % 8:
            return False, f"{name}={v} is not a multiple of 8 (16-byte cp.async chunks)"
    for p in ptrs:
        if p % 16:
            return False, f"operand address {p:#x} is not 16-byte aligned"
    return True, ""


def _compiled(kern):
    ck = _COMPILED.get(id(kern))
    if ck is None:
        ck = _COMPILED[id(kern)] = (kern, CompiledKernel(kern.kernel))
    return ck[1]


def run_tc_gemm(kern, a, b, c, M, N, K, a_strides, b_strides, c_strides, batch=1,
                batch_strides=(0, 0, 0), alpha=1.0, stream=0):
    """C[z] = alpha * A[z] @ B[z] for z < batch with the TcGemmKernel ``kern``; raises ValueError
    when the problem does not fit the kernel (see :func:`check_problem`)."""
    ptrs = ()
    if not isinstance(a, np.ndarray):
        ptrs = (data_pointer(a), data_pointer(b))
    ok, why = check_problem(kern, M, N, K, a_strides, b_strides, batch_strides, ptrs)
    if not ok:
        raise ValueError(f"tc_gemm {kern.cfg.name}: {why}")
    lda = a_strides[0] if kern.a_kmajor else a_strides[1]
    ldb = b_strides[1] if kern.b_kmajor else b_strides[0]
    args = (a, b, c, np.int32(M), np.int32(N), np.int32(K), np.int64(lda), np.int64(ldb),
            np.int64(c_strides[0]), np.int64(c_strides[1]), np.int64(batch_strides[0]),
            np.int64(batch_strides[1]), np.int64(batch_strides[2]), np.float32(alpha))
    _compiled(kern).launch(tc_gemm_grid(kern.cfg, M, N, batch), (kern.cfg.threads, 1, 1), args,
                           stream, kern.smem)


def check_fused(kern, M, N, K, a_strides, b_strides, ptrs=()):
    """(ok, reason) of the fused kernel on a problem with element strides ``a_strides = (b1, b2, m, k)``
    and ``b_strides = (b1, b2, k, n)`` (both batch strides of A and B must be multiples of 8)."""
    ok, why = check_problem(kern, M, N, K, a_strides[2:], b_strides[2:], (a_strides[0], b_strides[0], 0),
                            ptrs)
    if ok and (a_strides[1] % 8 or b_strides[1] % 8):
        return False, f"batch strides A {a_strides[:2]} / B {b_strides[:2]} are not multiples of 8 " \
            "(16-byte cp.async chunks)"
    return ok, why


def fused_args(kern, a, b, c, bias, res, M, N, K, batch, a_strides, b_strides, c_strides,
               bias_strides=(0, 1), res_strides=(0, 0, 0, 0), alpha=1.0, beta=0.0):
    """The fused kernel's argument tuple (order :data:`~.epilogue_source.FUSED_ARGS`). ``batch = (B1, B2)``;
    strides are element strides ``(b1, b2, m, k)`` (A), ``(b1, b2, k, n)`` (B), ``(b1, b2, m, n)``
    (C, residual), ``(flat batch, index)`` (bias); absent bias / residual: pass any array."""
    lda = a_strides[2] if kern.a_kmajor else a_strides[3]
    ldb = b_strides[3] if kern.b_kmajor else b_strides[2]
    i64 = np.int64
    return (a, b, c, bias, res, np.int32(M), np.int32(N), np.int32(K), i64(batch[1]), i64(lda), i64(ldb),
            i64(a_strides[0]), i64(a_strides[1]), i64(b_strides[0]), i64(b_strides[1]),
            i64(c_strides[2]), i64(c_strides[3]), i64(c_strides[0]), i64(c_strides[1]),
            i64(bias_strides[0]), i64(bias_strides[1]), i64(res_strides[2]), i64(res_strides[3]),
            i64(res_strides[0]), i64(res_strides[1]), np.float32(alpha), np.float32(beta))


def fused_grid(kern, M, N, batch):
    return tc_gemm_grid(kern.cfg, M, N, batch[0] * batch[1])
