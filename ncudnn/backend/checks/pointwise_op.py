"""Finalize checks of CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR.

The mode (from the pointwise descriptor) fixes which tensors the node takes: one input (Y = op(X)),
two inputs (Y = op(X, B), with broadcasting of size-1 dimensions), three (BINARY_SELECT: X, B, T,
no broadcasting), or an activation backward (dX = op'(X) * dY).
"""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnPointwiseMode_t as P
from ..report import bad
from .tensor import tensor_of

X, B, Y, T = (A.CUDNN_ATTR_OPERATION_POINTWISE_XDESC, A.CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
              A.CUDNN_ATTR_OPERATION_POINTWISE_YDESC, A.CUDNN_ATTR_OPERATION_POINTWISE_TDESC)
DX, DY = A.CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, A.CUDNN_ATTR_OPERATION_POINTWISE_DYDESC
ALPHA2 = A.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2

BINARY = frozenset({
    P.CUDNN_POINTWISE_ADD, P.CUDNN_POINTWISE_ADD_SQUARE, P.CUDNN_POINTWISE_DIV, P.CUDNN_POINTWISE_MAX,
    P.CUDNN_POINTWISE_MIN, P.CUDNN_POINTWISE_MOD, P.CUDNN_POINTWISE_MUL, P.CUDNN_POINTWISE_POW,
    P.CUDNN_POINTWISE_SUB, P.CUDNN_POINTWISE_ATAN2, P.CUDNN_POINTWISE_FLOOR_MOD,
    P.CUDNN_POINTWISE_CMP_EQ, P.CUDNN_POINTWISE_CMP_NEQ, P.CUDNN_POINTWISE_CMP_GT,
    P.CUDNN_POINTWISE_CMP_GE, P.CUDNN_POINTWISE_CMP_LT, P.CUDNN_POINTWISE_CMP_LE,
    P.CUDNN_POINTWISE_LOGICAL_AND, P.CUDNN_POINTWISE_LOGICAL_OR})
TERNARY = frozenset({P.CUDNN_POINTWISE_BINARY_SELECT})
BACKWARD = frozenset(m for m in P if m.name.endswith("_BWD"))
UNARY = frozenset(P) - BINARY - TERNARY - BACKWARD


def arity(mode):
    if mode in BACKWARD:
        return "backward"
    return 3 if mode in TERNARY else 2 if mode in BINARY else 1


def _broadcast_to(d, name, t, out, out_name):
    if t.rank != out.rank:
        bad(d, name, f"{t.rank} dimensions, {out_name.name} has {out.rank}")
    for i, (a, o) in enumerate(zip(t.dims, out.dims)):
        if a != o and a != 1:
            bad(d, name, f"dimension {i} is {a}: it must equal {o} or be 1 (broadcast) for output dims "
                f"{list(out.dims)}")


def finalize_pointwise_op(d):
    pw = d.value(A.CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR)
    mode = pw.value(A.CUDNN_ATTR_POINTWISE_MODE)
    kind = arity(mode)
    if kind == "backward":
        needed, banned = (X, DY, DX), (B, Y, T)
    else:
        needed = {1: (X, Y), 2: (X, B, Y), 3: (X, B, T, Y)}[kind]
        banned = tuple(n for n in (B, T, DX, DY) if n not in needed)
    for n in needed:
        if not d.is_set(n):
            bad(d, n, f"required by {mode.name}")
    for n in banned:
        if d.is_set(n):
            bad(d, n, f"must not be set for {mode.name}")
    if kind in (1, "backward") and d.is_set(ALPHA2):
        bad(d, ALPHA2, f"must not be set for {mode.name}, which takes one input")
    if kind == "backward":
        x, dy, dx = (tensor_of(d, n) for n in (X, DY, DX))
        for n, t in ((X, x), (DY, dy)):
            _broadcast_to(d, n, t, dx, DX)
        out = dx
    else:
        out = tensor_of(d, Y)
        if kind == 3:
            for n in (X, B, T):
                t = tensor_of(d, n)
                if t.dims != out.dims:
                    bad(d, n, f"dims {list(t.dims)} differ from the output's {list(out.dims)}: "
                        f"{mode.name} does not broadcast")
        else:
            for n in needed[:-1]:
                _broadcast_to(d, n, tensor_of(d, n), out, Y)
    if mode == P.CUDNN_POINTWISE_GEN_INDEX:
        axis = pw.value(A.CUDNN_ATTR_POINTWISE_AXIS)
        x = tensor_of(d, X)
        if not 0 <= axis < x.rank:
            bad(d, A.CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                f"CUDNN_ATTR_POINTWISE_AXIS {axis} is not in [0, {x.rank - 1}] for CUDNN_POINTWISE_GEN_INDEX")
    d.state["pointwise"] = {"mode": mode, "arity": kind}


FINALIZERS = {D.CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: finalize_pointwise_op}
