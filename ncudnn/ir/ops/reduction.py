"""Reduction: Y = reduce(X) over every dim where Y's size is 1 and X's is not (the output decides)."""
from ...types import cudnnReduceTensorOp_t, cudnnStatus_t
from ..node import REQUIRED, Node

S = cudnnStatus_t


class Reduction(Node):
    OP = "reduction"
    INPUTS = ("X",)
    OUTPUTS = ("Y",)
    ATTRS = {"mode": REQUIRED, "math_precision": None, "deterministic": True}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        try:
            self.mode = cudnnReduceTensorOp_t(int(self.mode))
        except ValueError:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "mode", f"{self.mode!r} is not a cudnnReduceTensorOp_t")
        if self.outputs["Y"].dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "Y", "dims must be given: the output decides the axes")

    def infer(self, ctx):
        x, y = self.inputs["X"], self.outputs["Y"]
        if len(y.dims) != len(x.dims):
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "Y", f"rank {len(y.dims)} != X's {len(x.dims)}")
        for i, (xd, yd) in enumerate(zip(x.dims, y.dims)):
            if yd not in (1, xd):
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "Y",
                          f"dim {i} is {yd}: must be 1 (reduced) or X's {xd}")
        self.infer_output("Y", y.dims, ctx, like=x)

    def reduced_axes(self):
        x, y = self.inputs["X"], self.outputs["Y"]
        return tuple(i for i, (a, b) in enumerate(zip(x.dims, y.dims)) if b == 1 and a != 1)
