"""Convolution backward filter: DW = alpha * conv_wgrad(X, DY) + beta * DW. DW dims must be given."""
from ...types import cudnnStatus_t
from ..node import Node
from .conv_common import CONV_ATTRS, ConvGeometry

S = cudnnStatus_t


class ConvWgrad(ConvGeometry, Node):
    OP = "conv_wgrad"
    INPUTS = ("X", "DY")
    OUTPUTS = ("DW",)
    ATTRS = dict(CONV_ATTRS)

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.check_conv_attrs()
        if self.outputs["DW"].dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "DW", "dims must be given for backward filter")

    def infer(self, ctx):
        x, dw, dy = self.inputs["X"], self.outputs["DW"], self.inputs["DY"]
        self.groups, ydims = self.geometry(x.dims, dw.dims, "X", "DW")
        if tuple(dy.dims) != ydims:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "DY",
                      f"dims {tuple(dy.dims)}, but X and DW give {ydims}")
        self.infer_output("DW", dw.dims, ctx, like=x)

    def conv_tensors(self):
        return self.inputs["X"], self.outputs["DW"], self.inputs["DY"]
