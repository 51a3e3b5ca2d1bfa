"""Engine "ctc": the ctc_loss node (:mod:`ncudnn.ir.ops.ctc_loss`) as the one-block-per-entry kernel of
:mod:`ncudnn.kernels.ctc.loss`, FLOAT only (cuDNN's CTC loss takes FLOAT probabilities), deterministic.

Workspace: the forward variables alpha (N x T x S_CAP float32, S_CAP = 2 max_label_length + 1) and the
per-time log-sum-exp of the SOFTMAX normalization (N x T float32). Knob BLOCK_SIZE: threads per block (a
power of two; the extended label positions, the classes and the reductions are strided over them).
"""
from ...kernels.ctc import loss as kctc
from ...kernels.primitives.warp import SIM
from ...types import cudnnBackendKnobType_t, cudnnCTCGradMode_t, cudnnLossNormalizationMode_t, cudnnStatus_t
from ..base import BN, OK, Engine, KnobSpec
from ..membound.common import Arg, MemPlan, Scratch, Step, kdtype, src_key, steps_time
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
DEFAULT_BLOCK = 32 if SIM else 128


def _strides(t):
    return [Arg.const(int(s)) for s in t.strides]


@register
class CtcEngine(Engine):
    name = "ctc"
    kinds = ("ctc_loss",)
    fallback = True
    behavior_notes = (BN.CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION,)

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.nodes[0]
        for port in ("PROBS", "COSTS", "GRADS"):
            t = node.inputs.get(port) or node.outputs.get(port)
            if t is not None and kdtype(t) != "float32":
                return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, \
                    f"{self.name}: node '{node.name}': {port}: data type {t.dtype.name}; the CTC loss takes FLOAT"
        for port, t in list(node.inputs.items()) + list(node.outputs.items()):
            if t.is_virtual or t.is_by_value:
                return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, \
                    f"{self.name}: node '{node.name}': {port}: virtual or by-value tensors are not supported"
            if any(int(s) < 0 for s in t.strides):
                return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{self.name}: node '{node.name}': {port}: negative strides"
        for port in ("LABELS", "LABEL_LENGTHS", "INPUT_LENGTHS", "COSTS"):
            t = node.inputs.get(port) or node.outputs.get(port)
            if tuple(t.strides) != (1,):
                return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, \
                    f"{self.name}: node '{node.name}': {port}: stride {tuple(t.strides)}; packed (1,) only"
        if int(node.max_label_length) > kctc.MAX_LABEL:
            return S.CUDNN_STATUS_NOT_SUPPORTED, \
                f"{self.name}: max_label_length {node.max_label_length} > {kctc.MAX_LABEL}"
        return OK

    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 32, 256, 32, DEFAULT_BLOCK),)

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE)
        if st == S.CUDNN_STATUS_SUCCESS and b & (b - 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE {b} is not a power of 2"
        return st, why

    def candidates_key(self, sub):
        return ()

    def _layout(self, sub):
        """(scratch, alpha Arg, lse Arg)."""
        node = sub.nodes[0]
        T, N, _ = node.inputs["PROBS"].dims
        sc = Scratch()
        alpha = sc.take(N * T * (2 * int(node.max_label_length) + 1), "float32")
        lse = sc.take(N * T, "float32")
        return sc, alpha, lse

    def workspace_size(self, sub, cfg):
        return self._layout(sub)[0].size

    def _step(self, sub, cfg):
        node = sub.nodes[0]
        probs, costs = node.inputs["PROBS"], node.outputs["COSTS"]
        grads = node.outputs.get("GRADS")
        T, N, A = (int(d) for d in probs.dims)
        softmax = int(node.normalization) == int(cudnnLossNormalizationMode_t.CUDNN_LOSS_NORMALIZATION_SOFTMAX)
        zero_oob = int(node.grad_mode) == int(cudnnCTCGradMode_t.CUDNN_CTC_ZERO_OOB_GRADIENTS)
        block = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, DEFAULT_BLOCK)
        _, alpha, lse = self._layout(sub)
        labels = node.inputs["LABELS"]
        args = [Arg.tensor(probs), Arg.tensor(labels), Arg.tensor(node.inputs["LABEL_LENGTHS"]),
                Arg.tensor(node.inputs["INPUT_LENGTHS"]), Arg.tensor(costs),
                Arg.tensor(grads) if grads is not None else Arg.dummy("float32"), alpha, lse,
                Arg.const(T), Arg.const(N), Arg.const(A), Arg.const(2 * int(node.max_label_length) + 1),
                Arg.const(int(labels.dims[0]))] + _strides(probs) + (
                    _strides(grads) if grads is not None else [Arg.const(0)] * 3)
        flags = (softmax, zero_oob, grads is not None, block)
        nbytes = 4 * (T * N * A * (2 if grads is not None else 1) + 2 * alpha.n + lse.n)   # cost model
        step = Step("ctc_loss:" + src_key(*flags), lambda: kctc.ctc_kernel(*flags), N, block, args,
                    nbytes=nbytes)
        return step

    def cost(self, sub, cfg, device):
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, DEFAULT_BLOCK)
        return steps_time(device, [self._step(sub, cfg)], flops_per_byte=20.0, threads=b, regs=64) \
            * (1.0 + abs(b - DEFAULT_BLOCK) / 1e4)

    def build(self, sub, cfg, ctx):
        return MemPlan(self, sub, cfg, [self._step(sub, cfg)], self.workspace_size(sub, cfg))


__all__ = ["CtcEngine"]
