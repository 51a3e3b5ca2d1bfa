"""Lowering the softmax, transpose and rotary-embedding operation descriptors onto existing IR nodes
(``LOWER_OPS``, merged into ``lower.LOWER``); each function takes (operation descriptor, the graph's
tensor table) and returns IR nodes.

SOFTMAX (along the last dimension) becomes the graph cuDNN itself writes for it:
``m = max(x)``, ``s = x - m``, ``e = exp(s)``, ``z = sum(e)``, ``y = e / z``, which the softmax_fused engine
runs as one kernel when m, s, e and z are internal; a MAX / SUM_EXP output makes m / z real outputs and
STATS adds ``stats = m + log(z)`` (times log2(e) with STATS_LOG2), run by the reduction and pointwise
engines. Attention sinks are refused (NOT_SUPPORTED naming SINK_DESC).

TRANSPOSE becomes a logical reshape between equal dims: a side that is not virtual and that no other
operation of the graph names is seen through the permutation (for Y: its memory with X's dims, the stride
of X's dim ``perm[k]`` being Y's stride k), so the data_movement engine's strided copy moves every element
to its place; buffers are still checked against the geometry declared for them (``meta["declared"]``).
A transpose whose two tensors are each virtual or shared with another operation is refused with
NOT_SUPPORTED.

ROPE_FWD / ROPE_BWD (non-interleaved halves over the trailing ROPE_DIM columns, raw angles FREQS, the
scale alpha = OUTPUT_SCALE on the whole output):
  y_nope = alpha * x_nope, y_lo = alpha * (x_lo cos f_lo - x_hi sin f_lo), y_hi = alpha * (x_hi cos f_hi + x_lo sin f_hi)
the backward rotating by -theta (the signs of the sine terms flipped). Lowered onto slices of X and
FREQS, pointwise COS / SIN / MUL / ADD / SUB nodes and a concat into Y (or dX).
"""
import math

from ..types import cudnnBackendAttributeName_t as A
from ..types import cudnnBackendReshapeMode_t as RS
from ..types import cudnnDataType_t as DT
from ..types import cudnnPointwiseMode_t as PM
from ..types import cudnnReduceTensorOp_t as RO
from ..types import cudnnStatus_t as S
from .report import fail

F32 = DT.CUDNN_DATA_FLOAT
LOG2E = 1.0 / math.log(2.0)


def _pw(name, mode, out, x, b=None, **kw):
    from ..ir import Pointwise
    ins = {"X": x} if b is None else {"X": x, "B": b}
    return Pointwise(name=name, inputs=ins, outputs={"Y": out}, mode=mode, math_precision=F32, **kw)


def _softmax(op, T):
    from ..ir import Reduction
    P = "CUDNN_ATTR_OPERATION_SOFTMAX_"
    if op.is_set(A[P + "SINK_DESC"]):
        fail(S.CUDNN_STATUS_NOT_SUPPORTED, op, A[P + "SINK_DESC"], "attention sinks are not supported by ncudnn's softmax")
    x, y = T(op, A[P + "XDESC"]), T(op, A[P + "YDESC"])
    rows = tuple(x.dims[:-1]) + (1,)
    m = T(op, A[P + "MAX_DESC"]) or T.virtual(rows, F32)
    s, e = T.virtual(x.dims, F32), T.virtual(x.dims, F32)
    z = T(op, A[P + "SUM_EXP_DESC"]) or T.virtual(rows, F32)
    nodes = [
        Reduction(name="softmax.max", inputs={"X": x}, outputs={"Y": m}, mode=RO.CUDNN_REDUCE_TENSOR_MAX,
                  math_precision=F32),
        _pw("softmax.sub", PM.CUDNN_POINTWISE_SUB, s, x, m),
        _pw("softmax.exp", PM.CUDNN_POINTWISE_EXP, e, s),
        Reduction(name="softmax.sum", inputs={"X": e}, outputs={"Y": z}, mode=RO.CUDNN_REDUCE_TENSOR_ADD,
                  math_precision=F32),
        _pw("softmax.div", PM.CUDNN_POINTWISE_DIV, y, e, z),
    ]
    stats = T(op, A[P + "STATS_DESC"])
    if stats is not None:
        lz = T.virtual(rows, F32)
        k = LOG2E if op.value(A[P + "STATS_LOG2"]) else 1.0
        nodes += [_pw("softmax.log", PM.CUDNN_POINTWISE_LOG, lz, z),
                  _pw("softmax.stats", PM.CUDNN_POINTWISE_ADD, stats, m, lz, alpha1=k, alpha2=k)]
    return nodes


def _transpose(op, T):
    from ..ir import Reshape
    X, Y = A.CUDNN_ATTR_OPERATION_TRANSPOSE_XDESC, A.CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC
    perm = [int(p) for p in op.values(A.CUDNN_ATTR_OPERATION_TRANSPOSE_PERMUTATION)]
    xi, yi = op.value(X).state["tensor"], op.value(Y).state["tensor"]
    uses = getattr(T, "uses", {})
    if not yi.is_virtual and uses.get(yi.uid, 1) == 1:  # Y seen with X's dims: X's dim perm[k] is Y's dim k
        strides = [0] * len(perm)
        for k, p in enumerate(perm):
            strides[p] = yi.strides[k]
        x, y = T(op, X), T.of(op, Y, yi, xi.dims, strides)
    elif not xi.is_virtual and uses.get(xi.uid, 1) == 1:  # X seen with Y's dims
        x, y = T.of(op, X, xi, yi.dims, [xi.strides[p] for p in perm]), T(op, Y)
    else:
        fail(S.CUDNN_STATUS_NOT_SUPPORTED, op, Y, "a transpose between two tensors that are each virtual or used by "
             "another operation of the graph is not supported")
    for t, info in ((x, xi), (y, yi)):  # buffers are checked against the geometry the user declared
        t.meta["declared"] = (tuple(info.dims), tuple(info.strides))
    return Reshape(name="transpose", inputs={"X": x}, outputs={"Y": y}, mode=RS.CUDNN_RESHAPE_LOGICAL)


def _last_slice(T, name, t, lo, hi):
    """t[..., lo:hi] as a new virtual tensor (one Slice node)."""
    from ..ir import Slice
    n = len(t.dims)
    out = T.virtual(tuple(t.dims[:-1]) + (hi - lo,), F32)
    return Slice(name=name, inputs={"X": t}, outputs={"Y": out}, start_indices=(0,) * (n - 1) + (lo,),
                 limit_indices=tuple(t.dims[:-1]) + (hi,)), out


def _rope(kind, x_name, y_name):
    def lower(op, T):
        from ..ir import Concat
        P = f"CUDNN_ATTR_OPERATION_ROPE_{kind}_"
        x, y, f = T(op, A[P + x_name]), T(op, A[P + y_name]), T(op, A[P + "FREQSDESC"])
        alpha = float(op.value(A[P + "OUTPUT_SCALE"]))
        width = int(x.dims[-1])
        r = int(op.value(A[P + "ROPE_DIM"]) or 0) or width  # 0: the whole head dimension
        h, nope = r // 2, width - r
        tag = f"rope_{kind.lower()}"
        nodes, parts = [], []

        def pw(name, mode, *ins, **kw):
            shape = ins[0].dims if len(ins) == 1 else tuple(max(a, b) for a, b in zip(ins[0].dims, ins[1].dims))
            out = T.virtual(shape, F32)
            nodes.append(_pw(f"{tag}.{name}", mode, out, *ins, **kw))
            return out

        def cut(name, t, lo, hi):
            node, out = _last_slice(T, f"{tag}.{name}", t, lo, hi)
            nodes.append(node)
            return out

        if nope:
            parts.append(pw("nope", PM.CUDNN_POINTWISE_IDENTITY, cut("x_nope", x, 0, nope), alpha1=alpha))
        x_lo, x_hi = cut("x_lo", x, nope, nope + h), cut("x_hi", x, nope + h, width)
        f_lo, f_hi = cut("f_lo", f, 0, h), cut("f_hi", f, h, r)
        c_lo, s_lo = pw("cos_lo", PM.CUDNN_POINTWISE_COS, f_lo), pw("sin_lo", PM.CUDNN_POINTWISE_SIN, f_lo)
        c_hi, s_hi = pw("cos_hi", PM.CUDNN_POINTWISE_COS, f_hi), pw("sin_hi", PM.CUDNN_POINTWISE_SIN, f_hi)
        fwd = kind == "FWD"  # the backward rotates by -theta: the sine terms change sign
        lo_mode, hi_mode = (PM.CUDNN_POINTWISE_SUB, PM.CUDNN_POINTWISE_ADD) if fwd else \
            (PM.CUDNN_POINTWISE_ADD, PM.CUDNN_POINTWISE_SUB)
        lo_c, lo_s = pw("x_lo_cos", PM.CUDNN_POINTWISE_MUL, x_lo, c_lo), pw("x_hi_sin", PM.CUDNN_POINTWISE_MUL, x_hi, s_lo)
        hi_c, hi_s = pw("x_hi_cos", PM.CUDNN_POINTWISE_MUL, x_hi, c_hi), pw("x_lo_sin", PM.CUDNN_POINTWISE_MUL, x_lo, s_hi)
        parts.append(pw("lo", lo_mode, lo_c, lo_s, alpha1=alpha, alpha2=alpha))
        parts.append(pw("hi", hi_mode, hi_c, hi_s, alpha1=alpha, alpha2=alpha))
        nodes.append(Concat(name=f"{tag}.concat", inputs={f"X{i}": t for i, t in enumerate(parts)},
                            outputs={"Y": y}, axis=len(x.dims) - 1))
        return nodes
    return lower


LOWER_OPS = {}


def _register():
    from ..types import cudnnBackendDescriptorType_t as D
    LOWER_OPS.update({
        D.CUDNN_BACKEND_OPERATION_SOFTMAX_DESCRIPTOR: _softmax,
        D.CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR: _transpose,
        D.CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR: _rope("FWD", "XDESC", "YDESC"),
        D.CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR: _rope("BWD", "DYDESC", "DXDESC"),
    })


_register()
