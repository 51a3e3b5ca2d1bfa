"""Partitioning of the fusion patterns, and graphs of several subgraphs on the composite engine."""
import math

import numpy as np
import pytest
from numba import cuda

from ncudnn import memory
from ncudnn.engines import api, registry
from ncudnn.engines.base import Config, Engine, SubPlan
from ncudnn.errors import CudnnError
from ncudnn.ir import partition
from ncudnn.reference.pointwise import pointwise as ref_pw
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnPointwiseMode_t as PM, cudnnStatus_t as S

import engine_graphs as G


def kinds(g):
    subs, mat = partition(g)
    return [s.kind for s in subs], [[n.name for n in s.nodes] for s in subs], mat


def test_conv_bias_relu_is_one_anchor_with_epilogue():
    k, names, mat = kinds(G.conv_bias_relu())
    assert k == ["conv_fprop"] and names == [["conv", "bias", "relu"]] and not mat
    sub = partition(G.conv_bias_relu())[0][0]
    assert sub.anchor.name == "conv" and [n.name for n in sub.epilogue] == ["bias", "relu"]


def test_matmul_gelu_and_norm_pointwise():
    assert kinds(G.matmul_gelu())[:2] == (["matmul"], [["mm", "gelu"]])
    assert kinds(G.norm_relu())[:2] == (["norm_fwd"], [["ln", "relu"]])


def test_pointwise_dag_is_one_subgraph():
    k, names, mat = kinds(G.bias_relu_mul())
    assert k == ["pointwise"] and names == [["add", "relu", "mul"]] and not mat


def test_mixed_graph_splits_and_materializes():
    k, names, mat = kinds(G.relu_rowsum_scale())
    assert k == ["pointwise", "reduction", "pointwise"]
    assert mat == {10, 11}


def test_single_subgraph_engines_exclude_composite():
    g = G.bias_relu_mul()
    assert [e.name for e in api.supported_engines(g)] == ["pointwise_fused"]
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    assert ecs and all(ec.engine.name == "pointwise_fused" for ec in ecs)


def test_unsupported_anchor_names_the_node():
    g = G.conv_bias_relu()
    st, why = api.check_support(g, "pointwise_fused")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN and "conv" in why
    if not any(e.kinds and "conv_fprop" in e.kinds for e in registry.engines()):
        assert api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A) == []
        with pytest.raises(CudnnError) as ei:
            api.build_plan(g, "pointwise_fused")
        assert ei.value.status == S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN


@pytest.fixture
def no_reduction_engine():
    """The registry without its reduction engines, for the duration of one test."""
    registry._load()
    saved = registry._ENGINES
    registry._ENGINES = {k: e for k, e in saved.items() if "reduction" not in e.kinds}
    registry.generation += 1
    try:
        yield
    finally:
        registry._ENGINES = saved
        registry.generation += 1


def test_composite_without_an_engine_for_a_part_says_which(no_reduction_engine):
    g = G.relu_rowsum_scale()
    assert [e.name for e in api.supported_engines(g)] == []
    st, why = api.check_support(g, "composite")
    assert st != S.CUDNN_STATUS_SUCCESS and "reduction:sum" in why
    st, why = api.check_support(g, "pointwise_fused")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN and "3 subgraphs" in why


def test_composite_two_pointwise_stages_runs(rng):
    g = G.two_pointwise_stages()
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    assert [ec.engine.name for ec in ecs] == ["composite"]
    ec = ecs[0]
    assert [p.engine.name for p in ec.parts] == ["pointwise_fused", "pointwise_fused"]
    assert math.isclose(ec.predicted_time, sum(p.predicted_time for p in ec.parts))
    plan = api.build_plan(g, ec)
    assert plan.workspace_size == 0 and plan.engine_names == ["pointwise_fused"] * 2
    x, z = G.random_pair(rng, (2, 3, 4))
    y1, out = G.poisoned((2, 3, 4)), G.poisoned((2, 3, 4))
    api.execute(plan, {1: G.device(x), 2: y1, 3: G.device(z), 4: out})
    assert_close(y1.copy_to_host(), np.exp(x.astype(np.float64)), "float32")
    assert_close(out.copy_to_host(), np.exp(x.astype(np.float64)) * z, "float32")


# ---------------------------------------------------------------- a test-only reduction engine

@cuda.jit
def _rowsum_kernel(x, partial, y):
    r = cuda.grid(1)
    if r < x.shape[0]:
        acc = np.float32(0.0)
        for c in range(x.shape[1]):
            acc += x[r, c]
        partial[r] = acc
        y[r, 0] = partial[r]


class _RowsumPlan(SubPlan):
    def execute(self, buffers, workspace, stream):
        node = self.sub.nodes[0]
        x, y = buffers[node.inputs["X"].uid], buffers[node.outputs["Y"].uid]
        partial = workspace[: 4 * x.shape[0]].view(np.float32)
        _rowsum_kernel[1, 32, 0](x, partial, y)


class _RowsumEngine(Engine):
    """Sums 2-d float32 rows, with a scratch buffer of one float per row (tests the plumbing)."""

    name = "test_rowsum"
    kinds = ("reduction",)

    def workspace_size(self, sub, cfg):
        return 4 * sub.nodes[0].inputs["X"].dims[0]

    def build(self, sub, cfg, ctx):
        return _RowsumPlan(self, sub, cfg, self.workspace_size(sub, cfg))


@pytest.fixture
def rowsum_engine():
    registry._load()
    registry.ENGINE_ORDER.append(_RowsumEngine.name)
    registry.register(_RowsumEngine)
    yield registry.by_name(_RowsumEngine.name)
    registry._ENGINES.pop(_RowsumEngine.name, None)
    registry.ENGINE_ORDER.remove(_RowsumEngine.name)
    registry.generation += 1  # as registration does: rankings remembered with the test engine are stale


def test_composite_materializes_intermediates_in_the_workspace(rng, rowsum_engine):
    g = G.relu_rowsum_scale(rows=3, cols=5)
    ranked = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0]
    assert ranked.engine.name == "composite"
    assert [p.engine.name for p in ranked.parts][::2] == ["pointwise_fused", "pointwise_fused"]
    assert "reduction" in ranked.parts[1].engine.kinds
    # the test engine's scratch buffer, given as the middle part (a registered engine may outrank it)
    ec = api.engine_config_from_json(
        {"engine": "composite", "parts": [ranked.parts[0].to_json(),
                                          {"engine": "test_rowsum", "config": Config("test_rowsum", ()).to_json()},
                                          ranked.parts[2].to_json()]}, g)
    assert [p.engine.name for p in ec.parts] == ["pointwise_fused", "test_rowsum", "pointwise_fused"]
    assert api.check_support(g, ec) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, ec)
    # relu_out (3x5 f32 -> 256 B), rowsum (3 f32 -> 256 B), scratch (12 B -> 256 B)
    assert plan.workspace_size == ec.workspace_size == 3 * 256
    x = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    s = rng.uniform(0.5, 2, (3, 1)).astype(np.float32)
    out = G.poisoned((3, 1))
    pack = {1: G.device(x), 2: G.device(s), 3: out}
    with pytest.raises(CudnnError) as ei:
        api.execute(plan, pack, memory.allocate(plan.workspace_size - 1))
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    with pytest.raises(CudnnError) as ei:
        api.execute(plan, pack, None)
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER
    assert np.isnan(out.copy_to_host()).all()  # nothing ran
    ws = memory.allocate(plan.workspace_size)
    api.execute(plan, pack, ws)
    ref = ref_pw(PM.CUDNN_POINTWISE_RELU_FWD, x).sum(axis=1, keepdims=True) * s
    assert_close(out.copy_to_host(), ref, "float32")
    # the same address, now said to hold fewer bytes: checked again, not served from the binding
    shrunk = memory.DeviceView(ws.ptr, plan.workspace_size - 256, np.uint8, (plan.workspace_size - 256,), (1,),
                               ws.owner, ws._region)
    with pytest.raises(CudnnError) as ei:
        api.execute(plan, pack, shrunk)
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT


def test_composite_check_names_a_bad_part_config(rowsum_engine):
    g = G.relu_rowsum_scale()
    ec = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0]
    bad = ec.parts[0].config.with_knob(ec.parts[0].config.knobs[0][0], 3)
    broken = api.engine_config_from_json(
        {"engine": "composite", "parts": [{"engine": "pointwise_fused", "config": bad.to_json()}]
         + [p.to_json() for p in ec.parts[1:]]}, g)
    st, why = api.check_support(g, broken)
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "pointwise:relu" in why


def test_refusals_are_summarized_by_the_engines_that_accept_the_pattern():
    from ncudnn.engines.ranking import refusal

    P, L, T = (S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
               S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    assert refusal([(P, "a"), (L, "b"), (P, "c")]) == (L, [(L, "b"), (P, "a"), (P, "c")])
    assert refusal([(P, "a"), (L, "b"), (T, "c")])[0] == S.CUDNN_STATUS_NOT_SUPPORTED
    assert refusal([(P, "a"), (P, "b")]) == (P, [(P, "a"), (P, "b")])


def test_composite_status_is_the_refusal_of_the_engines_for_the_part():
    """A pointwise part with a reordered tensor: only pointwise_fused accepts the pattern, and refuses the
    layout; the composite engine passes that status on (every other engine refuses the pattern)."""
    from ncudnn.engines.composite import make_composite
    from ncudnn.types import cudnnBackendTensorReordering_t as R

    g = G.bias_relu_mul(finalize=False)
    g.nodes[0].inputs["X"].reordering = R.CUDNN_TENSOR_REORDERING_F16x16
    g.finalize()
    sub = api.problem(g)
    st, why = registry.by_name("composite").check_support(make_composite(g, [sub], ()), api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and why.startswith("no engine runs") and "reorder" in why
