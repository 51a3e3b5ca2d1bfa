"""BN finalize: from per-channel SUM/SQSUM and an accumulation count, the saved mean and inverse
std, the equivalent scale and bias (y = eq_scale * x + eq_bias), and updated running statistics."""
from ...types import cudnnBnFinalizeStatsMode_t, cudnnStatus_t
from ..node import Node

S = cudnnStatus_t
CH = ("SUM", "SQSUM", "SCALE", "BIAS", "PREV_RUNNING_MEAN", "PREV_RUNNING_VAR")


class BnFinalize(Node):
    OP = "bn_finalize"
    INPUTS = ("SUM", "SQSUM", "SCALE", "BIAS", "EPSILON", "ACCUM_COUNT")
    OPTIONAL_INPUTS = ("PREV_RUNNING_MEAN", "PREV_RUNNING_VAR", "EXP_AVG_FACTOR")
    OUTPUTS = ("EQ_SCALE", "EQ_BIAS")
    OPTIONAL_OUTPUTS = ("SAVED_MEAN", "SAVED_INV_STD", "UPDATED_RUNNING_MEAN", "UPDATED_RUNNING_VAR")
    SCALAR_PORTS = ("EPSILON", "ACCUM_COUNT", "EXP_AVG_FACTOR")
    ATTRS = {"mode": cudnnBnFinalizeStatsMode_t.CUDNN_BN_FINALIZE_STATISTICS_TRAINING, "math_precision": None}

    def infer(self, ctx):
        ref = self.inputs["SUM"].dims
        for p in CH:
            t = self.inputs.get(p)
            if t is not None and tuple(t.dims) != tuple(ref):
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p, f"dims {t.dims} != SUM's {ref}")
        for p in self.outputs:
            self.infer_output(p, ref, ctx, like=self.inputs["SUM"])
