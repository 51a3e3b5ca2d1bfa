"""BN backward weights: dscale, dbias and the equivalent dy/x/bias coefficients of the dx formula
(dx = eq_dscale_dy * dy + eq_dscale_x * x + eq_dbias), from the per-channel sums of dy and dy*x."""
from ...types import cudnnStatus_t
from ..node import Node

S = cudnnStatus_t


class BnBwdWeights(Node):
    OP = "bn_bwd_weights"
    INPUTS = ("X", "MEAN", "INV_STD", "SCALE", "DY_SUM", "DY_X_SUM")
    OUTPUTS = ("DSCALE", "DBIAS", "EQ_DY_SCALE", "EQ_X_SCALE", "EQ_BIAS")
    ATTRS = {"math_precision": None}

    def infer(self, ctx):
        x = self.inputs["X"]
        dims = (1, x.dims[1]) + (1,) * (x.ndim - 2)
        for p in ("MEAN", "INV_STD", "SCALE", "DY_SUM", "DY_X_SUM"):
            if tuple(self.inputs[p].dims) != dims:
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p, f"dims {self.inputs[p].dims} != {dims}")
        for p in self.OUTPUTS:
            self.infer_output(p, dims, ctx, like=self.inputs["SCALE"])
