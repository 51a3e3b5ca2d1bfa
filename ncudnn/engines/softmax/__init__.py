"""The fused softmax engine (fused). Kernels: ncudnn.kernels.softmax."""
