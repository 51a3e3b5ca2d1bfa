"""The composite engine: a graph that partitions into several subgraphs, each run on its own best
engine, in order; virtual tensors crossing subgraphs are materialized in the workspace.

Its "subgraph" is a :class:`CompositeSub` holding the partition. Its config has no knobs; the chosen
per-subgraph EngineConfigs travel in ``EngineConfig.parts`` (so a plan rebuilt from JSON, or picked
by autotuning, runs exactly the same parts).
"""
from dataclasses import dataclass, field
from typing import List

from ..ir.partition import Subgraph
from ..types import cudnnBackendHeurMode_t, cudnnStatus_t
from .base import OK, Config, Engine
from .registry import register

S = cudnnStatus_t
HM = cudnnBackendHeurMode_t


@dataclass
class CompositeSub(Subgraph):
    parts: List[Subgraph] = field(default_factory=list)
    materialize: frozenset = frozenset()

    def describe(self):
        return "[composite] " + " | ".join(p.describe() for p in self.parts)


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
        from .ranking import refusal, support
        from . import registry

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
                st, reasons = refusal(reasons)
                return st, "no engine runs " + "; ".join(w for _, w in reasons)
        return OK

    def default_config(self, sub):
        return Config(self.name, ())

    def candidates(self, sub, ctx):
        return [Config(self.name, ())]

    def choose_parts(self, sub, mode, ctx, graph_key=None, explain=None):
        """The best EngineConfig of each part under ``mode`` (FALLBACK: a fallback engine where one
        supports the part, else the model's best). Raises NotSupportedError naming the part."""
        from ..errors import NotSupportedError
        from .ranking import rank_subgraph

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

    # whole-graph hooks (the backend bridge calls these for graphs of several subgraphs)
    def check_graph(self, graph, subs=None, ctx=None):
        from . import api

        return api.check_support(graph, self.name, ctx)

    def build_graph(self, graph, cfg=None, ctx=None):
        from . import api

        return api.build_plan(graph, self.name, ctx)
