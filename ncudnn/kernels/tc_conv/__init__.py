"""Tensor-core implicit-GEMM convolution fprop (NHWC activations, KRSC filters, BF16 / FP16 in, or FP32 in
as TF32 over 16-bit halves; f32 accumulate), the tc_gemm mainloop with the A loader swapped for a gather from
the image.

GEMM view (CUTLASS implicit GEMM): M = N*P*Q output pixels, N = K output channels, K = R*S*C with c
fastest. Each A load slot keeps its output pixel's image base and input corner and walks (r, s, c)
by BLOCK_K per k tile; a 16-byte chunk (8 channels, C % 8 == 0; 4 FP32 channels) is one cp.async, zero-filled in the
padding. B is the filter as a k-major (K, R*S*C) matrix. The fused epilogue (bias per channel,
pointwise chain, residual, alpha / beta) writes output rows ``m * ldc_m + k * ldc_n``.

``make_tc_conv_fprop(cfg, in_dtype, epi, bias_dtype, res_dtype)`` -> kernel (a TcGemmKernel);
``conv_args(...)`` its argument tuple; ``conv_grid``; ``check_conv(...)`` -> (ok, reason).
"""
from .fprop import CONV_CONFIGS, check_conv, conv_args, conv_grid, make_tc_conv_fprop  # noqa: F401
