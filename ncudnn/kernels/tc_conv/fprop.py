"""Implicit-GEMM conv fprop on tensor cores: kernel factory, argument pack, grid and problem check.

FP32 x / w run as TF32: the 16-bit kernel over their storage viewed as uint16 halves (two a channel),
as tc_gemm runs FP32 matmuls (kernels/tc_gemm/kernel.py ``_make_halves``). A 16-byte cp.async chunk is 4
FP32 channels, one k16 step in halves is one m16n8k8 tf32 step, and the gather needs nothing else: the
caller passes C, the x strides and the filter's k stride in halves (:func:`halves_per_element`), and
``cfg.BLOCK_K`` counts halves (BLOCK_K / 2 channels a k tile). ``make_tc_gemm`` is called with its "tf32"
kernel tag (what ``_make_halves`` passes on), since its float32 entry refuses ``conv=True``.
"""
import numpy as np

from ..tc_gemm import TcGemmConfig, make_tc_gemm, tc_gemm_grid

__all__ = ["CONV_CONFIGS", "make_tc_conv_fprop", "conv_args", "conv_grid", "check_conv", "halves_per_element",
           "kernel_dtype"]

#: input dtypes the kernel reads as 16-bit halves -> halves an element; the kernel dtype tag tc_gemm runs them
#: as (its m16n8k8 tf32 mma: the low 13 mantissa bits of each FP32 operand are ignored)
_HALVES = {"float32": (2, "tf32")}

#: GPU configs, best first for large problems: 8 warps keep the per-thread gather state small.
#: sm_90 compile check: 128x128 w2x4 210 registers, 128x256 w2x4 255, no spills;
#: 256x128 w4x2 spilled (88 / 196 bytes: four A gather slots per thread) and is left out.
CONV_CONFIGS = (
    TcGemmConfig(128, 128, 32, 2, 4, 4),
    TcGemmConfig(128, 256, 32, 2, 4, 3),
    TcGemmConfig(128, 64, 32, 2, 2, 4),
    TcGemmConfig(64, 64, 32, 2, 2, 4),
    TcGemmConfig(64, 128, 32, 2, 2, 4),
)


def halves_per_element(in_dtype):
    """16-bit halves an input element spans in the kernel's view: 2 for FP32 (TF32), else 1."""
    return _HALVES.get(in_dtype, (1,))[0]


def kernel_dtype(in_dtype):
    """The storage dtype the kernel's x / w arguments have: uint16 halves ("bfloat16"'s storage) for FP32."""
    return "bfloat16" if in_dtype in _HALVES else in_dtype


def make_tc_conv_fprop(cfg, in_dtype, epi, bias_dtype="float32", res_dtype="float32"):
    """The cached conv fprop kernel for ``cfg`` and these dtypes (``epi``: an EpilogueSpec). ``in_dtype``
    "float32": the TF32 kernel over uint16 halves (``cfg.BLOCK_K``, C and the strides in halves)."""
    tag = _HALVES[in_dtype][1] if in_dtype in _HALVES else in_dtype
    return make_tc_gemm(cfg, True, True, tag, epi=epi, bias_dtype=bias_dtype, res_dtype=res_dtype, conv=True)


def check_conv(C, K, x_strides, w_strides, ptrs=(), chunk=8):
    """(ok, reason) of the operand layouts. ``x_strides`` (n, c, h, w) and ``w_strides`` (k, c, r, s)
    in elements; R and S are implied by the filter strides (c fastest, then s, then r). ``chunk``: elements
    a 16-byte cp.async chunk holds (8 of 16-bit types, 4 of FP32)."""
    xn, xc, xh, xw = x_strides
    wk, wc, wr, ws = w_strides
    if xc != 1:
        return False, f"x must be channels-last (NHWC): c stride {xc} != 1"
    if C % chunk:
        return False, f"C = {C} is not a multiple of {chunk} (16-byte cp.async chunks of channels)"
    for name, v in (("x n stride", xn), ("x h stride", xh), ("x w stride", xw), ("w k stride", wk)):
        if v % chunk:
            return False, f"{name} {v} is not a multiple of {chunk}"
    if wc != 1 or ws != C:
        return False, f"w must be KRSC with packed RSC (c stride 1, s stride C): strides {w_strides}"
    for p in ptrs:
        if p % 16:
            return False, f"operand address {p:#x} is not 16-byte aligned"
    return True, ""


def conv_args(kern, x, w, y, bias, res, N, C, H, W, K, P, Q, R, S, stride, pad, dil, x_strides, w_k,
              ldc_m, ldc_n, bias_i=1, res_m=0, res_n=0, alpha=1.0, beta=0.0):
    """The kernel's argument tuple (order :data:`~ncudnn.kernels.tc_gemm.kernel.CONV_ARGS`).
    ``x_strides``: (n, h, w) element strides of x; ``w_k``: the filter's k stride; output pixel m of
    (n, p, q) and channel k at ``m * ldc_m + k * ldc_n`` (residual likewise with res_m / res_n). For FP32
    (TF32) x / w, C, ``x_strides`` and ``w_k`` count 16-bit halves (:func:`halves_per_element`)."""
    i32, i64 = np.int32, np.int64
    return (x, w, y, bias, res, i32(N * P * Q), i32(K), i32(R * S * C), i32(C), i32(H), i32(W), i32(P),
            i32(Q), i32(R), i32(S), i32(stride[0]), i32(stride[1]), i32(pad[0]), i32(pad[1]), i32(dil[0]),
            i32(dil[1]), i64(x_strides[0]), i64(x_strides[1]), i64(x_strides[2]), i64(w_k), i64(ldc_m),
            i64(ldc_n), i64(bias_i), i64(res_m), i64(res_n), np.float32(alpha), np.float32(beta))


def conv_grid(kern, N, P, Q, K, splits=1):
    """Output tiles on grid x, the ``splits`` k slices on grid y (a kernel of SPLIT_K > 1 takes any count
    from 2: its own cfg.SPLIT_K is 2, the kernel it shares)."""
    if (splits > 1) != (kern.cfg.SPLIT_K > 1):
        raise ValueError(f"{splits} k slices for a kernel of SPLIT_K = {kern.cfg.SPLIT_K}")
    return tc_gemm_grid(kern.cfg, N * P * Q, K, splits)
