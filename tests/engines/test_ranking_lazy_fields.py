"""What a cold ranking leaves for later or takes a shorter way through, checked against the long way:
EngineConfigs from rank_subgraph fill their numerical notes and workspace size from the engine on
first read (equal to asking the engine, to the constructor's object, through replace / getstate);
``ranking.engines_for`` is registry.engines() filtered by kind and follows the registry; the written-out
loop over known costs ranks exactly as the general loop (taken when an explain list is passed);
``conv_common._plan`` is shared by the two implicit-GEMM engines and equals a fresh one."""
from dataclasses import replace

import pytest

from conv_rank_graphs import conv_graph, draw
from ncudnn.engines import api, ranking, registry
from ncudnn.engines.conv import common as conv_common
from ncudnn.types import cudnnBackendHeurMode_t as HM

A = HM.CUDNN_HEUR_MODE_A


def _fresh(rng, kind=None):
    prob = draw(rng)
    if kind is not None:
        prob = (kind,) + tuple(prob[1:])
    g = conv_graph(*prob)
    return g, api.problem(g)


def _rows(ecs):
    return [(e.engine.name, e.config.knobs, repr(e.predicted_time), e.workspace_size, e.numerical_notes,
             e.behavior_notes, e.why) for e in ecs]


def test_pending_fields_are_the_engines_answers(rng):
    for _ in range(4):
        g, sub = _fresh(rng)
        ctx = api.context()
        ecs = ranking.rank_subgraph(sub, A, ctx)
        assert ecs
        for ec in ecs:
            d = ec.__dict__
            assert list(d) == list(ranking._FIELDS)
            assert isinstance(d["workspace_size"], ranking._Pending) and d["numerical_notes"] is d["workspace_size"]
            ws = ec.workspace_size                       # one read fills both, the subgraph is dropped
            assert not isinstance(d["numerical_notes"], ranking._Pending)
            raw = ec.engine.workspace_size(sub, ec.config)
            assert ws == (ranking._round_up(raw) if raw else 0)
            assert ec.numerical_notes == tuple(ec.engine.config_notes(sub, ec.config))
            made = ranking.EngineConfig(ec.engine, ec.config, ec.numerical_notes, ec.behavior_notes, ws,
                                        ec.predicted_time, (), ec.why)
            assert made == ec and hash(made) == hash(ec) and repr(made) == repr(ec)


def test_pending_fields_through_replace_hash_and_getstate(rng):
    g, sub = _fresh(rng)
    ecs = ranking.rank_subgraph(sub, A, api.context())
    a, b, c = ecs[0], ecs[-1], ecs[len(ecs) // 2]
    r = replace(a, predicted_time=1.0)
    assert type(r.__dict__["workspace_size"]) is int and r.workspace_size == a.workspace_size
    assert hash(b) == hash(ranking.EngineConfig(b.engine, b.config, b.numerical_notes, b.behavior_notes,
                                                b.workspace_size, b.predicted_time, b.parts, b.why))
    st = c.__getstate__()
    assert not any(isinstance(v, ranking._Pending) for v in st.values()) and list(st) == list(ranking._FIELDS)
    assert ranking.EngineConfig.workspace_size == 0 and ranking.EngineConfig.numerical_notes == ()
    with pytest.raises(AttributeError):
        c.workspace_size = 5


def test_engines_for_is_the_filtered_registry_and_follows_it(monkeypatch):
    for kind in ("conv_fprop", "conv_wgrad", "matmul", "pointwise", "softmax", "no_such_kind"):
        want = tuple(e for e in registry.engines() if not e.kinds or kind in e.kinds)
        assert ranking.engines_for(kind) == want
    conv = ranking.engines_for("conv_fprop")
    fewer = {k: e for k, e in registry._ENGINES.items() if k != "conv_implicit_gemm"}
    monkeypatch.setattr(registry, "_ENGINES", fewer)
    got = ranking.engines_for("conv_fprop")
    assert [e.name for e in got] == [e.name for e in conv if e.name != "conv_implicit_gemm"]


def test_written_out_loop_ranks_as_the_general_one(rng):
    for kind in ("fprop", "dgrad", "wgrad", "fprop"):
        g, sub = _fresh(rng, kind)
        ctx = api.context()
        fast = _rows(ranking.rank_subgraph(sub, A, ctx))
        slow = _rows(ranking.rank_subgraph(sub, A, ctx, explain=[]))
        assert fast and fast == slow


def test_written_out_loop_drops_what_cannot_launch(monkeypatch, rng):
    ctx = api.context()
    eng = registry.by_name("conv_implicit_gemm")
    for _ in range(50):  # a random problem with at least two implicit-GEMM candidates (most have several)
        g, sub = _fresh(rng, "fprop")
        ranking.rank_subgraph(sub, A, ctx)
        table = eng.candidate_costs(sub, ctx.device)
        cands = eng.candidates(sub, ctx)
        if table is not None and len(cands) >= 2:
            break
    assert table is not None and len(cands) >= 2
    table[cands[0].knobs] = float("inf")
    table[cands[1].knobs] = float("nan")
    got = [e.config.knobs for e in ranking.rank_subgraph(sub, A, ctx) if e.engine is eng]
    assert cands[0].knobs not in got and cands[1].knobs not in got and len(got) == len(cands) - 2
    assert _rows(ranking.rank_subgraph(sub, A, ctx)) == _rows(ranking.rank_subgraph(sub, A, ctx, explain=[]))


def test_space_plan_shared_and_equal_to_a_fresh_one(rng):
    ig, pre = registry.by_name("conv_implicit_gemm"), registry.by_name("conv_implicit_precomp")
    for kind in ("fprop", "dgrad", "wgrad"):
        g, sub = _fresh(rng, kind)
        try:
            p = conv_common.conv_problem(sub)
        except Exception:
            continue
        a = ig._plan(p)
        assert pre._plan(p) is a
        p.__dict__.pop("_plans")
        assert pre._plan(p) == a
