"""``create_kernel_cache()``, ``kernel_cache.serialize()`` / ``deserialize()``: as cudnn-frontend's, a fresh
cache per call, a JSON string out, loading only into a fresh cache; a graph given a cache has dynamic
shapes on, records the engine config of each plan it builds, and a graph of the same structure (other
shapes, another process) built with the cache gets that config first and runs it (float64 oracle)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, random
from ncudnn.types import cudnnStatus_t as S

F = cudnn.data_type.FLOAT
HEUR = cudnn.heur_mode


def make(cache, n):
    g = cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F, kernel_cache=cache)
    X = g.tensor(name="X", dim=[3, n], stride=[n, 1])
    Y = g.elu(input=X, alpha=0.5)
    Y.set_output(True)
    return g, X, Y


def elu(x):
    x = x.astype(np.float64)
    return np.where(x > 0, x, 0.5 * (np.exp(x) - 1.0))


def plans(g):
    return [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]


def filled_cache():
    """A cache that recorded the heuristics' second plan for a (3, 8) graph: (cache, that plan's name)."""
    cache = cudnn.create_kernel_cache()
    g, X, Y = make(cache, 8)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([HEUR.A])
    assert g.get_execution_plan_count() >= 2
    g.check_support()
    g.build_plan_at_index(1)
    return cache, plans(g)[1]


def test_a_fresh_cache_per_call_and_dynamic_shapes_on():
    a, b = cudnn.create_kernel_cache(), cudnn.create_kernel_cache()
    assert a is not b and len(a) == 0
    g, _, _ = make(a, 8)
    assert g.kernel_cache is a and g.is_dynamic_shape_enabled
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        cudnn.pygraph(kernel_cache=object())
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "create_kernel_cache" in str(e.value)


def test_serialize_is_json_text_of_the_recorded_configs():
    cache, name = filled_cache()
    text = cache.serialize()
    assert isinstance(text, str)
    d = json.loads(text)
    assert len(d["entries"]) == 1 and len(d["entries"][0]["configs"]) == 1 and len(cache) == 1
    assert d["entries"][0]["configs"][0]["engine"] == name.split("(")[0]


def test_deserialize_only_into_a_fresh_cache():
    cache, _ = filled_cache()
    text = cache.serialize()
    fresh = cudnn.create_kernel_cache()
    fresh.deserialize(text)
    assert fresh.serialize() == text
    for used in (fresh, cache):   # loaded once, or used by a graph: refused, as cudnn-frontend refuses
        with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
            used.deserialize(text)
        assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "already initialized" in str(e.value)
    untouched = cudnn.create_kernel_cache()
    make(untouched, 8)[0].build([HEUR.A])
    with pytest.raises(cudnn.cudnnGraphBadParamError):
        untouched.deserialize(text)


@pytest.mark.parametrize("text,status", [
    ("not json", S.CUDNN_STATUS_BAD_PARAM),
    ("[1, 2]", S.CUDNN_STATUS_BAD_PARAM),
    ('{"schema": "other", "version": 1, "entries": []}', S.CUDNN_STATUS_BAD_PARAM),
    ('{"schema": "ncudnn.frontend.kernel_cache", "version": 99, "entries": []}',
     S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH),
    ('{"schema": "ncudnn.frontend.kernel_cache", "version": 1, "entries": [{"graph": 3}]}',
     S.CUDNN_STATUS_BAD_PARAM),
    (b"\xff\xfe", S.CUDNN_STATUS_BAD_PARAM),
    (42, S.CUDNN_STATUS_BAD_PARAM),
])
def test_malformed_text_is_refused_and_leaves_the_cache_fresh(text, status):
    cache = cudnn.create_kernel_cache()
    with pytest.raises(cudnn.CudnnError) as e:
        cache.deserialize(text)
    assert e.value.status == status and "kernel_cache.deserialize" in str(e.value)
    cache.deserialize(filled_cache()[0].serialize())   # still fresh


def test_same_structure_other_shape_gets_the_recorded_config_first(rng):
    cache, name = filled_cache()
    g, X, Y = make(cache, 13)
    g.build([HEUR.A])
    assert plans(g)[0] == name and g.get_selected_plan_index() == 0
    fresh, _, _ = make(None, 13)
    fresh.build([HEUR.A])
    assert plans(fresh)[0] != name   # without the cache the heuristics' first plan is another one
    assert sorted(plans(g)) == sorted(plans(fresh))   # the same candidates, reordered
    x = random(rng, [3, 13])
    yd = cuda.device_array((3, 13), np.float32)
    g.execute({X: cuda.to_device(x), Y: yd}, None)
    assert_close(yd.copy_to_host(), elu(x), "float32")


def test_a_record_this_ncudnn_cannot_rebuild_is_skipped():
    cache, _ = filled_cache()
    d = json.loads(cache.serialize())
    for c in d["entries"][0]["configs"]:
        c["engine"] = "an_engine_that_is_gone"
        c["config"]["engine"] = "an_engine_that_is_gone"
    stale = cudnn.create_kernel_cache()
    stale.deserialize(json.dumps(d))
    g, _, _ = make(stale, 8)
    g.build([HEUR.A])
    plain, _, _ = make(None, 8)
    plain.build([HEUR.A])
    assert plans(g) == plans(plain)


CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from numba import cuda
    import ncudnn as cudnn
    from ncudnn.testing import assert_close

    text, name, seed = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
    cache = cudnn.create_kernel_cache()
    cache.deserialize(text)
    F = cudnn.data_type.FLOAT
    g = cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F, kernel_cache=cache)
    X = g.tensor(name="X", dim=[3, 11], stride=[11, 1])
    Y = g.elu(input=X, alpha=0.5)
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    assert g.get_plan_name_at_index(g.get_selected_plan_index()) == name, g.get_plan_name_at_index(0)
    x = np.random.default_rng(seed).uniform(-1, 1, (3, 11)).astype(np.float32)
    yd = cuda.device_array((3, 11), np.float32)
    g.execute({X: cuda.to_device(x), Y: yd}, None)
    x64 = x.astype(np.float64)
    err = assert_close(yd.copy_to_host(), np.where(x64 > 0, x64, 0.5 * (np.exp(x64) - 1.0)), "float32")
    print("CHILD OK", err)
""")


def test_persists_across_processes(tmp_path, rng):
    cache, name = filled_cache()
    path = tmp_path / "kernel_cache.json"
    path.write_text(cache.serialize())
    del cache
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    seed = int(rng.integers(1 << 31))
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), name, str(seed)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0 and "CHILD OK" in r.stdout, r.stdout + r.stderr
