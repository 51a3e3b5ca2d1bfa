"""Normalization backward: DX, DSCALE, DBIAS from X, DY, SCALE and the saved MEAN / INV_VARIANCE."""
from ...types import cudnnBackendNormMode_t, cudnnStatus_t
from ..node import REQUIRED, Node
from .norm_common import ada_dims, stats_dims

S = cudnnStatus_t
NM = cudnnBackendNormMode_t


class NormBwd(Node):
    OP = "norm_bwd"
    INPUTS = ("X", "DY", "SCALE")
    OPTIONAL_INPUTS = ("MEAN", "INV_VARIANCE", "EPSILON")
    OUTPUTS = ("DX",)
    OPTIONAL_OUTPUTS = ("DSCALE", "DBIAS")
    SCALAR_PORTS = ("EPSILON",)
    ATTRS = {"mode": REQUIRED}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.mode = NM(int(self.mode))
        if self.mode == NM.CUDNN_GROUP_NORM:
            self.fail(S.CUDNN_STATUS_NOT_SUPPORTED, "mode", f"{self.mode.name} is not supported")
        need = ("INV_VARIANCE",) if self.mode == NM.CUDNN_RMS_NORM else ("MEAN", "INV_VARIANCE")
        for p in need:
            if p not in self.inputs:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, p, "saved statistics are required")

    def infer(self, ctx):
        x, dy = self.inputs["X"], self.inputs["DY"]
        if tuple(dy.dims) != tuple(x.dims):
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "DY", f"dims {dy.dims} != X's {x.dims}")
        if self.mode == NM.CUDNN_ADA_LAYER_NORM:
            st, why = ada_dims(x.dims, self.inputs["SCALE"].dims)
            if why:
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "SCALE", why)
            sc = tuple(self.inputs["SCALE"].dims)
            for p in ("MEAN", "INV_VARIANCE"):   # the saved statistics: one value per normalized row
                t = self.inputs[p]
                if tuple(t.dims) != st:
                    self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p, f"dims {t.dims}, expected {st}")
        else:
            st, sc = stats_dims(self.mode, x.dims)
        if tuple(self.inputs["SCALE"].dims) != sc:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "SCALE", f"dims, expected {sc}")
        self.infer_output("DX", x.dims, ctx, like=x)
        for p in ("DSCALE", "DBIAS"):
            if p in self.outputs:
                self.infer_output(p, sc, ctx, like=self.inputs["SCALE"])
