"""The resample engine (engine): pooling, nearest, bilinear. Kernels: ncudnn.kernels.resample."""
