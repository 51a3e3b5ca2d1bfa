"""Normalization kernels. Batch / instance / group norm: the generic any-layout launchers (bn_generic), the
dedicated NHWC passes (bn_cols, bn_colsv), NCHW passes (bn_planes), the one-kernel backward (bn_persist),
the combine + coefficients kernel (bn_fin) and the per-channel finalize (bn_finalize). Layer / RMS norm:
the row kernels (row), their fused backward (row_bwd), dscale / dbias column sums (row_dparams) and the
forward variants (row_fwd_pipe, row_fwd_sub)."""
