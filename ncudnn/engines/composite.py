"""The composite engine: a graph that partitions into several subgraphs, each run on its own best
engine, in order; virtual tensors crossing subgraphs are materialized in the workspace.

It is also the fallback that always runs: :func:`fallback_problem` splits a subgraph no engine runs (an
anchor whose epilogue or tail no engine fuses, a pointwise group, a recognized softmax) into pieces engines
run, and splits a fused anchor subgraph into its unfused pieces too, so every graph whose nodes each have an
engine gets this plan (after the fused ones); a node no engine implements is refused naming it.

Its "subgraph" is a :class:`CompositeSub` holding the partition. Its config has no knobs; the chosen
per-subgraph EngineConfigs travel in ``EngineConfig.parts`` (so a plan rebuilt from JSON, or picked
by autotuning, runs exactly the same parts).
"""
from dataclasses import dataclass, field
from typing import List

from ..errors import NotSupportedError
from ..ir.ops import Pointwise
from ..ir.partition import Subgraph
from ..types import cudnnBackendHeurMode_t, cudnnStatus_t
from . import registry
from .base import OK, Config, Engine
from .ranking import _ctx_flags, rank_subgraph, refusal, support
from .registry import register

S = cudnnStatus_t
HM = cudnnBackendHeurMode_t


@dataclass
class CompositeSub(Subgraph):
    parts: List[Subgraph] = field(default_factory=list)
    materialize: frozenset = frozenset()

    def describe(self):
        return "[composite] " + " | ".join(p.describe() for p in self.parts)


def _unrunnable(part, status, reasons):
    """(status, message) for a piece no engine runs: the node (the single node, else the piece), its op, and
    the reasons of the engines that take its pattern (every engine's kind mismatch only when none does)."""
    pattern = int(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
    near = [w for st, w in reasons if int(st) != pattern] or [w for _, w in reasons]
    if len(part.nodes) == 1:
        n = part.nodes[0]
        mode = getattr(n, "mode", None)
        what = f"{part.describe()}: node '{n.name}' (op {n.OP}{', ' + mode.name if hasattr(mode, 'name') else ''})"
    else:
        what = part.describe()
    if all(int(st) == pattern for st, _ in reasons) and all("accepts" in w for w in near):
        return S(status), f"no engine runs {what}: no engine implements it (no registered engine accepts " \
            f"{part.kind} subgraphs)"
    return S(status), f"no engine runs {what}: " + "; ".join(near)


def make_composite(graph, parts, materialize):
    """The composite problem; each part learns (``part.materialize``) which of its virtual tensors
    live in the workspace because another part reads or writes them."""
    for p in parts:
        uids = {t.uid for n in p.nodes for t in n.tensors()}
        p.materialize = frozenset(uids & set(materialize))
    return CompositeSub(kind="composite", nodes=list(graph.nodes), parts=list(parts),
                        materialize=frozenset(materialize))


@register
class CompositeEngine(Engine):
    name = "composite"
    kinds = ("composite",)
    fallback = True

    def check_support(self, sub, ctx):
        if not isinstance(sub, CompositeSub):
            return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, "composite: needs a partitioned graph"
        for part in sub.parts:
            reasons = []
            for eng in registry.engines():
                if eng is self:
                    continue
                st, why = support(eng, part, ctx)
                if st == S.CUDNN_STATUS_SUCCESS:
                    break
                reasons.append((st, why))
            else:
                if not reasons:
                    return S.CUDNN_STATUS_NOT_SUPPORTED, f"{part.describe()}: no engine is registered"
                return _unrunnable(part, *refusal(reasons))
        return OK

    def default_config(self, sub):
        return Config(self.name, ())

    def candidates(self, sub, ctx):
        return [Config(self.name, ())]

    def choose_parts(self, sub, mode, ctx, graph_key=None, explain=None):
        """The best EngineConfig of each part under ``mode`` (FALLBACK: a fallback engine where one
        supports the part, else the model's best). Raises NotSupportedError naming the part."""
        chosen = []
        for i, part in enumerate(sub.parts):
            lines = [] if explain is not None else None
            ranked = rank_subgraph(part, mode, ctx, graph_key, lines)
            if not ranked and int(mode) == HM.CUDNN_HEUR_MODE_FALLBACK:
                ranked = rank_subgraph(part, HM.CUDNN_HEUR_MODE_A, ctx, graph_key, lines)
            if explain is not None:
                explain.append(f" part {i}: {part.describe()}")
                explain.extend(lines)
            if not ranked:
                st, why = self.check_support(sub, ctx)
                raise NotSupportedError(why or f"{part.describe()}: no engine supports it",
                                        st if st != S.CUDNN_STATUS_SUCCESS else S.CUDNN_STATUS_NOT_SUPPORTED)
            chosen.append(ranked[0])
        return tuple(chosen)

    def build(self, sub, cfg, ctx):
        raise NotImplementedError("composite plans are built by ncudnn.engines.api.build_plan")


# ------------------------------------------------------------------------ the fallback partition

def _runs(part, ctx):
    """Does an engine other than the composite accept ``part``?"""
    return any(e.name != "composite" and support(e, part, ctx)[0] == S.CUDNN_STATUS_SUCCESS
               for e in registry.engines())


def _piece(graph, kind, nodes, anchor=None, epilogue=(), tail=None, meta=None):
    """A Subgraph of ``nodes`` whose ``materialize`` names its virtual tensors produced or read outside it
    (set before any engine is asked, since engines size and bind those from the workspace)."""
    sub = Subgraph(kind=kind, nodes=list(nodes), anchor=anchor, epilogue=list(epilogue), tail=tail,
                   meta=dict(meta or {}))
    inside = {id(n) for n in nodes}
    cons = graph.consumers()
    prod = {t.uid for n in nodes for t in n.outputs.values()}
    cross = set()
    for n in nodes:
        for t in n.tensors():
            if not t.is_virtual:
                continue
            if t.uid not in prod or any(id(c) not in inside for c in cons.get(t.uid, ())):
                cross.add(t.uid)
    sub.materialize = frozenset(cross)
    return sub


def _single(graph, node):
    return _piece(graph, "pointwise" if isinstance(node, Pointwise) else node.OP, [node])


def _split(graph, part, ctx, force=False):
    """Pieces some engine runs for one subgraph of the partition, in execution order. Greedy: the anchor
    with the longest epilogue prefix an engine fuses (shorter than the whole when ``force``), the rest of the
    epilogue as one pointwise group where an engine runs it, else node by node; the tail on its own; any other
    unsupported group node by node. A node no engine runs stays a piece of its own (the composite's
    check_support names it)."""
    if not force and _runs(part, ctx):
        return [part]
    if part.anchor is not None and part.kind != "softmax" and part.epilogue is not None:
        ep = list(part.epilogue)
        top = len(ep) - (1 if force and part.tail is None else 0)
        for k in range(top, -1, -1):
            head = _piece(graph, part.kind, [part.anchor] + ep[:k], part.anchor, ep[:k])
            if (k < len(ep) or part.tail is not None or not force) and _runs(head, ctx):
                break
        else:
            return [part] if force else [_piece(graph, part.kind, [part.anchor], part.anchor)] + \
                [_single(graph, n) for n in part.nodes[1:]]
        pieces = [head]
        rest = ep[k:]
        if rest:
            group = _piece(graph, "pointwise", rest)
            pieces += [group] if _runs(group, ctx) else [_single(graph, n) for n in rest]
        if part.tail is not None:
            pieces.append(_single(graph, part.tail))
        return pieces
    if len(part.nodes) > 1:
        pos = {id(n): i for i, n in enumerate(graph.nodes)}
        return [_single(graph, n) for n in sorted(part.nodes, key=lambda n: pos[id(n)])]
    return [part]


def fallback_problem(graph, sub, ctx):
    """The composite engine's problem for ``graph`` (whose partition is ``sub``: one Subgraph or a
    CompositeSub): every part an engine runs kept whole, the others split into pieces engines run. A graph
    of one fused anchor subgraph is split too (the unfused plan, listed after the fused one). None when
    the result is the graph's one subgraph itself (no second plan to offer)."""
    memo = graph.__dict__.setdefault("_fallback_problem", {})
    key = (_ctx_flags(ctx), registry.fingerprint())
    if key in memo:
        return memo[key]
    single = not isinstance(sub, CompositeSub)
    parts = [sub] if single else sub.parts
    pieces = []
    for p in parts:
        pieces += _split(graph, p, ctx)
    if single and pieces == [sub]:
        pieces = _split(graph, sub, ctx, force=sub.anchor is not None and len(sub.nodes) > 1)
    if single and len(pieces) == 1:
        memo[key] = None
        return None
    if not single and len(pieces) == len(parts) and all(a is b for a, b in zip(pieces, parts)):
        memo[key] = sub
        return sub
    cons = graph.consumers()
    mat = set()
    for p in pieces:
        for t in p.outputs(cons):
            if t.is_virtual:
                mat.add(t.uid)
    comp = CompositeSub(kind="composite", nodes=list(graph.nodes), parts=pieces, materialize=frozenset(mat))
    for p in pieces:
        uids = {t.uid for n in p.nodes for t in n.tensors()}
        p.materialize = frozenset(uids & mat)
    memo[key] = comp
    return comp
