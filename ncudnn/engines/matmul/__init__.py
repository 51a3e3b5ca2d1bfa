"""Matmul engines: plain GEMM problems and their base (common), SIMT (simt, small), tensor cores
mma.sync (tc, with the FP8 mapping in tc_fp8) and Hopper wgmma (wgmma). Kernels: ncudnn.kernels.gemm,
ncudnn.kernels.tc_gemm, ncudnn.kernels.wgmma."""
