"""The FP8 side of engine matmul_tc (no engine of its own): the GemmMapping of a matmul subgraph whose
A / B (e4m3 or e5m2) or written output are FP8, and the operands' 16-bit-halves view.

FP8 graph pattern (cudnn-frontend's FP8 matmul): ``C = matmul(A, B)`` (FP32 compute), then the
pointwise chain ``C * descale_a * descale_b * scale_d``, optionally bias / activation, cast to the
output type (FP8, BF16, FP16 or FP32) by the epilogue's store (RNE). Leading MULs by a device tensor of
one element (FP32, every dim 1: cudnn-frontend's descale / scale tensors) fold into the kernel's alpha
at run time (``dscales``: the kernel reads element 0 of each); by-value scalars fold into alpha at
launch (leading) or compile in as constants (later).

AMAX (cudnn-frontend's FP8 pattern with amax): ``C = matmul(A, B) * descale_a * descale_b``, then
``amax = reduction(C, AMAX)`` and ``D = C * scale_d`` (cast to the FP8 output). The partition splits it
in three (C feeds two nodes): matmul_tc takes that composite problem whole (:func:`amax_pattern`), the
kernel's epilogue computes ``max |C|`` (``make_tc_gemm(..., amax=True, pscales=n)``: scale_d and later
scalar MULs apply after the tap) into the one-element FP32 amax tensor (zeroed by a one-thread kernel
launched first), so C never reaches memory.

The mapping is :func:`ncudnn.engines.matmul.common.matmul_mapping`'s with ``fp8=True`` (FP8 A / B / output dtypes, their
byte sizes), over a copy of the subgraph whose leading device-scale MULs are folded into the anchor.
"""
import copy
import dataclasses

from ...types import cudnnStatus_t
from ..gemm import common as gc
from .common import matmul_mapping

S = cudnnStatus_t
FP8 = ("float8_e4m3fn", "float8_e5m2")


def _device_scalar(n, cur):
    """The one-element FP32 device tensor ``n`` multiplies the chain value ``cur`` by, or None."""
    from ...types import cudnnPointwiseMode_t as PM

    if getattr(n, "OP", "") != "pointwise" or int(n.mode) != int(PM.CUDNN_POINTWISE_MUL):
        return None
    if getattr(n, "alpha1", None) not in (None, 1.0) or getattr(n, "alpha2", None) not in (None, 1.0):
        return None
    others = [t for t in n.inputs.values() if t.uid != cur]
    if len(others) != 1 or len(n.inputs) != 2:
        return None
    t = others[0]
    if t.is_virtual or t.is_by_value or gc.kdtype(t) != "float32" or any(d != 1 for d in t.dims):
        return None
    return t


def fp8_mapping(sub):
    """The GemmMapping of the matmul subgraph ``sub`` when A, B or the written output is FP8 (A / B
    dtypes, ``in_bytes``, ``out_bytes``, the epilogue's output dtype and tensor as the graph has them);
    None when no FP8 tensor is involved. Raises gc.Reject as matmul_mapping does. Leading MULs by
    one-element FP32 device tensors become ``dscales`` (the anchor "writes" their result)."""
    node = sub.anchor
    last = sub.epilogue[-1] if sub.epilogue else node
    out = next(iter(last.outputs.values()))
    ins = [p for p in ("A", "B") if gc.kdtype(node.inputs[p]) in FP8]
    if not ins and not (gc.kdtype(out) in FP8 and not out.is_virtual):
        return None
    anchor, epilogue, dscales = copy.copy(node), list(sub.epilogue), []
    cur = next(iter(node.outputs.values()))
    while ins and epilogue and cur.is_virtual:
        t = _device_scalar(epilogue[0], cur.uid)
        if t is None:
            break
        dscales.append(t)
        cur = next(iter(epilogue.pop(0).outputs.values()))
        anchor.outputs = {"C": cur}
    # the epilogue's nodes read the anchor's output by uid: the copy keeps every uid
    proxy = dataclasses.replace(sub, anchor=anchor, epilogue=epilogue,
                                nodes=[anchor] + epilogue + ([sub.tail] if sub.tail is not None else []))
    if hasattr(sub, "materialize"):
        proxy.materialize = sub.materialize
    p = matmul_mapping(proxy, fp8=True)
    p.dscales = tuple(dscales)
    return p


def fp8_halves(p, where):
    """(K, A strides, B strides) in 16-bit halves of k-contiguous FP8 A (b1, b2, m, k) and B
    (b1, b2, k, n) (k stride 1); raises gc.Reject when one is odd."""
    if p.K % 16:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: FP8 K = {p.K} is not a multiple of 16 "
                        "(16-byte cp.async chunks of FP8)")
    a, b = p.a_strides, p.b_strides
    odd = [name for name, v in (("K", p.K), ("A batch stride", a[0]), ("A batch stride 2", a[1]),
                                ("lda", a[2]), ("B batch stride", b[0]), ("B batch stride 2", b[1]),
                                ("ldb", b[3])) if v % 2]
    if odd:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: FP8 {odd[0]} is odd (the kernel reads "
                        "FP8 pairs as 16-bit halves)")
    return p.K // 2, (a[0] // 2, a[1] // 2, a[2] // 2, 1), (b[0] // 2, b[1] // 2, 1, b[3] // 2)


def _scalar_mul(n, cur):
    """The scalar tensor (by-value or one-element FP32 device tensor) that MUL node ``n`` multiplies the
    chain value ``cur`` (a uid) by, or None."""
    from ...types import cudnnPointwiseMode_t as PM

    if getattr(n, "OP", "") != "pointwise" or int(n.mode) != int(PM.CUDNN_POINTWISE_MUL):
        return None
    if getattr(n, "alpha1", None) not in (None, 1.0) or getattr(n, "alpha2", None) not in (None, 1.0):
        return None
    others = [t for t in n.inputs.values() if t.uid != cur]
    if len(others) != 1 or len(n.inputs) != 2 or any(d != 1 for d in others[0].dims):
        return None
    t = others[0]
    if t.is_by_value or (not t.is_virtual and gc.kdtype(t) == "float32"):
        return t
    return None


def amax_pattern(sub):
    """(proxy matmul Subgraph, amax tensor, post-tap scalar tensors) of a composite problem that is the
    FP8 matmul with an amax output: parts = the matmul subgraph (anchor + scalar MULs, no tail) whose
    output X feeds a REDUCTION AMAX to a one-element FP32 tensor and a chain of scalar MULs to the
    written output D (dims of X). The proxy is the matmul part with its last node writing D (so the
    mapping sees D's dtype and strides); raises gc.Reject naming what does not match."""
    from ...ir.partition import Subgraph
    from ...types import cudnnReduceTensorOp_t as RO

    bad = S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN
    parts = list(getattr(sub, "parts", ()))
    mm = [p for p in parts if p.kind == "matmul"]
    if len(parts) != 3 or len(mm) != 1:
        raise gc.Reject(bad, f"matmul_tc: a composite problem must be matmul + AMAX reduction + output scale "
                        f"(FP8 pattern), got {[p.kind for p in parts]}")
    m = mm[0]
    if m.tail is not None:
        raise gc.Reject(bad, "matmul_tc: the FP8 amax pattern's matmul part has a tail")
    last = m.epilogue[-1] if m.epilogue else m.anchor
    port = next(iter(last.outputs))
    tap = last.outputs[port]
    red = [p for p in parts if p.kind == "reduction"]
    pw = [p for p in parts if p.kind == "pointwise"]
    if len(red) != 1 or len(pw) != 1:
        raise gc.Reject(bad, "matmul_tc: the FP8 amax pattern needs one reduction and one pointwise part")
    rn = red[0].nodes[0]
    amax = rn.outputs["Y"]
    if rn.inputs["X"].uid != tap.uid or int(rn.mode) != int(RO.CUDNN_REDUCE_TENSOR_AMAX):
        raise gc.Reject(bad, f"node '{rn.name}': not an AMAX reduction of the matmul chain's output {tap.label}")
    if amax.is_virtual or gc.kdtype(amax) != "float32" or any(d != 1 for d in amax.dims):
        raise gc.Reject(bad, f"node '{rn.name}': the amax output must be one FP32 element in memory")
    cur, post = tap, []
    for n in pw[0].nodes:
        t = _scalar_mul(n, cur.uid)
        if t is None or cur.uid not in {x.uid for x in n.inputs.values()}:
            raise gc.Reject(bad, f"node '{n.name}': after the amax tap only MULs by scalars (by-value or one-element "
                            "FP32 device tensors) are fused")
        post.append(t)
        cur = next(iter(n.outputs.values()))
    out = cur
    if out.is_virtual or tuple(out.dims) != tuple(tap.dims):
        raise gc.Reject(bad, f"matmul_tc: the scaled output {out.label} must be in memory with the dims of {tap.label}")
    nl = copy.copy(last)
    nl.outputs = {port: out}
    if m.epilogue:
        anchor, epilogue = m.anchor, list(m.epilogue[:-1]) + [nl]
    else:
        anchor, epilogue = nl, []
    proxy = Subgraph(kind="matmul", nodes=[anchor] + epilogue, anchor=anchor, epilogue=epilogue)
    proxy.materialize = frozenset()
    return proxy, amax, tuple(post)
