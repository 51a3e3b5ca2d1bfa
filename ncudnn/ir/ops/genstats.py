"""Genstats: per-channel SUM and SQSUM of X (X = [N, C, *spatial]; SUM, SQSUM = [1, C, 1...])."""
from ...types import cudnnGenStatsMode_t, cudnnStatus_t
from ..node import Node

S = cudnnStatus_t


class GenStats(Node):
    OP = "genstats"
    INPUTS = ("X",)
    OUTPUTS = ("SUM", "SQSUM")
    ATTRS = {"mode": cudnnGenStatsMode_t.CUDNN_GENSTATS_SUM_SQSUM, "math_precision": None}

    def infer(self, ctx):
        x = self.inputs["X"]
        if x.ndim < 2:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "X", "needs N and C dims")
        dims = (1, x.dims[1]) + (1,) * (x.ndim - 2)
        for p in ("SUM", "SQSUM"):
            self.infer_output(p, dims, ctx, like=x, dtype=self.compute_dtype)
