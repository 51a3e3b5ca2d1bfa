"""Normalization forward (batch, layer, instance, RMS, adaptive layer norm; group norm is refused as cuDNN documents),
training (writes mean / inverse variance, updates running statistics for batch norm) or inference."""
from ...types import cudnnBackendNormFwdPhase_t, cudnnBackendNormMode_t, cudnnStatus_t
from ..node import REQUIRED, Node
from .norm_common import ada_dims, stats_dims

S = cudnnStatus_t
NM = cudnnBackendNormMode_t
PH = cudnnBackendNormFwdPhase_t


class NormFwd(Node):
    OP = "norm_fwd"
    INPUTS = ("X",)
    OPTIONAL_INPUTS = ("SCALE", "BIAS", "EPSILON", "EXP_AVG_FACTOR", "INPUT_RUNNING_MEAN",
                       "INPUT_RUNNING_VAR", "MEAN_IN", "INV_VARIANCE_IN")
    OUTPUTS = ("Y",)
    OPTIONAL_OUTPUTS = ("MEAN", "INV_VARIANCE", "OUTPUT_RUNNING_MEAN", "OUTPUT_RUNNING_VAR")
    SCALAR_PORTS = ("EPSILON", "EXP_AVG_FACTOR")
    ATTRS = {"mode": REQUIRED, "phase": PH.CUDNN_NORM_FWD_TRAINING}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        try:
            self.mode, self.phase = NM(int(self.mode)), PH(int(self.phase))
        except ValueError:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "mode/phase", f"{self.mode!r}/{self.phase!r} not valid")
        if self.mode == NM.CUDNN_GROUP_NORM:
            self.fail(S.CUDNN_STATUS_NOT_SUPPORTED, "mode", f"{self.mode.name} is not supported")
        if self.mode == NM.CUDNN_ADA_LAYER_NORM and "SCALE" not in self.inputs:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "SCALE", "required by CUDNN_ADA_LAYER_NORM (the per-batch scale)")
        if "EPSILON" not in self.inputs:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "EPSILON", "required")
        if self.phase == PH.CUDNN_NORM_FWD_TRAINING and self.mode != NM.CUDNN_RMS_NORM:
            for p in ("MEAN", "INV_VARIANCE"):
                if p not in self.outputs:
                    self.fail(S.CUDNN_STATUS_BAD_PARAM, p, "required in the training phase")
        if self.phase == PH.CUDNN_NORM_FWD_INFERENCE and self.mode == NM.CUDNN_BATCH_NORM:
            for p in ("MEAN_IN", "INV_VARIANCE_IN"):
                if p not in self.inputs:
                    self.fail(S.CUDNN_STATUS_BAD_PARAM, p, "batch norm inference needs the statistics")
        running = [p for p in ("INPUT_RUNNING_MEAN", "INPUT_RUNNING_VAR", "OUTPUT_RUNNING_MEAN",
                               "OUTPUT_RUNNING_VAR", "EXP_AVG_FACTOR")
                   if p in self.inputs or p in self.outputs]
        if running and len(running) != 5:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "running statistics",
                      f"give all of input/output running mean/var and EXP_AVG_FACTOR, got {running}")
        self.check_float("X")

    def infer(self, ctx):
        x = self.inputs["X"]
        if self.mode == NM.CUDNN_ADA_LAYER_NORM:
            st, why = ada_dims(x.dims, self.inputs["SCALE"].dims)
            if why:
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "SCALE", why)
            sc = tuple(self.inputs["SCALE"].dims)
        else:
            st, sc = stats_dims(self.mode, x.dims)
        for p in ("SCALE", "BIAS"):
            t = self.inputs.get(p)
            if t is not None and tuple(t.dims) != sc:
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p, f"dims {t.dims}, expected {sc}")
        self.infer_output("Y", x.dims, ctx, like=x)
        for p in ("MEAN", "INV_VARIANCE", "OUTPUT_RUNNING_MEAN", "OUTPUT_RUNNING_VAR"):
            if p in self.outputs:
                self.infer_output(p, st, ctx, like=x, dtype=self.compute_dtype)
