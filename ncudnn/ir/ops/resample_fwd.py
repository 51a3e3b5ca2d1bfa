"""Resample forward: max / average pooling, nearest, bilinear. IDX (max-pool argmax) is optional."""
from ...types import cudnnStatus_t
from ..node import Node
from .resample_common import RESAMPLE_ATTRS, ResampleGeometry

S = cudnnStatus_t


class ResampleFwd(ResampleGeometry, Node):
    OP = "resample_fwd"
    INPUTS = ("X",)
    OUTPUTS = ("Y",)
    OPTIONAL_OUTPUTS = ("IDX",)
    ATTRS = dict(RESAMPLE_ATTRS)

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.check_resample_attrs()
        if self.inputs["X"].ndim != self.spatial_dims + 2:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "X", f"needs {self.spatial_dims + 2} dims")

    def infer(self, ctx):
        x = self.inputs["X"]
        y = self.outputs["Y"]
        dims = y.dims if (y.dims is not None and self.mode in (0, 1)) else self.out_dims(x.dims)
        self.infer_output("Y", dims, ctx, like=x)
        if "IDX" in self.outputs:
            from ...types import cudnnDataType_t
            self.infer_output("IDX", dims, ctx, like=x, dtype=cudnnDataType_t.CUDNN_DATA_INT32)
