"""Normalization engines: batch / instance norm (batch, with the dedicated packed NHWC / NCHW kernels' steps
in bn_steps), BN_FINALIZE and BN_BWD_WEIGHTS (bn_finalize), layer / RMS norm row kernels (rows: the engine;
rows_fwd / rows_bwd: its forward and backward steps; rows_knobs: its knobs; rows_pipe: the pipelined forward);
the checks and epilogue they share (common). Kernels: ncudnn.kernels.norm."""
