"""Reduction engines: REDUCTION (reduction) and GENSTATS (genstats). Kernels: ncudnn.kernels.reduce."""
