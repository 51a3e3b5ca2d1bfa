"""Implicit-GEMM conv fprop on tensor cores: kernel factory, argument pack, grid and problem check."""
import numpy as np

from ..tc_gemm import TcGemmConfig, make_tc_gemm, tc_gemm_grid

__all__ = ["CONV_CONFIGS", "make_tc_conv_fprop", "conv_args", "conv_grid", "check_conv"]

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


def make_tc_conv_fprop(cfg, in_dtype, epi, bias_dtype="float32", res_dtype="float32"):
    """The cached conv fprop kernel for ``cfg`` and these dtypes (``epi``: an EpilogueSpec)."""
    return make_tc_gemm(cfg, True, True, in_dtype, epi=epi, bias_dtype=bias_dtype, res_dtype=res_dtype,
                        conv=True)


def check_conv(C, K, x_strides, w_strides, ptrs=()):
    """(ok, reason) of the operand layouts. ``x_strides`` (n, c, h, w) and ``w_strides`` (k, c, r, s)
    in elements; R and S are implied by the filter strides (c fastest, then s, then r)."""
    xn, xc, xh, xw = x_strides
    wk, wc, wr, ws = w_strides
    if xc != 1:
        return False, f"x must be channels-last (NHWC): c stride {xc} != 1"
    if C % 8:
        return False, f"C = {C} is not a multiple of 8 (16-byte cp.async chunks of channels)"
    for name, v in (("x n stride", xn), ("x h stride", xh), ("x w stride", xw), ("w k stride", wk)):
        if v % 8:
            return False, f"{name} {v} is not a multiple of 8"
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
    (n, p, q) and channel k at ``m * ldc_m + k * ldc_n`` (residual likewise with res_m / res_n)."""
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
