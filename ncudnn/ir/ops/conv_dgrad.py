"""Convolution backward data: DX = alpha * conv_dgrad(DY, W) + beta * DX. DX dims must be given
(several input sizes map onto one output size when stride > 1)."""
from ...types import cudnnStatus_t
from ..node import Node
from .conv_common import CONV_ATTRS, ConvGeometry

S = cudnnStatus_t


class ConvDgrad(ConvGeometry, Node):
    OP = "conv_dgrad"
    INPUTS = ("DY", "W")
    OUTPUTS = ("DX",)
    ATTRS = dict(CONV_ATTRS)

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.check_conv_attrs()
        if self.outputs["DX"].dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "DX", "dims must be given for backward data")

    def infer(self, ctx):
        dx, w, dy = self.outputs["DX"], self.inputs["W"], self.inputs["DY"]
        self.groups, ydims = self.geometry(dx.dims, w.dims, "DX", "W")
        if tuple(dy.dims) != ydims:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "DY",
                      f"dims {tuple(dy.dims)}, but DX and W give {ydims}")
        self.infer_output("DX", dx.dims, ctx, like=dy)

    def conv_tensors(self):
        return self.outputs["DX"], self.inputs["W"], self.inputs["DY"]
