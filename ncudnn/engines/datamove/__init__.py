"""The data-movement engine (engine): concat, reshape, transpose, slice. Kernels:
ncudnn.kernels.datamove."""
