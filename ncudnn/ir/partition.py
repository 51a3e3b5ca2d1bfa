"""Partition a finalized graph into engine-executable subgraphs.

Patterns, tried in topological order:
  * anchor + epilogue: conv fprop/dgrad/wgrad, matmul or norm fwd, followed by the chain of pointwise
    nodes that consume its (virtual) output, plus an optional trailing reduction or genstats;
  * pointwise DAG: pointwise nodes joined by virtual tensors (one fused kernel);
  * a single op.
Virtual tensors that cross subgraphs are *materialized*: the plan gives them workspace.
"""
from dataclasses import dataclass, field
from typing import List, Optional

from .ops import GenStats, Pointwise, Reduction

ANCHORS = ("conv_fprop", "conv_dgrad", "conv_wgrad", "matmul", "norm_fwd")


@dataclass
class Subgraph:
    kind: str                       # anchor op name, "pointwise" or the single op's name
    nodes: List[object]             # in topological order
    anchor: Optional[object] = None
    epilogue: List[object] = field(default_factory=list)
    tail: Optional[object] = None   # reduction / genstats fused after the epilogue

    def inputs(self):
        """Tensors read from outside this subgraph (uid order of first use)."""
        inside = {t.uid for n in self.nodes for t in n.outputs.values()}
        seen, out = set(), []
        for n in self.nodes:
            for t in n.inputs.values():
                if t.uid not in inside and t.uid not in seen:
                    seen.add(t.uid)
                    out.append(t)
        return out

    def outputs(self, graph_consumers=None):
        """Tensors this subgraph must write: non-virtual ones, and virtual ones read elsewhere."""
        inside_reads = {t.uid for n in self.nodes for t in n.inputs.values()}
        out = []
        for n in self.nodes:
            for t in n.outputs.values():
                outside = graph_consumers is not None and any(
                    c not in self.nodes for c in graph_consumers.get(t.uid, ()))
                if not t.is_virtual or outside or t.uid not in inside_reads:
                    out.append(t)
        return out

    def describe(self):
        chain = " -> ".join(f"{n.OP}:{n.name}" for n in self.nodes)
        return f"[{self.kind}] {chain}"


def partition(graph):
    """Subgraphs of a finalized :class:`OpGraph`, in execution order, and the uids to materialize."""
    order = graph.nodes
    cons = graph.consumers()
    taken = set()
    subs = []

    def only_consumer(t):
        c = cons.get(t.uid, [])
        return c[0] if len(c) == 1 else None

    for node in order:
        if id(node) in taken:
            continue
        if node.OP in ANCHORS:
            sub = Subgraph(kind=node.OP, nodes=[node], anchor=node)
            taken.add(id(node))
            out = next(iter(node.outputs.values())) if node.OP != "norm_fwd" else node.outputs["Y"]
            while out.is_virtual:
                nxt = only_consumer(out)
                if not isinstance(nxt, Pointwise) or id(nxt) in taken:
                    break
                others = [t for p, t in nxt.inputs.items() if t.uid != out.uid]
                if any(t.is_virtual for t in others):
                    break
                sub.epilogue.append(nxt)
                sub.nodes.append(nxt)
                taken.add(id(nxt))
                out = next(iter(nxt.outputs.values()))
            nxt = only_consumer(out)
            if isinstance(nxt, (Reduction, GenStats)) and id(nxt) not in taken and node.OP != "norm_fwd":
                sub.tail = nxt
                sub.nodes.append(nxt)
                taken.add(id(nxt))
            subs.append(sub)
        elif isinstance(node, Pointwise):
            group = _pointwise_component(node, order, cons, taken)
            for n in group:
                taken.add(id(n))
            subs.append(Subgraph(kind="pointwise", nodes=group))
        else:
            taken.add(id(node))
            subs.append(Subgraph(kind=node.OP, nodes=[node]))
    subs = _order_subgraphs(subs, graph)
    materialize = set()
    for s in subs:
        for t in s.outputs(cons):
            if t.is_virtual:
                materialize.add(t.uid)
    return subs, materialize


def _pointwise_component(seed, order, cons, taken):
    """Pointwise nodes reachable from ``seed`` through virtual tensors, in topological order."""
    prod = {t.uid: n for n in order for t in n.outputs.values()}
    group, stack = {id(seed): seed}, [seed]
    while stack:
        n = stack.pop()
        neighbours = []
        for t in n.outputs.values():
            if t.is_virtual:
                neighbours += cons.get(t.uid, [])
        for t in n.inputs.values():
            if t.is_virtual and t.uid in prod:
                neighbours.append(prod[t.uid])
        for m in neighbours:
            if isinstance(m, Pointwise) and id(m) not in taken and id(m) not in group:
                group[id(m)] = m
                stack.append(m)
    return [n for n in order if id(n) in group]


def _order_subgraphs(subs, graph):
    """Topological order of the subgraphs themselves (a fused group can depend on a later anchor)."""
    owner = {}
    for i, s in enumerate(subs):
        for n in s.nodes:
            for t in n.outputs.values():
                owner[t.uid] = i
    deps = {i: {owner[t.uid] for t in s.inputs() if t.uid in owner and owner[t.uid] != i}
            for i, s in enumerate(subs)}
    done, out = set(), []
    while len(out) < len(subs):
        ready = [i for i in range(len(subs)) if i not in done and deps[i] <= done]
        if not ready:  # a fused group both feeds and reads another subgraph: split it apart
            raise _cyclic(subs)
        done.add(ready[0])
        out.append(subs[ready[0]])
    return out


def _cyclic(subs):
    from ..errors import CudnnError
    from ..types import cudnnStatus_t
    return CudnnError("graph cannot be partitioned without a cycle between fused groups: "
                      + "; ".join(s.describe() for s in subs), cudnnStatus_t.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
