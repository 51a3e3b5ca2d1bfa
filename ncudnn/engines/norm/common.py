"""What the norm engines (norm_batch, norm_rows) share: the node checks (kind, mode, dtypes, by-value scalars,
epilogue) and the fused pointwise epilogue appended after the normalized output.
"""
from ...types import cudnnBackendNormMode_t, cudnnStatus_t
from ..base import OK
from ..membound.common import Arg, io_dtypes_ok, kdtype
from .bn_finalize import scalar_ports_ok

__all__ = ["check_norm_node", "epilogue_output"]

S = cudnnStatus_t
NM = cudnnBackendNormMode_t


def check_norm_node(engine, sub, modes):
    """Shared checks of the norm engines: kind, mode, dtypes, by-value scalars, epilogue."""
    if sub.kind not in engine.kinds:
        return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, \
            f"{engine.name}: accepts {engine.kinds}, not a {sub.kind} subgraph"
    node = sub.anchor if sub.anchor is not None else sub.nodes[0]
    if NM(int(node.mode)) not in modes:
        return S.CUDNN_STATUS_NOT_SUPPORTED, \
            f"node '{node.name}': mode {NM(int(node.mode)).name}: {engine.name} runs {[m.name for m in modes]}"
    for n in sub.nodes:
        st, why = io_dtypes_ok(n)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
    st, why = scalar_ports_ok(node, ("EPSILON", "EXP_AVG_FACTOR"))
    if st != S.CUDNN_STATUS_SUCCESS:
        return st, why
    if node.OP == "norm_fwd" and "SCALE" not in node.inputs:
        return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': SCALE: required by {engine.name}"
    if sub.tail is not None:
        return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{sub.tail.name}': a fused reduction tail"
    from ...kernels.pointwise import ops as po

    for n in sub.epilogue:
        if int(n.mode) not in po.SUPPORTED_MODES:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{n.name}': mode {n.mode.name} has no kernel expression"
        if tuple(next(iter(n.outputs.values())).dims) != tuple(node.inputs["X"].dims):
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"node '{n.name}': epilogue output dims differ from X's"
    return OK


def epilogue_output(pw, sub, y, y_ref):
    """Append the subgraph's epilogue to PointwiseBuilder ``pw`` after value ``y_ref`` of tensor ``y`` (a node
    index, or an ("in", k) / ("node", j) ref);
    add the written outputs (Y itself when it is not virtual, every non-virtual epilogue output)."""
    if not y.is_virtual or y.uid in getattr(sub, "materialize", ()):
        pw.add_output(y_ref, Arg.tensor(y), kdtype(y), y.strides)
    value_of = {y.uid: y_ref if isinstance(y_ref, tuple) else ("node", y_ref)}
    pw.add_ir_nodes(sub.epilogue, value_of)
    for n in sub.epilogue:
        for t in n.outputs.values():
            if not t.is_virtual or t.uid in getattr(sub, "materialize", ()):
                pw.add_output(value_of[t.uid][1], Arg.tensor(t), kdtype(t), t.strides)
