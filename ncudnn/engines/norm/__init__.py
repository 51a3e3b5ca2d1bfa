"""Normalization engines: batch / instance norm (batch), BN_FINALIZE and BN_BWD_WEIGHTS (bn_finalize),
layer / RMS norm row kernels (rows, with the pipelined forward in rows_pipe). Kernels:
ncudnn.kernels.norm."""
