"""Resample backward: DX from DY (and the forward X / Y / IDX for max pooling)."""
from ...types import cudnnStatus_t
from ..node import Node
from .resample_common import RESAMPLE_ATTRS, ResampleGeometry

S = cudnnStatus_t


class ResampleBwd(ResampleGeometry, Node):
    OP = "resample_bwd"
    INPUTS = ("DY",)
    OPTIONAL_INPUTS = ("X", "Y", "IDX")
    OUTPUTS = ("DX",)
    ATTRS = dict(RESAMPLE_ATTRS)

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.check_resample_attrs()
        if self.outputs["DX"].dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "DX", "dims must be given")

    def infer(self, ctx):
        dx, dy = self.outputs["DX"], self.inputs["DY"]
        if self.mode not in (0, 1) and tuple(self.out_dims(dx.dims)) != tuple(dy.dims):
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "DY",
                      f"dims {dy.dims}, but DX gives {self.out_dims(dx.dims)}")
        self.infer_output("DX", dx.dims, ctx, like=dy)
