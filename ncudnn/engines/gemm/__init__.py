"""What the GEMM-family engines (conv, winograd, matmul) share: tile tables (tiles), the cost model (cost),
problem checks (dtypes), the fused epilogue (epilogue), kernel-cache glue and launches (launch), the built
plans (plans), all under one name in common; the base of the SIMT GEMM engines (engine_base) and of the
tensor-core ones (tc_base). Kernels: ncudnn.kernels.gemm, ncudnn.kernels.tc_gemm."""
