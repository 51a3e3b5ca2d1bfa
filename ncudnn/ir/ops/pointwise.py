"""Pointwise op: Y = op(X[, B[, T]]) with numpy-style broadcasting through size-1 / stride-0 dims.

Forward modes read X (and B, and T for BINARY_SELECT: ``Y = T ? X : B``); backward activation modes
read DY and X (the forward input) and write DX. Comparisons and logical ops write booleans.
Attributes mirror CUDNN_BACKEND_POINTWISE_DESCRIPTOR.
"""
from ...types import cudnnDataType_t, cudnnNanPropagation_t, cudnnPointwiseMode_t, cudnnStatus_t
from ..node import REQUIRED, Node

S = cudnnStatus_t
M = cudnnPointwiseMode_t
DT = cudnnDataType_t

UNARY = frozenset({M.CUDNN_POINTWISE_ABS, M.CUDNN_POINTWISE_CEIL, M.CUDNN_POINTWISE_COS,
                   M.CUDNN_POINTWISE_EXP, M.CUDNN_POINTWISE_FLOOR, M.CUDNN_POINTWISE_LOG,
                   M.CUDNN_POINTWISE_NEG, M.CUDNN_POINTWISE_RSQRT, M.CUDNN_POINTWISE_SIN,
                   M.CUDNN_POINTWISE_SQRT, M.CUDNN_POINTWISE_TAN, M.CUDNN_POINTWISE_ERF,
                   M.CUDNN_POINTWISE_IDENTITY, M.CUDNN_POINTWISE_RECIPROCAL,
                   M.CUDNN_POINTWISE_RELU_FWD, M.CUDNN_POINTWISE_TANH_FWD, M.CUDNN_POINTWISE_SIGMOID_FWD,
                   M.CUDNN_POINTWISE_ELU_FWD, M.CUDNN_POINTWISE_GELU_FWD, M.CUDNN_POINTWISE_SOFTPLUS_FWD,
                   M.CUDNN_POINTWISE_SWISH_FWD, M.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD,
                   M.CUDNN_POINTWISE_LOGICAL_NOT, M.CUDNN_POINTWISE_GEN_INDEX})
BACKWARD = frozenset(m for m in M if 200 <= int(m) < 300)
TERNARY = frozenset({M.CUDNN_POINTWISE_BINARY_SELECT})
BOOLEAN_OUT = frozenset(m for m in M if 300 <= int(m) < 500)


def arity(mode):
    mode = M(int(mode))
    if mode in UNARY:
        return 1
    if mode in TERNARY:
        return 3
    return 2


def broadcast_dims(shapes, fail):
    """numpy-style broadcast of equal-rank dims (cuDNN requires equal rank)."""
    rank = len(shapes[0])
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) != rank:
            fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "B", f"rank {len(s)} differs from X's {rank}")
        for i, d in enumerate(s):
            if d != out[i]:
                if out[i] == 1:
                    out[i] = d
                elif d != 1:
                    fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "B",
                         f"dims {tuple(s)} do not broadcast with {tuple(shapes[0])}")
    return tuple(out)


class Pointwise(Node):
    OP = "pointwise"
    INPUTS = ()
    OPTIONAL_INPUTS = ("X", "B", "T", "DY")
    OUTPUTS = ()
    OPTIONAL_OUTPUTS = ("Y", "DX")
    SCALAR_PORTS = ("X", "B", "T")
    ATTRS = {
        "mode": REQUIRED,
        "math_precision": None,
        "nan_propagation": cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN,
        "relu_lower_clip": 0.0,
        "relu_upper_clip": float("inf"),
        "relu_lower_clip_slope": 0.0,
        "elu_alpha": 1.0,
        "softplus_beta": 1.0,
        "swish_beta": 1.0,
        "axis": None,
        "alpha1": 1.0,
        "alpha2": 1.0,
    }

    def operand_ports(self):
        """Input ports read, in operand order, and the output port written."""
        mode = M(int(self.mode))
        if mode in BACKWARD:
            return ("DY", "X"), "DX"
        return ("X", "B", "T")[:arity(mode)], "Y"

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        try:
            self.mode = M(int(self.mode))
        except (ValueError, TypeError):
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "mode", f"{self.mode!r} is not a cudnnPointwiseMode_t")
        ins, out = self.operand_ports()
        for p in ins:
            if p not in self.inputs:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, p, f"required by mode {self.mode.name}")
        extra = set(self.inputs) - set(ins)
        if extra:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, ",".join(sorted(extra)), f"not used by mode {self.mode.name}")
        if out not in self.outputs or set(self.outputs) != {out}:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, out, f"mode {self.mode.name} writes exactly {out}")
        if self.mode == M.CUDNN_POINTWISE_GEN_INDEX and self.axis is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "axis", "GEN_INDEX needs an axis")
        self.nan_propagation = cudnnNanPropagation_t(int(self.nan_propagation))

    def infer(self, ctx):
        ins, out = self.operand_ports()
        tensors = [self.inputs[p] for p in ins]
        shaped = [t for t in tensors if t.dims is not None]
        if not shaped:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, ins[0], "no input has dims")
        dims = broadcast_dims([t.dims for t in shaped], self.fail)
        like = max(shaped, key=lambda t: t.numel)
        dtype = DT.CUDNN_DATA_BOOLEAN if self.mode in BOOLEAN_OUT and \
            self.outputs[out].is_virtual and self.outputs[out].dtype is None else None
        self.infer_output(out, dims, ctx, like=like, dtype=dtype)
        if self.mode == M.CUDNN_POINTWISE_GEN_INDEX and not 0 <= int(self.axis) < len(dims):
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "axis", f"{self.axis} outside 0..{len(dims) - 1}")

    def post_validate(self, ctx):
        ins, out = self.operand_ports()
        odims = self.outputs[out].dims
        for p in ins:
            t = self.inputs[p]
            if t.dims is not None and len(t.dims) == len(odims):
                for d, o in zip(t.dims, odims):
                    if d not in (1, o):
                        self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p,
                                  f"dims {t.dims} do not broadcast to output {odims}")
