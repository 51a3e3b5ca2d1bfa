"""Deterministic strided reductions (strided: build, launch and the cuDNN ops; spec: the description, layout
and launch shape; codegen: the kernel source): cudnnReduceTensorOp_t over any axes, and GENSTATS."""
