"""Partition a finalized graph into engine-executable subgraphs.

Patterns, tried in topological order:
  * anchor + epilogue: conv fprop/dgrad/wgrad, matmul or norm fwd, followed by the chain of pointwise
    nodes that consume its (virtual) output, plus an optional trailing reduction or genstats;
  * softmax / log-softmax written as max-reduce, sub, exp, add-reduce, div (or sub-log): one unit;
  * pointwise DAG: pointwise nodes joined by virtual tensors (one fused kernel), grown only where the
    group stays convex (no path leaves the group and comes back, so groups never form a cycle); then
    independent groups of one shape that read a common graph input are merged (outputs bound in place
    over those inputs stay correct: one kernel reads each element before writing it);
  * a single op.
Virtual tensors that cross subgraphs are *materialized*: the plan gives them workspace.
"""
from dataclasses import dataclass, field
from typing import List, Optional

from .ops import GenStats, Pointwise, Reduction
from .pattern_softmax import match_softmax

ANCHORS = ("conv_fprop", "conv_dgrad", "conv_wgrad", "matmul", "norm_fwd")


@dataclass
class Subgraph:
    kind: str                       # anchor op name, "pointwise" or the single op's name
    nodes: List[object]             # in topological order
    anchor: Optional[object] = None
    epilogue: List[object] = field(default_factory=list)
    tail: Optional[object] = None   # reduction / genstats fused after the epilogue
    meta: dict = field(default_factory=dict)  # pattern details (e.g. softmax: log, x, y, axes)

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
    pw_slots = []

    def only_consumer(t):
        c = cons.get(t.uid, [])
        return c[0] if len(c) == 1 else None

    for node in order:
        if id(node) in taken:
            continue
        sm = match_softmax(node, cons)
        if sm is not None and not any(id(n) in taken for n in sm[0]):
            nodes, meta = sm
            taken.update(id(n) for n in nodes)
            subs.append(Subgraph(kind="softmax", nodes=nodes, anchor=node, meta=meta))
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
            subs.append(None)  # placeholder; pointwise groups are formed below
            pw_slots.append((len(subs) - 1, node))
        else:
            taken.add(id(node))
            subs.append(Subgraph(kind=node.OP, nodes=[node]))
    groups = _merge_siblings(_pointwise_groups([n for _, n in pw_slots], order), order)
    first_slot = {}
    for slot, n in pw_slots:
        g = groups[id(n)]
        if id(g) not in first_slot:
            first_slot[id(g)] = slot
            subs[slot] = Subgraph(kind="pointwise", nodes=g)
    subs = [s for s in subs if s is not None]
    subs = _order_subgraphs(subs, graph)
    materialize = set()
    for s in subs:
        for t in s.outputs(cons):
            if t.is_virtual:
                materialize.add(t.uid)
    return subs, materialize


def _pointwise_groups(nodes, order):
    """Group pointwise nodes joined by virtual tensors, in topological order. A node joins the group of
    a pointwise producer only when none of its other inputs depends on that group through nodes
    outside it (the group stays convex, so subgraphs never depend on each other in a cycle).
    Returns id(node) -> the list of nodes of its group (shared list objects)."""
    prod = {t.uid: n for n in order for t in n.outputs.values()}
    ancestors = {}
    for n in order:  # transitive producers of each node
        acc = set()
        for t in n.inputs.values():
            p = prod.get(t.uid)
            if p is not None:
                acc.add(id(p))
                acc |= ancestors[id(p)]
        ancestors[id(n)] = acc
    is_pw = {id(n) for n in nodes}

    def convex(members):
        ids = {id(m) for m in members}
        for m in members:
            for u in m.inputs.values():
                p = prod.get(u.uid)
                if p is not None and id(p) not in ids and ancestors[id(p)] & ids:
                    return False
        return True

    group_of = {}
    for n in order:
        if id(n) not in is_pw:
            continue
        merged = [n]
        for t in n.inputs.values():
            p = prod.get(t.uid)
            if p is None or not t.is_virtual or id(p) not in group_of:
                continue
            g = group_of[id(p)]
            if any(m is n for m in g) or any(g is h for h in (group_of.get(id(x)) for x in merged) if h):
                continue
            if convex(g + merged):
                merged = g + merged
        for m in merged:
            group_of[id(m)] = merged
    pos = {id(n): i for i, n in enumerate(order)}
    canon, out = {}, {}
    for k, g in group_of.items():  # one sorted list object per group: callers compare by identity
        if id(g) not in canon:
            canon[id(g)] = sorted(g, key=lambda m: pos[id(m)])
        out[k] = canon[id(g)]
    return out


def _merge_siblings(groups, order):
    """Merge pointwise groups that read a common graph input, have one shape and do not depend on each
    other (e.g. the two halves of a rotary embedding): one kernel reads each element of every input
    before it writes that element of any output, so outputs may be bound in place over those inputs;
    as two kernels the first would overwrite what the second still reads. Returns the same mapping."""
    prod = {t.uid: n for n in order for t in n.outputs.values()}
    ancestors = {}
    for n in order:
        acc = set()
        for t in n.inputs.values():
            p = prod.get(t.uid)
            if p is not None:
                acc.add(id(p))
                acc |= ancestors[id(p)]
        ancestors[id(n)] = acc
    pos = {id(n): i for i, n in enumerate(order)}
    distinct = list({id(g): g for g in groups.values()}.values())
    info = []
    for g in distinct:
        ids = {id(n) for n in g}
        dims = [t.dims for n in g for t in n.tensors() if t.dims is not None]
        shape = tuple(max(d) for d in zip(*dims)) if dims and len({len(d) for d in dims}) == 1 else None
        reads = {t.uid for n in g for t in n.inputs.values() if not t.is_virtual and t.uid not in prod}
        info.append([g, ids, set().union(*(ancestors[i] for i in ids)), shape, reads])
    merged = True
    while merged:
        merged = False
        for a in range(len(info)):
            for b in range(a + 1, len(info)):
                ga, gb = info[a], info[b]
                if ga[3] is None or ga[3] != gb[3] or not ga[4] & gb[4] or ga[1] & gb[2] or gb[1] & ga[2]:
                    continue
                ga[0] = sorted(ga[0] + gb[0], key=lambda m: pos[id(m)])
                ga[1] |= gb[1]
                ga[2] |= gb[2]
                ga[4] |= gb[4]
                del info[b]
                merged = True
                break
            if merged:
                break
    out = dict(groups)
    for g, ids, *_ in info:
        for i in ids:
            out[i] = g
    return out


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
