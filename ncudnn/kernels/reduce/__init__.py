"""Deterministic strided reductions (strided): cudnnReduceTensorOp_t over any axes, and GENSTATS."""
