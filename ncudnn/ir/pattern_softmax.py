"""Recognize softmax and log-softmax written as cuDNN graphs express them::

    m = reduce_max(x)        s = x - m        e = exp(s)        z = reduce_add(e)
    softmax:      y = e / z
    log-softmax:  y = s - log(z)

with m, s, e, z (and log z) virtual. The match becomes one "softmax" subgraph so a single kernel can
run it (each input read once, the output written once) instead of four materialized passes.
"""
from ..types import cudnnPointwiseMode_t, cudnnReduceTensorOp_t
from .ops import Pointwise, Reduction

PM = cudnnPointwiseMode_t
RM = cudnnReduceTensorOp_t


def _pw(node, mode):
    return isinstance(node, Pointwise) and int(node.mode) == int(mode)


def match_softmax(r1, cons):
    """If ``r1`` (a MAX reduction) starts a softmax pattern, return (nodes, meta); else None."""
    if not isinstance(r1, Reduction) or int(r1.mode) != int(RM.CUDNN_REDUCE_TENSOR_MAX):
        return None
    x, m = r1.inputs["X"], r1.outputs["Y"]

    def only(t, n=1):
        c = cons.get(t.uid, [])
        return c if (t.is_virtual and len(c) == n) else None

    c = only(m)
    if not c or not _pw(c[0], PM.CUDNN_POINTWISE_SUB):
        return None
    p1 = c[0]
    if p1.inputs.get("X") is None or p1.inputs["X"].uid != x.uid or p1.inputs["B"].uid != m.uid:
        return None
    s = p1.outputs["Y"]
    cs = cons.get(s.uid, [])
    if not s.is_virtual or not cs:
        return None
    p2 = next((n for n in cs if _pw(n, PM.CUDNN_POINTWISE_EXP)), None)
    if p2 is None:
        return None
    e = p2.outputs["Y"]
    ce = cons.get(e.uid, [])
    r2 = next((n for n in ce if isinstance(n, Reduction) and int(n.mode) == int(RM.CUDNN_REDUCE_TENSOR_ADD)), None)
    if r2 is None or not e.is_virtual or tuple(r2.outputs["Y"].dims or ()) != tuple(m.dims or ()):
        return None
    z = r2.outputs["Y"]
    cz = cons.get(z.uid, [])
    if not z.is_virtual or len(cz) != 1:
        return None
    if len(cs) == 1 and len(ce) == 2:  # softmax: y = e / z
        p3 = next((n for n in ce if n is not r2), None)
        if not (p3 is cz[0] and _pw(p3, PM.CUDNN_POINTWISE_DIV) and p3.inputs["X"].uid == e.uid):
            return None
        return [r1, p1, p2, r2, p3], {"log": False, "x": x, "y": p3.outputs["Y"], "axes": r1.reduced_axes()}
    if len(cs) == 2 and len(ce) == 1:  # log-softmax: y = s - log(z)
        pl = cz[0]
        if not _pw(pl, PM.CUDNN_POINTWISE_LOG):
            return None
        lz = pl.outputs["Y"]
        clz = only(lz)
        p4 = next((n for n in cs if n is not p2), None)
        if not clz or clz[0] is not p4 or not _pw(p4, PM.CUDNN_POINTWISE_SUB) \
                or p4.inputs["X"].uid != s.uid or p4.inputs["B"].uid != lz.uid:
            return None
        return [r1, p1, p2, r2, pl, p4], {"log": True, "x": x, "y": p4.outputs["Y"], "axes": r1.reduced_axes()}
    return None
