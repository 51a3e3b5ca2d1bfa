"""What the GEMM-family engines (conv, winograd, matmul) share: tile tables (tiles), the cost model (cost),
problem checks (dtypes), the fused epilogue (epilogue), kernel-cache glue and launches (launch), the built
plans (plans), all under one name in common; the SIMT GEMM engines' shared machinery as a helper object
their family bases hold (tiled.TiledGemm), the plain-GEMM problem and the family base over it (mapping:
matmul_simt, matmul_small, conv_gemm_1x1), and the family base of the tensor-core engines (tc_base:
matmul_tc, matmul_wgmma, conv_tc). Kernels: ncudnn.kernels.gemm, ncudnn.kernels.tc_gemm."""
