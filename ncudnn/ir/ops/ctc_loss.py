"""CTC loss (the legacy cudnnCTCLoss of cudnn_adv.h): costs and gradients of a batch of label sequences.

Ports: PROBS (T, N, A) the per-time probabilities (NONE normalization) or the pre-softmax activations
(SOFTMAX: softmax over A is applied first), label 0 the blank; LABELS the concatenated labels of every
entry (INT32, one dim); LABEL_LENGTHS and INPUT_LENGTHS (N,) INT32; COSTS (N,) the negative log
likelihoods; GRADS (T, N, A), optional, the gradients with respect to the pre-softmax activations.
``grad_mode`` (cudnnCTCGradMode_t) says what an entry whose labels cannot fit its input length gets:
zero gradients (ZERO_OOB) or none written (SKIP_OOB); its cost is inf either way.
``max_label_length`` bounds every label length (cuDNN's limit is 256).
"""
from ...types import cudnnCTCGradMode_t, cudnnDataType_t, cudnnLossNormalizationMode_t, cudnnStatus_t
from ..node import Node

S = cudnnStatus_t
DT = cudnnDataType_t
#: cuDNN's limit on a label length
MAX_LABEL_LENGTH = 256


class CtcLoss(Node):
    OP = "ctc_loss"
    INPUTS = ("PROBS", "LABELS", "LABEL_LENGTHS", "INPUT_LENGTHS")
    OUTPUTS = ("COSTS",)
    OPTIONAL_OUTPUTS = ("GRADS",)
    ATTRS = {"normalization": cudnnLossNormalizationMode_t.CUDNN_LOSS_NORMALIZATION_NONE,
             "grad_mode": cudnnCTCGradMode_t.CUDNN_CTC_ZERO_OOB_GRADIENTS,
             "max_label_length": MAX_LABEL_LENGTH}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        try:
            self.normalization = cudnnLossNormalizationMode_t(int(self.normalization))
            self.grad_mode = cudnnCTCGradMode_t(int(self.grad_mode))
        except ValueError as e:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "normalization / grad_mode", str(e))
        if not 0 <= int(self.max_label_length) <= MAX_LABEL_LENGTH:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "max_label_length",
                      f"{self.max_label_length} is outside [0, {MAX_LABEL_LENGTH}]")
        p = self.inputs["PROBS"]
        if p.dims is None or len(p.dims) != 3:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "PROBS", "must be 3-d (T, N, A)")
        self.check_float("PROBS")
        for port in ("LABELS", "LABEL_LENGTHS", "INPUT_LENGTHS"):
            t = self.inputs[port]
            if t.dtype != DT.CUDNN_DATA_INT32:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, f"data type {t.dtype!r} is not INT32")
            if len(t.dims) != 1:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, f"dims {tuple(t.dims)}: one dim expected")
        n = p.dims[1]
        for port in ("LABEL_LENGTHS", "INPUT_LENGTHS"):
            if tuple(self.inputs[port].dims) != (n,):
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, port,
                          f"dims {tuple(self.inputs[port].dims)}, ({n},) expected (one per batch entry)")

    def infer(self, ctx):
        p = self.inputs["PROBS"]
        self.infer_output("COSTS", (p.dims[1],), ctx, dtype=p.dtype)
        if "GRADS" in self.outputs:
            self.infer_output("GRADS", p.dims, ctx, like=p, dtype=p.dtype)
