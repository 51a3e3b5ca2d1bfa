"""Convolution forward: Y = alpha * conv(X, W) + beta * Y."""
from ..node import Node
from .conv_common import CONV_ATTRS, ConvGeometry


class ConvFprop(ConvGeometry, Node):
    OP = "conv_fprop"
    INPUTS = ("X", "W")
    OUTPUTS = ("Y",)
    ATTRS = dict(CONV_ATTRS)

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.check_conv_attrs()
        for p in ("X", "W"):
            self.check_float(p)

    def infer(self, ctx):
        x, w = self.inputs["X"], self.inputs["W"]
        self.groups, ydims = self.geometry(x.dims, w.dims, "X", "W")
        self.infer_output("Y", ydims, ctx, like=x)

    def conv_tensors(self):
        return self.inputs["X"], self.inputs["W"], self.outputs["Y"]
