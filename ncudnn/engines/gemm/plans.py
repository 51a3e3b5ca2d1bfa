"""The built plans of the GEMM-family engines (:class:`LaunchPlan`, :class:`BlockPlan`) and the trailing
reduction / genstats a GEMM subgraph may carry (:class:`Tail`: run after the GEMM by the best engine for it).
"""
import math

from ... import memory
from ...types import cudnnStatus_t
from ..base import SubPlan
from .dtypes import Reject
from .epilogue import alpha_of
from .launch import flat, runner
from .packing import pack_launches

__all__ = ["Tail", "tail_of", "compose", "LaunchPlan", "BlockPlan", "tail_build", "tail_workspace", "tail_time",
           "tail_notes"]

S = cudnnStatus_t

class Tail:
    """A trailing reduction / genstats (``sub.tail``) run right after the GEMM by the best engine for
    it as a subgraph of its own, reading the written output from memory (same stream, scratch
    shared: the workspace is the larger of the two)."""

    def __init__(self, sub, ec):
        self.sub, self.ec = sub, ec
        self.engine, self.config = ec.engine, ec.config
        self.workspace = self.engine.workspace_size(sub, ec.config)


def tail_of(sub, out, ctx=None):
    """The memoized :class:`Tail` of ``sub`` (None without a tail); raises Reject when the tail reads a
    tensor with no memory or no engine runs it."""
    if sub.tail is None:
        return None
    hit = sub.__dict__.get("_gemm_tail")
    if hit is None:
        try:
            hit = _make_tail(sub, out, ctx)
        except Reject as e:
            hit = e
        sub.__dict__["_gemm_tail"] = hit
    if isinstance(hit, Reject):
        raise hit
    return hit


def _make_tail(sub, out, ctx):
    from ...ir.partition import Subgraph
    from ...types import cudnnBackendHeurMode_t
    from ..api import context
    from ..ranking import rank_subgraph

    t = sub.tail
    if out.uid not in {x.uid for x in t.inputs.values()}:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{t.name}': does not read the output "
                     f"{out.label} of the fused chain")
    materialized = getattr(sub, "materialize", frozenset())
    if out.is_virtual and out.uid not in materialized:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{t.name}': its input {out.label} is "
                     "virtual: the GEMM epilogue cannot fuse the " + t.OP)
    tsub = Subgraph(kind=t.OP, nodes=[t])
    tsub.materialize = frozenset(u for u in materialized if u in {x.uid for x in t.tensors()})
    ranked = rank_subgraph(tsub, cudnnBackendHeurMode_t.CUDNN_HEUR_MODE_A, context(ctx))
    if not ranked:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{t.name}': no engine runs the trailing "
                     f"{t.OP}")
    return Tail(tsub, ranked[0])


def compose(runs):
    """One ``run(stream)`` calling each of ``runs`` in order."""
    if len(runs) == 1:
        return runs[0]

    def run(stream):
        for r in runs:
            r(stream)
    return run


# ------------------------------------------------------------------------------- plans

class LaunchPlan(SubPlan):
    """A SubPlan whose run is its :meth:`launches` (one cuLaunchKernel each): ``prepare`` runs them in
    order, ``execute`` (numba arrays) goes through ``prepare``."""

    def prepare(self, views, scratch):
        return runner(self.launches(views, scratch))

    def execute(self, buffers, workspace, stream):
        views = {u: (memory.as_view(a) if not isinstance(a, (int, float)) else a) for u, a in buffers.items()}
        ws = memory.as_view(workspace) if workspace is not None else None
        self.prepare(views, ws)(stream)


class BlockPlan(LaunchPlan):
    """A built GEMM / implicit-GEMM conv (plus split-K companion, plus the tail's own plan): ``prepare``
    packs the launches once per buffer set; ``run`` is one cuLaunchKernel per kernel. ``table``: the
    plan-owned IMPLICIT_PRECOMP_GEMM offsets (device array) or None."""

    def __init__(self, engine, sub, cfg, p, kern, bl, ws, table=None, tail=None):
        super().__init__(engine, sub, cfg, ws)
        self.p, self.kern, self.bl, self.table, self.tail = p, kern, bl, table, tail
        self._tail_uids = sorted({t.uid for t in tail.sub.nodes[0].tensors()}) if tail is not None else ()

    def _own(self, views, scratch):
        p = self.p
        views, pre = pack_launches(p.epi, views, scratch, self.workspace_size)
        packed = p.pack(self.kern, lambda t: flat(views[t.uid], t), self.table)
        return pre + list(self.bl.launches(packed, alpha_of(p.epi, views, p.alpha, self.sub), p.beta, scratch))

    def _tail_args(self, views, scratch):
        tv = {u: views[u] for u in self._tail_uids if u in views}
        return tv, (scratch if self.tail.workspace_size else None)

    def launches(self, views, scratch):
        out = list(self._own(views, scratch))
        if self.tail is not None:
            more = self.tail.launches(*self._tail_args(views, scratch))
            if more is None:
                return None
            out += list(more)
        return out

    def prepare(self, views, scratch):
        run = runner(self._own(views, scratch))
        if self.tail is None:
            return run
        return compose([run, self.tail.prepare(*self._tail_args(views, scratch))])


def tail_build(sub, out, ctx):
    """The tail's built SubPlan (None without a tail)."""
    t = tail_of(sub, out, ctx)
    return None if t is None else t.engine.build(t.sub, t.config, ctx)


def tail_workspace(sub, out):
    try:
        t = tail_of(sub, out)
    except Reject:
        return 0
    return 0 if t is None else t.workspace


def tail_time(sub, out):
    try:
        t = tail_of(sub, out)
    except Reject:
        return math.inf
    return 0.0 if t is None else t.ec.predicted_time


def tail_notes(sub, out):
    try:
        t = tail_of(sub, out)
    except Reject:
        return ()
    return () if t is None else tuple(t.ec.numerical_notes)
