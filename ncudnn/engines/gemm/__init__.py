"""What the GEMM-family engines (conv, winograd, matmul) share: tile tables, the fused epilogue and the
kernel-cache glue (common), the base of the SIMT GEMM engines (engine_base) and of the tensor-core
ones (tc_base). Kernels: ncudnn.kernels.gemm, ncudnn.kernels.tc_gemm."""
