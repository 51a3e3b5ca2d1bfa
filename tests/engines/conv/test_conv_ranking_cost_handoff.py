"""Each config of a conv ranking is costed once: ``rank_subgraph`` reads the costs the implicit-GEMM
and Winograd engines computed while choosing their candidates (``Engine.candidate_costs``) instead of
asking ``cost`` again, and the ranking (engines, knobs, predicted times, workspace, notes, order) is
the one ``cost`` per config gives."""
import numpy as np
import pytest

from conv_rank_graphs import conv_graph
from ncudnn.engines import api, registry
from ncudnn.engines.base import Engine
from ncudnn.engines.winograd.common import WinogradEngineBase
from ncudnn.engines.conv.common import ConvEngineBase
from ncudnn.engines.gemm.mapping import GemmEngineBase
from ncudnn.engines.ranking import rank_subgraph
from ncudnn.types import cudnnBackendHeurMode_t as HM

#: the family bases of the engines over the tiled-GEMM machinery (gemm.tiled.TiledGemm) conv graphs reach
TILED = (ConvEngineBase, GemmEngineBase)
HANDOFF = ("conv_implicit_gemm", "conv_implicit_precomp", "conv_winograd_nonfused", "conv_winograd_fused")


def _rows(ecs):
    return [(e.engine.name, e.config.knobs, repr(e.predicted_time), e.workspace_size, e.numerical_notes,
             e.behavior_notes, e.why) for e in ecs]


def _problems(rng, n):
    out = [("fprop", 4, 128, 28, 128, 3, 1, True, "f32", True), ("fprop", 2, 64, 56, 64, 3, 1, False, "f16", True),
           ("dgrad", 3, 64, 14, 32, 3, 1, True, "f32", False)]
    for _ in range(n):
        kind = str(rng.choice(["fprop", "dgrad"]))
        out.append((kind, int(rng.integers(1, 65)), int(rng.choice([16, 32, 64, 96, 256])), int(rng.choice([7, 14, 28, 30])),
                    int(rng.choice([16, 64, 128])), 3, int(rng.choice([1, 1, 2])), bool(rng.integers(2)),
                    str(rng.choice(["f32", "f16", "bf16"])), kind == "fprop" and bool(rng.integers(2))))
    return out


def test_handoff_ranking_equals_cost_per_config(rng, monkeypatch):
    ctx = api.context()
    probs = _problems(rng, 12)
    fast = [_rows(rank_subgraph(api.problem(conv_graph(*p)), HM.CUDNN_HEUR_MODE_A, ctx)) for p in probs]
    monkeypatch.setattr(Engine, "candidate_costs", lambda self, sub, device: None)
    for tiled in TILED:
        monkeypatch.setattr(tiled, "candidate_costs", lambda self, sub, device: None)
    monkeypatch.setattr(WinogradEngineBase, "candidate_costs", lambda self, sub, device: None)
    slow = [_rows(rank_subgraph(api.problem(conv_graph(*p)), HM.CUDNN_HEUR_MODE_A, ctx)) for p in probs]
    assert fast == slow
    assert any(r[0] == "conv_winograd_nonfused" for rows in fast for r in rows)
    assert any(r[0] == "conv_implicit_precomp" for rows in fast for r in rows)


def test_ranking_does_not_ask_cost_again(monkeypatch):
    ctx = api.context()
    asked = []
    for name in HANDOFF:
        eng = registry.by_name(name)
        orig = type(eng).cost
        base = ConvEngineBase if isinstance(eng, ConvEngineBase) else WinogradEngineBase
        assert orig is base.cost
        # counted through the candidates' own path: wrap the class's cost, then restore the identity check
        monkeypatch.setattr(base, "cost", _counting(base.cost, asked, name))
        monkeypatch.setattr(base, "candidate_costs", _bypass(base.candidate_costs, base, orig))
    sub = api.problem(conv_graph("fprop", 5, 128, 28, 128, 3, 1, True, "f32", True))
    for name in HANDOFF:
        registry.by_name(name).candidates(sub, ctx)
    before = len(asked)
    out = rank_subgraph(sub, HM.CUDNN_HEUR_MODE_A, ctx)
    ranked = {e.engine.name for e in out}
    assert {"conv_implicit_gemm", "conv_winograd_nonfused"} <= ranked
    assert [a for a in asked[before:] if a in HANDOFF] == []


def _counting(fn, asked, name):
    def cost(self, sub, cfg, device):
        asked.append(self.name)
        return fn(self, sub, cfg, device)
    return cost


def _bypass(fn, base, orig):
    """candidate_costs as if ``cost`` were still the class's own (it checks the identity)."""
    def candidate_costs(self, sub, device):
        wrapped = base.cost
        base.cost = orig
        try:
            return fn(self, sub, device)
        finally:
            base.cost = wrapped
    return candidate_costs


def test_replaced_cost_is_asked(monkeypatch):
    """A cost replaced on the class (tests, experiments) is what ranks, not the table of the old one."""
    ctx = api.context()
    sub = api.problem(conv_graph("fprop", 6, 64, 28, 64, 3, 1, True, "f32", True))
    rank_subgraph(sub, HM.CUDNN_HEUR_MODE_A, ctx)          # fills the tables with the real costs
    scale = float(np.float64(1.0) + 1.0)
    origs = {tiled: tiled.cost for tiled in TILED}
    for tiled, orig in origs.items():
        monkeypatch.setattr(tiled, "cost", lambda self, s, c, d, orig=orig: orig(self, s, c, d) * scale)
    out = rank_subgraph(sub, HM.CUDNN_HEUR_MODE_A, ctx)
    for e in out:
        for tiled, orig in origs.items():
            if isinstance(e.engine, tiled):
                assert e.predicted_time == orig(e.engine, sub, e.config, ctx.device) * scale


def test_winograd_candidates_same_through_cost(rng, monkeypatch):
    """The Winograd engines' candidates, costed through their table in one loop, are those ``cost`` per
    config gives (the loop's path is off while ``cost`` is replaced)."""
    ctx = api.context()
    probs = _problems(rng, 8)
    names = ("conv_winograd_nonfused", "conv_winograd_fused")

    def cands():
        out = []
        for p in probs:
            sub = api.problem(conv_graph(*p))
            for n in names:
                eng = registry.by_name(n)
                cs = eng.candidates(sub, ctx)
                out.append([(c.knobs, repr(eng.cost(sub, c, ctx.device))) for c in cs])
        return out

    fast = cands()
    orig = WinogradEngineBase.cost
    monkeypatch.setattr(WinogradEngineBase, "cost", lambda self, s, c, d: orig(self, s, c, d))
    slow = cands()
    assert fast == slow
    assert sum(len(x) > 1 for x in fast) >= 4
