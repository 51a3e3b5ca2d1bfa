"""Plan selection in pygraph: a plan barred by ``deselect_engines`` (given the very name
``get_plan_name_at_index`` returned, as cudnn-frontend users pass it back) is never built, selected or
run, also when it was built and selected before the filter; and engine indices are per graph (index 0
of a convolution graph is an engine that runs it), as in the backend. Outputs against the float64 oracle."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.reference import conv_fprop as ref_conv_fprop
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.types import cudnnStatus_t as S

SHAPE = size([2, 3, 4, 5], [8, 64, 56, 56])
NUMEL = int(np.prod(SHAPE))
GUARD = 7   # poisoned elements after the output view: must stay untouched


def relu_bias_graph():
    g = cudnn.pygraph(name="relu_bias", io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=SHAPE, stride=[SHAPE[1] * SHAPE[2] * SHAPE[3], SHAPE[2] * SHAPE[3], SHAPE[3], 1])
    B = g.tensor(name="B", dim=[1, SHAPE[1], 1, 1], stride=[SHAPE[1], 1, 1, 1])
    Y = g.relu(input=g.bias(input=X, bias=B))
    Y.set_output(True)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    return g, X, B, Y


@pytest.fixture
def data(rng):
    return random(rng, SHAPE), random(rng, [1, SHAPE[1], 1, 1])


def run(g, X, B, Y, x, b, index=None):
    """Execute (the selected plan, or plan ``index``) into a poisoned buffer; check the result and
    that the guard elements after the output view are unchanged."""
    buf = cuda.to_device(np.full(NUMEL + GUARD, poison_value(np.float32), np.float32))
    pack = {X: cuda.to_device(x), B: cuda.to_device(b), Y: buf[:NUMEL]}
    if index is None:
        g.execute(pack, None)
    else:
        g.execute_plan_at_index(pack, None, index)
    host = buf.copy_to_host()
    assert np.isnan(host[NUMEL:]).all(), "elements after the output view were written"
    assert_close(host[:NUMEL].reshape(SHAPE), np.maximum(x.astype(np.float64) + b, 0.0), "float32")


def test_deselected_plan_is_not_run_by_index(data):
    g, X, B, Y = relu_bias_graph()
    assert g.get_execution_plan_count() >= 2
    name0 = g.get_plan_name_at_index(0)
    g.deselect_engines([name0])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    assert g.get_selected_plan_index() != 0
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.execute_plan_at_index({}, None, 0)
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED and "deselect_engines" in str(e.value)
    for call in (lambda: g.build_plan_at_index(0), lambda: g.select_plan(0)):
        with pytest.raises(cudnn.cudnnGraphNotSupportedError):
            call()
    run(g, X, B, Y, *data)
    run(g, X, B, Y, *data, index=g.get_selected_plan_index())


def test_deselect_after_build_drops_the_selected_plan(data):
    g, X, B, Y = relu_bias_graph()
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    first = g.get_selected_plan_index()
    g.deselect_engines([g.get_plan_name_at_index(first)])
    assert g.get_selected_plan_index() != first
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    chosen = g.get_selected_plan_index()
    assert chosen is not None and chosen != first
    assert g.get_plan_name_at_index(chosen) != g.get_plan_name_at_index(first)
    run(g, X, B, Y, *data)


def test_one_name_as_a_string_bars_that_plan_only(data):
    g, X, B, Y = relu_bias_graph()
    n = g.get_execution_plan_count()
    g.deselect_engines(g.get_plan_name_at_index(0))   # one name, not a list: not its characters
    g.check_support()
    supported = [i for i in range(n) if int(g._support[i][0]) == 0]
    assert 0 not in supported and len(supported) == n - 1
    g.build_plans()
    run(g, X, B, Y, *data)


@pytest.mark.parametrize("bad", [5, [1, 2], None, [None]])
def test_deselect_engines_bad_argument_is_bad_param(bad):
    g, *_ = relu_bias_graph()
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.deselect_engines(bad)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM


@pytest.mark.parametrize("bad", [1.5, "10", float("inf"), None])
def test_deselect_workspace_bad_argument_is_bad_param(bad):
    g, *_ = relu_bias_graph()
    with pytest.raises(cudnn.cudnnGraphBadParamError):
        g.deselect_workspace_greater_than(bad)


def test_engine_index_0_of_a_conv_graph_runs_it(rng):
    """create_execution_plan(0) on a convolution graph: engine index 0 of that graph runs it, and each
    plan's get_engine_and_knobs_at_index gives back an index create_execution_plan accepts."""
    n, c, k, hw = 1, 2, 3, 5
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[n, c, hw, hw], stride=[c * hw * hw, hw * hw, hw, 1])
    W = g.tensor(name="W", dim=[k, c, 3, 3], stride=[c * 9, 9, 3, 1])
    Y = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Y.set_output(True)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plan(0)
    engine, knobs = g.get_engine_and_knobs_at_index(0)
    assert engine == 0
    offered = {kb.type for kb in g.get_knobs_for_engine(engine)}
    assert set(knobs) <= offered
    g.build_plans()
    x, w = random(rng, [n, c, hw, hw]), random(rng, [k, c, 3, 3])
    buf = cuda.to_device(np.full(n * k * hw * hw + GUARD, poison_value(np.float32), np.float32))
    g.execute({X: cuda.to_device(x), W: cuda.to_device(w), Y: buf[:n * k * hw * hw]}, None)
    host = buf.copy_to_host()
    assert np.isnan(host[n * k * hw * hw:]).all()
    assert_close(host[:n * k * hw * hw].reshape(n, k, hw, hw), ref_conv_fprop(x, w, pre_pad=1, post_pad=1),
                 "float32")
    with pytest.raises(cudnn.cudnnGraphBadParamError):
        g.create_execution_plan(g.get_engine_count())


# ------------------------------------------------------------------ execution edges of pygraph
def _built():
    g, X, B, Y = relu_bias_graph()
    g.check_support()
    g.build_plans()
    return g, X, B, Y


def test_execute_on_a_destroyed_handle_is_bad_param(data):
    g, X, B, Y = _built()
    h = cudnn.cudnnCreate()[1]
    cudnn.cudnnDestroy(h)
    y = cuda.to_device(np.full(SHAPE, poison_value(np.float32), np.float32))
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="destroyed"):
        g.execute({X: cuda.to_device(data[0]), B: cuda.to_device(data[1]), Y: y}, None, handle=h)
    assert np.isnan(y.copy_to_host()).all(), "the plan ran on a destroyed handle"


@pytest.mark.parametrize("exc", [OverflowError("int too large"), AttributeError("'float' has no 'ptr'")])
def test_kernel_failure_is_execution_failed(data, monkeypatch, exc):
    from ncudnn.engines import api

    g, X, B, Y = _built()

    def fail(*a, **k):
        raise exc

    monkeypatch.setattr(api, "execute", fail)
    with pytest.raises(cudnn.cudnnGraphExecutionFailedError) as e:
        g.execute({X: cuda.to_device(data[0]), B: cuda.to_device(data[1]), Y: cuda.device_array(SHAPE, np.float32)})
    assert e.value.status == S.CUDNN_STATUS_EXECUTION_FAILED and type(exc).__name__ in str(e.value)


@pytest.mark.sim_only
def test_fake_array_interface_pointer_is_bad_param(data):
    """A producer whose __cuda_array_interface__ names memory no simulated array holds (it used to be
    read as host memory: a segfault)."""
    class Fake:
        __cuda_array_interface__ = {"data": (0x10, False), "shape": tuple(SHAPE), "strides": None,
                                    "typestr": "<f4", "version": 3}

    g, X, B, Y = _built()
    y = cuda.to_device(np.full(SHAPE, poison_value(np.float32), np.float32))
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="not in any simulated device array"):
        g.execute({X: Fake(), B: cuda.to_device(data[1]), Y: y}, None)
    assert np.isnan(y.copy_to_host()).all()
