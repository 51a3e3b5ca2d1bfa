"""Plan JSON round trips and version checks; autotuning, its on-disk store and reuse."""
import json

import numpy as np
import pytest

import ncudnn
from ncudnn.engines import api, autotune, device, heuristics
from ncudnn.engines.serialize import SCHEMA_VERSION, graph_from_json, graph_to_json
from ncudnn.errors import CudnnError
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnPointwiseMode_t as PM, cudnnStatus_t as S

import engine_graphs as G

DIMS = (2, 3, 2, 3)


def fresh_plan(dims=DIMS, pick=0):
    g = G.bias_relu_mul(dims)
    return api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[pick])


def test_graph_json_round_trip_keeps_the_key():
    g = G.bias_relu_mul(DIMS, finalize=False)
    g.nodes[1].relu_upper_clip = float("inf")
    g.nodes[1].relu_lower_clip_slope = 0.125
    g.finalize()
    text = json.dumps(graph_to_json(g))
    g2 = graph_from_json(json.loads(text))
    assert g2.key() == g.key()
    assert g2.nodes[1].relu_lower_clip_slope == 0.125 and g2.nodes[1].relu_upper_clip == float("inf")
    assert sorted(g2.tensors()) == sorted(g.tensors())


def test_plan_round_trip_executes_the_same_config(rng):
    plan = fresh_plan(pick=3)
    text = api.plan_to_json(plan)
    d = json.loads(text)
    assert d["schema_version"] == SCHEMA_VERSION and d["engine_config"]["engine"] == "pointwise_fused"
    plan2 = api.plan_from_json(text)
    assert plan2.engine_config.config == plan.engine_config.config
    assert plan2.workspace_size == plan.workspace_size
    x, b, y = (rng.uniform(-1, 1, s).astype(np.float32) for s in (DIMS, (1, 3, 1, 1), DIMS))
    out = G.poisoned(DIMS)
    api.execute(plan2, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out})
    assert_close(out.copy_to_host(), (x.astype(np.float64) + b) * np.maximum(y, 0), "float32")


def test_composite_plan_round_trip():
    g = G.two_pointwise_stages()
    plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])
    plan2 = api.plan_from_json(api.plan_to_json(plan))
    assert plan2.engine_config.ident() == plan.engine_config.ident()
    assert plan2.engine_names == ["pointwise_fused", "pointwise_fused"]


def test_version_mismatch_and_garbage():
    d = json.loads(api.plan_to_json(fresh_plan()))
    for bad in (dict(d, schema_version=SCHEMA_VERSION + 1), dict(d, schema="other")):
        with pytest.raises(CudnnError) as ei:
            api.plan_from_json(json.dumps(bad))
        assert ei.value.status == S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH
    tampered = json.loads(json.dumps(d))
    tampered["graph_key"] = "0" * 40
    with pytest.raises(CudnnError) as ei:
        api.plan_from_json(json.dumps(tampered))
    assert ei.value.status == S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH
    with pytest.raises(CudnnError) as ei:
        api.plan_from_json("{not json")
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM
    unknown = json.loads(json.dumps(d))
    unknown["engine_config"]["engine"] = "no_such_engine"
    with pytest.raises(CudnnError) as ei:
        api.plan_from_json(json.dumps(unknown))
    assert ei.value.status == S.CUDNN_STATUS_NOT_SUPPORTED


def test_autotune_times_stores_and_reuses(rng, cache_dir):
    dims = (1, 2, 2, 4)
    g = G.bias_relu_mul(dims)
    ecs = [ec for ec in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
           if ec.config.get(29) == 128][:2]  # BLOCK_SIZE 128: cheap in the simulator
    x, b, y = (rng.uniform(-1, 1, s).astype(np.float32) for s in (dims, (1, 2, 1, 1), dims))
    out = G.poisoned(dims)
    pack = {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out}
    res = api.autotune(g, ecs, pack, None, runs=2)
    assert len(res) == 2 and res[0][1] <= res[1][1]
    clock = "wall_clock" if ncudnn.SIMULATOR else "cuda_events"
    assert all(r.clock == clock and len(r.times_ms) == 2 and not r.reused for r in res), \
        [(r.clock, r.times_ms, r.reused) for r in res]
    assert_close(out.copy_to_host(), (x.astype(np.float64) + b) * np.maximum(y, 0), "float32")
    slug = device.current().slug  # NVIDIA_H200_nominal_sm90 in the simulator
    assert slug == "NVIDIA_H200_nominal_sm90" or not ncudnn.SIMULATOR, slug
    store = json.loads((cache_dir / "autotune" / f"{slug}.json").read_text())
    assert store["provenance"]["simulator"] is ncudnn.SIMULATOR and g.key() in store["graphs"]
    assert (cache_dir / "tuned" / f"{slug}.json").exists()
    # a "new process": stores reloaded from disk
    autotune.forget_stores()
    heuristics.forget_tables()
    g2 = G.bias_relu_mul(dims)
    again = api.autotune(g2, ecs, pack, None)
    assert all(r.reused for r in again) and [r[0].config for r in again] == [r[0].config for r in res]
    best = api.get_heuristics(g2, HM.CUDNN_HEUR_MODE_B)[0]
    assert best.config == res[0][0].config and best.why.startswith("autotuned")


def test_autotune_redirects_in_place_outputs(rng, cache_dir):
    # y = x * x + ... in place (out aliases x): repeated timing runs must not feed on their output
    dims = (2, 4)
    x_t, o_t = G.t(1, dims, name="x"), G.t(2, dims, name="out")
    from ncudnn.ir import OpGraph
    g = OpGraph([G.pw("sq", PM.CUDNN_POINTWISE_MUL, o_t, X=x_t, B=x_t)]).finalize()
    ec = [e for e in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A) if e.config.get(29) == 128][0]
    x = rng.uniform(1.1, 2, dims).astype(np.float32)
    buf = G.device(x)
    res = api.autotune(g, [ec], {1: buf, 2: buf}, None, runs=2, store=False)
    assert len(res) == 1
    np.testing.assert_array_equal(buf.copy_to_host(), x)  # never written: timed on a scratch copy
    api.execute(api.build_plan(g, ec), {1: buf, 2: buf})
    assert_close(buf.copy_to_host(), x.astype(np.float64) ** 2, "float32")


def test_progress_bar_only_on_a_terminal_after_a_second(capsys):
    quiet = autotune._Progress(4)
    quiet.tty = True
    quiet.update(1, "cfg")  # under a second: nothing
    bar = autotune._Progress(4)
    bar.tty, bar.t0 = True, bar.t0 - 2.0
    bar.update(2, "pointwise_fused(BLOCK_SIZE=128)")
    bar.close()
    err = capsys.readouterr().err
    assert err.count("ncudnn autotune") == 1 and "2/4" in err and "##########" in err and err.endswith("\n")
