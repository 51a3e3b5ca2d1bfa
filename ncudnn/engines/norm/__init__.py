"""Normalization engines: batch / instance norm (batch, with the dedicated packed NHWC / NCHW kernels' steps
in bn_steps), BN_FINALIZE and BN_BWD_WEIGHTS (bn_finalize), layer / RMS norm row kernels (rows, with the
pipelined forward in rows_pipe); the checks and epilogue they share (common). Kernels: ncudnn.kernels.norm."""
