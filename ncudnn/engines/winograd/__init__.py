"""Winograd 3x3 convolution engines: the shared transforms and problem (common), the non-fused
transforms + batched GEMM (nonfused) and the one-kernel F(2x2, 3x3) (fused). Kernels:
ncudnn.kernels.winograd."""
