"""Launcher of the wgmma GEMM: check -> grid -> launch (C is the caller's).

The kernel takes the mma.sync kernel's fused signature, so the argument packing, grid and problem checks
are those of :mod:`ncudnn.kernels.tc_gemm.launch` (``fused_args``, ``fused_grid``, ``check_fused``).
"""
import numpy as np

from ..runtime import kcache
from ..runtime.launch import data_pointer, typeof_arg
from ..tc_gemm.launch import check_fused, fused_args, fused_grid

__all__ = ["run_wgmma_gemm", "compiled", "cache_key", "check_fused", "fused_args", "fused_grid", "tf32_halves",
           "as_halves"]

_COMPILED = {}


def cache_key(kern):
    """The kernel-cache spec key of a WgmmaKernel (factory arguments; the cache adds signature, cc, versions)."""
    return (f"wgmma_gemm {kern.cfg.name} a_kmajor={int(kern.a_kmajor)} b_kmajor={int(kern.b_kmajor)} "
            f"{kern.in_dtype} {kern.epi!r} {kern.bias_dtype} {kern.res_dtype}")


def compiled(kern, args):
    """The :class:`~ncudnn.kernels.runtime.launch.CompiledKernel` of a WgmmaKernel for these arguments' types,
    through the kernel cache (a second process loads the cubin, no JIT)."""
    sig = tuple(typeof_arg(a) for a in args)
    ck = _COMPILED.get((id(kern), sig))
    if ck is None:
        ck = kcache.get_or_compile(cache_key(kern), lambda: kern.kernel, sig)
        _COMPILED[(id(kern), sig)] = ck
    return ck


def tf32_halves(K, a_strides, b_strides):
    """(K, A strides, B strides) of an FP32 (TF32) problem as the kernel counts them: in uint16 halves
    (every stride but the unit k stride doubles; A (b1, b2, m, k), B (b1, b2, k, n))."""
    a, b = a_strides, b_strides
    return 2 * K, (2 * a[0], 2 * a[1], 2 * a[2], a[3]), (2 * b[0], 2 * b[1], b[2], 2 * b[3])


def as_halves(x):
    """A 1-D float32 array (NumPy or device) viewed as uint16 halves (the TF32 kernel's operand type)."""
    return x.view(np.uint16)


def run_wgmma_gemm(kern, a, b, c, M, N, K, a_strides, b_strides, c_strides, batch=(1, 1), bias=None,
                   res=None, bias_strides=(0, 1), res_strides=(0, 0, 0, 0), alpha=1.0, beta=0.0, stream=0):
    """C = epi(alpha * A @ B + beta * C, bias, res) over ``batch = (B1, B2)``; strides are element strides
    ``(b1, b2, m, k)`` (A), ``(b1, b2, k, n)`` (B), ``(b1, b2, m, n)`` (C, residual). Raises ValueError when
    the problem does not fit the kernel (layouts, multiples of 8, 16-byte alignment). TF32 kernels
    (``in_dtype`` float32) take 1-D float32 A / B and FP32 element counts (K, strides multiples of 4)."""
    if kern.in_dtype == "float32":
        a, b = as_halves(a), as_halves(b)
        K, a_strides, b_strides = tf32_halves(K, a_strides, b_strides)
    ptrs = () if isinstance(a, np.ndarray) else (data_pointer(a), data_pointer(b))
    ok, why = check_fused(kern, M, N, K, a_strides, b_strides, ptrs)
    if not ok:
        raise ValueError(f"wgmma gemm {kern.cfg.name}: {why}")
    bias = c if bias is None else bias
    res = c if res is None else res
    args = fused_args(kern, a, b, c, bias, res, M, N, K, batch, a_strides, b_strides, c_strides, bias_strides,
                      res_strides, alpha, beta)
    compiled(kern, args).launch(fused_grid(kern, M, N, batch), (kern.cfg.threads, 1, 1), args, stream, kern.smem)
