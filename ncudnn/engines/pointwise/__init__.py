"""The runtime-fused pointwise engine (fused). Kernels: ncudnn.kernels.pointwise."""
