"""Convolution engines over implicit GEMMs and direct kernels: the shared conv problem and base class
(common), implicit GEMM (implicit_gemm, implicit_precomp), 1x1 as one GEMM (gemm_1x1), tensor cores
(tc) and the direct kernel for depthwise / tiny channel counts (direct). Kernels: ncudnn.kernels.conv,
ncudnn.kernels.tc_conv and the GEMM kernels."""
