"""Pointwise op methods of pygraph: one IR :class:`Pointwise` node each.

Tensor arguments are taken positionally or by the frontend's keyword names (``add(a=, b=)``,
``max(input0=, input1=)``, ``bias(input=, bias=)``, ``relu_backward(loss=, input=)``,
``binary_select(input0=, input1=, mask=)``); a Python number in place of a tensor becomes a
pass-by-value scalar. Every method returns the output tensor, named ``"<name>::OUT_0"``.
"""
from ..ir.ops.pointwise import Pointwise
from ..types import cudnnPointwiseMode_t

M = cudnnPointwiseMode_t


class FePointwise(Pointwise):
    """The IR pointwise node, with frontend scalars (dims [1]*k) broadcast to the operands' rank."""

    def infer(self, ctx):
        ranks = [t.ndim for t in self.inputs.values() if t.dims is not None and not t.is_by_value]
        if ranks:
            rank = max(ranks)
            for t in self.inputs.values():
                if t.is_by_value and t.dims is not None and t.ndim != rank and all(d == 1 for d in t.dims):
                    t.dims, t.strides = (1,) * rank, (1,) * rank
        super().infer(ctx)


#: frontend method -> (IR mode, tensor argument names in operand order)
UNARY = {
    "abs": M.CUDNN_POINTWISE_ABS, "ceil": M.CUDNN_POINTWISE_CEIL, "cos": M.CUDNN_POINTWISE_COS,
    "elu": M.CUDNN_POINTWISE_ELU_FWD, "erf": M.CUDNN_POINTWISE_ERF, "exp": M.CUDNN_POINTWISE_EXP,
    "floor": M.CUDNN_POINTWISE_FLOOR, "gelu": M.CUDNN_POINTWISE_GELU_FWD,
    "gelu_approx_tanh": M.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, "identity": M.CUDNN_POINTWISE_IDENTITY,
    "log": M.CUDNN_POINTWISE_LOG, "logical_not": M.CUDNN_POINTWISE_LOGICAL_NOT, "neg": M.CUDNN_POINTWISE_NEG,
    "reciprocal": M.CUDNN_POINTWISE_RECIPROCAL, "rsqrt": M.CUDNN_POINTWISE_RSQRT,
    "sigmoid": M.CUDNN_POINTWISE_SIGMOID_FWD, "sin": M.CUDNN_POINTWISE_SIN,
    "softplus": M.CUDNN_POINTWISE_SOFTPLUS_FWD, "sqrt": M.CUDNN_POINTWISE_SQRT, "tan": M.CUDNN_POINTWISE_TAN,
    "tanh": M.CUDNN_POINTWISE_TANH_FWD,
}
BINARY_AB = {
    "add": M.CUDNN_POINTWISE_ADD, "add_square": M.CUDNN_POINTWISE_ADD_SQUARE, "div": M.CUDNN_POINTWISE_DIV,
    "logical_and": M.CUDNN_POINTWISE_LOGICAL_AND, "logical_or": M.CUDNN_POINTWISE_LOGICAL_OR,
    "mul": M.CUDNN_POINTWISE_MUL, "sub": M.CUDNN_POINTWISE_SUB,
}
BINARY_01 = {"max": M.CUDNN_POINTWISE_MAX, "min": M.CUDNN_POINTWISE_MIN, "mod": M.CUDNN_POINTWISE_MOD,
             "pow": M.CUDNN_POINTWISE_POW}
COMPARE = {"cmp_eq": M.CUDNN_POINTWISE_CMP_EQ, "cmp_neq": M.CUDNN_POINTWISE_CMP_NEQ,
           "cmp_gt": M.CUDNN_POINTWISE_CMP_GT, "cmp_ge": M.CUDNN_POINTWISE_CMP_GE,
           "cmp_lt": M.CUDNN_POINTWISE_CMP_LT, "cmp_le": M.CUDNN_POINTWISE_CMP_LE}
BACKWARD = {"elu_backward": M.CUDNN_POINTWISE_ELU_BWD, "gelu_backward": M.CUDNN_POINTWISE_GELU_BWD,
            "gelu_approx_tanh_backward": M.CUDNN_POINTWISE_GELU_APPROX_TANH_BWD,
            "sigmoid_backward": M.CUDNN_POINTWISE_SIGMOID_BWD, "softplus_backward": M.CUDNN_POINTWISE_SOFTPLUS_BWD,
            "tanh_backward": M.CUDNN_POINTWISE_TANH_BWD}

SPEC = {}
SPEC.update({k: (m, ("input",)) for k, m in UNARY.items()})
SPEC.update({k: (m, ("a", "b")) for k, m in BINARY_AB.items()})
SPEC.update({k: (m, ("input0", "input1")) for k, m in BINARY_01.items()})
SPEC.update({k: (m, ("input", "comparison")) for k, m in COMPARE.items()})
SPEC.update({k: (m, ("loss", "input")) for k, m in BACKWARD.items()})
SPEC["bias"] = (M.CUDNN_POINTWISE_ADD, ("input", "bias"))
SPEC["scale"] = (M.CUDNN_POINTWISE_MUL, ("input", "scale"))
SPEC["binary_select"] = (M.CUDNN_POINTWISE_BINARY_SELECT, ("input0", "input1", "mask"))

#: optional scalar attributes a method takes: frontend kwarg -> IR attribute
ATTR_KW = {"negative_slope": "relu_lower_clip_slope", "lower_clip": "relu_lower_clip",
           "upper_clip": "relu_upper_clip", "swish_beta": "swish_beta", "axis": "axis",
           "alpha": "elu_alpha", "softplus_beta": "softplus_beta"}
#: explicit methods (attributes beyond the tensors): name -> (mode, tensor names, attribute kwargs)
WITH_ATTRS = {
    "relu": (M.CUDNN_POINTWISE_RELU_FWD, ("input",), ("negative_slope", "lower_clip", "upper_clip")),
    "leaky_relu": (M.CUDNN_POINTWISE_RELU_FWD, ("input",), ("negative_slope",)),
    "relu_backward": (M.CUDNN_POINTWISE_RELU_BWD, ("loss", "input"), ("negative_slope", "lower_clip", "upper_clip")),
    "leaky_relu_backward": (M.CUDNN_POINTWISE_RELU_BWD, ("loss", "input"), ("negative_slope",)),
    "swish": (M.CUDNN_POINTWISE_SWISH_FWD, ("input",), ("swish_beta",)),
    "swish_backward": (M.CUDNN_POINTWISE_SWISH_BWD, ("loss", "input"), ("swish_beta",)),
    "gen_index": (M.CUDNN_POINTWISE_GEN_INDEX, ("input",), ("axis",)),
    "elu": (M.CUDNN_POINTWISE_ELU_FWD, ("input",), ("alpha",)),
    "elu_backward": (M.CUDNN_POINTWISE_ELU_BWD, ("loss", "input"), ("alpha",)),
    "softplus": (M.CUDNN_POINTWISE_SOFTPLUS_FWD, ("input",), ("softplus_beta",)),
    "softplus_backward": (M.CUDNN_POINTWISE_SOFTPLUS_BWD, ("loss", "input"), ("softplus_beta",)),
}
REQUIRED_ATTRS = {"leaky_relu": ("negative_slope",), "leaky_relu_backward": ("negative_slope",),
                  "gen_index": ("axis",)}


def _lower_pointwise(mode, names):
    def lower(graph, rec):
        ts = [rec.tensors[n] for n in names]
        if int(mode) >= 200 and int(mode) < 300:
            inputs = {"DY": ts[0].desc, "X": ts[1].desc}
            outputs = {"DX": rec.outputs[0].desc}
        else:
            inputs = dict(zip(("X", "B", "T"), (t.desc for t in ts)))
            outputs = {"Y": rec.outputs[0].desc}
        attrs = {ATTR_KW[k]: v for k, v in rec.params.items() if v is not None}
        return FePointwise(rec.name, inputs, outputs, graph._compute_dtype(rec), mode=mode, **attrs)

    return lower


def _make(op, mode, names, attr_names=()):
    required = REQUIRED_ATTRS.get(op, ())

    def method(self, *args, name="", compute_data_type=None, **kwargs):
        if len(args) > len(names) + len(attr_names):
            raise TypeError(f"{op}() takes tensors {names} and attributes {attr_names}")
        tensors = dict(zip(names, args))
        params = dict(zip(attr_names, args[len(names):]))
        for n in names[len(args):]:
            if n not in kwargs:
                raise TypeError(f"{op}() missing tensor argument {n!r}")
            tensors[n] = kwargs.pop(n)
        for a in attr_names:
            if a in kwargs:
                params[a] = kwargs.pop(a)
        for a in required:
            if params.get(a) is None:
                raise TypeError(f"{op}() missing argument {a!r}")
        if kwargs:
            raise TypeError(f"{op}() got unexpected arguments {sorted(kwargs)}; tensors are {names}, "
                            f"attributes {attr_names}")
        return self._add_op(op, name, tensors, params, ["OUT_0"], _lower_pointwise(mode, names),
                            compute_data_type=compute_data_type)

    method.__name__ = op
    method.__qualname__ = f"pygraph.{op}"
    args = ", ".join(names + tuple(f"{a}=None" for a in attr_names))
    method.__doc__ = f"{op}({args}, name='', compute_data_type=None) -> tensor (pointwise {M(mode).name})."
    return method


class PointwiseOps:
    """Mixin: the pointwise methods, generated from the tables above."""


for _op, (_mode, _names) in SPEC.items():
    setattr(PointwiseOps, _op, _make(_op, _mode, _names))
for _op, (_mode, _names, _attrs) in WITH_ATTRS.items():
    setattr(PointwiseOps, _op, _make(_op, _mode, _names, _attrs))
