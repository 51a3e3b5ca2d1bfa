"""get_heuristics ranks with the cyclic garbage collector paused and gives its previous state back:
enabled after a ranking, after a ranking that raised, and still disabled when it was disabled; the
collector is off during the ranking itself. The support memo is per context flags, then engine."""
import gc

import pytest

from ncudnn.engines import api, ranking
from ncudnn.ir import OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM


def _graph(n):
    dims = (n, 3, 5, 7)
    x = TensorDesc(1, dims, packed_strides(dims), DT.CUDNN_DATA_FLOAT, name="x")
    y = TensorDesc(2, dims, packed_strides(dims), DT.CUDNN_DATA_FLOAT, name="y")
    return OpGraph([Pointwise("relu", {"X": x}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]).finalize()


@pytest.fixture
def gc_restored():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_collector_paused_during_ranking_and_restored(monkeypatch, gc_restored, rng):
    gc.enable()
    seen = []
    real = api.rank_subgraph

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)
    monkeypatch.setattr(api, "rank_subgraph", spy)
    out = api.get_heuristics(_graph(int(rng.integers(1000, 10 ** 6))), HM.CUDNN_HEUR_MODE_A)
    assert out and seen == [False] and gc.isenabled()


def test_collector_restored_when_ranking_raises(monkeypatch, gc_restored, rng):
    gc.enable()

    def boom(*a, **k):
        raise RuntimeError("ranking failed")
    monkeypatch.setattr(api, "rank_subgraph", boom)
    with pytest.raises(RuntimeError):
        api.get_heuristics(_graph(int(rng.integers(1000, 10 ** 6))), HM.CUDNN_HEUR_MODE_A)
    assert gc.isenabled()


def test_disabled_collector_stays_disabled(gc_restored, rng):
    gc.disable()
    assert api.get_heuristics(_graph(int(rng.integers(1000, 10 ** 6))), HM.CUDNN_HEUR_MODE_A)
    assert not gc.isenabled()


def test_support_memo_per_flags_then_engine(rng):
    g = _graph(int(rng.integers(1000, 10 ** 6)))
    sub = api.problem(g)
    ctx = api.context()
    api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    per = ranking.support_memo(sub, ctx)
    assert per and all(isinstance(k, str) for k in per)
    name = next(n for n, (st, _) in per.items() if int(st) == 0)
    from ncudnn.engines import registry
    assert ranking.support(registry.by_name(name), sub, ctx) is per[name]


def test_engine_config_is_the_dataclass_object(rng):
    """ranking.engine_config fills the frozen dataclass directly: the same fields, order, equality,
    hash and repr as the constructor's object."""
    from dataclasses import fields, replace

    g = _graph(int(rng.integers(1000, 10 ** 6)))
    for ec in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A):
        made = ranking.EngineConfig(ec.engine, ec.config, ec.numerical_notes, ec.behavior_notes, ec.workspace_size,
                                    ec.predicted_time, ec.parts, ec.why)
        assert made == ec and hash(made) == hash(ec) and repr(made) == repr(ec)
        assert list(made.__dict__) == list(ec.__dict__) == [f.name for f in fields(ranking.EngineConfig)]
        assert replace(ec, predicted_time=1.0).predicted_time == 1.0
        with pytest.raises(AttributeError):
            ec.workspace_size = 3
