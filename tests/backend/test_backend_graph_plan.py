"""Operation graph, engine, engine config, heuristics, execution plan, variant pack, kernel cache and
cudnnBackendExecute: the reference's use cases (grouped convolution graph, engine config, plan +
variant pack execution) and every documented failure, with exact statuses."""
import numpy as np
import pytest
from numba import cuda

from backend_build import (A, D, S, T, conv_desc, conv_op, create, expect, finalize, get, graph, handle, make,
                           ok, pointwise_desc, pointwise_op, set_attr, tensor)
from ncudnn.backend import (cudnnBackendExecute, cudnnBackendGetAttribute, cudnnBackendPopulateCudaGraph,
                            cudnnBackendUpdateCudaGraph, cudnnGetExecutionPlanWorkspaceSize)
from ncudnn.engines import registry
from ncudnn.errors import CUDNN_STATUS_CATEGORY, peek_last_error
from ncudnn.reference import pointwise as ref_pointwise
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.types import cudnnBackendHeurMode_t as H
from ncudnn.types import cudnnBackendKnobType_t as K
from ncudnn.types import cudnnPointwiseMode_t as P

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
SHAPE = size([2, 3, 4, 5], [8, 64, 56, 56])
BIAS = [1, SHAPE[1], 1, 1]
UX, UB, UT, UY = 101, 102, 103, 104


def grouped_conv_graph(n=1, g=2, c=3, k=4, d=3, h=5, w=5):
    """The reference's use case: a single grouped 3-D convolution forward, 6-d tensors."""
    x = tensor(ord("x"), [n, g, c, d, h, w], alignment=4)
    wt = tensor(ord("w"), [g, k, c, 1, 3, 3], alignment=4)
    y = tensor(ord("y"), [n, g, k, d, h - 2, w - 2], alignment=4)
    fprop = conv_op(D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, x, wt, y,
                    conv_desc(3, mode=0), alpha=1.0, beta=0.5)
    return graph([fprop])


def bias_relu_graph():
    """Y = relu(X + B): two pointwise nodes joined by a virtual tensor."""
    x, b = tensor(UX, SHAPE), tensor(UB, BIAS)
    t, y = tensor(UT, SHAPE, virtual=True), tensor(UY, SHAPE)
    add = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ADD), x=x, b=b, y=t)
    relu = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_RELU_FWD), x=t, y=y)
    return graph([add, relu])


def engine(g, index, fin=True):
    return make(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR, {A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH: (DESC, g),
                                                    A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX: (T.CUDNN_TYPE_INT64, index)}, fin)


def engine_config(eng, choices=(), fin=True):
    attrs = {A.CUDNN_ATTR_ENGINECFG_ENGINE: (DESC, eng)}
    if choices:
        attrs[A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES] = (DESC, [make(D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, {
            A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE: (T.CUDNN_TYPE_KNOB_TYPE, k),
            A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE: (T.CUDNN_TYPE_INT64, v)}) for k, v in choices])
    return make(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, attrs, fin)


def heuristics(g, mode=H.CUDNN_HEUR_MODE_A):
    return make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, g),
                                                        A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, mode)})


def plan(cfg, fin=True, cache=None):
    attrs = {A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
             A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfg)}
    if cache is not None:
        attrs[A.CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE] = (DESC, cache)
    return make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, attrs, fin)


def variant_pack(buffers, workspace=None, fin=True):
    uids, ptrs = list(buffers), list(buffers.values())
    return make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, uids),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, ptrs),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, workspace)}, fin)


@pytest.fixture
def data(rng):
    x, b = random(rng, SHAPE), random(rng, BIAS)
    y = cuda.to_device(np.full(SHAPE, poison_value(np.float32), np.float32))
    return x, b, y, {UX: cuda.to_device(x), UB: cuda.to_device(b), UY: y}


def oracle(x, b):
    return ref_pointwise(P.CUDNN_POINTWISE_RELU_FWD, x.astype(np.float64) + b)


# ------------------------------------------------------------------------------ operation graph
def test_grouped_conv_graph_lowers_to_the_ir():
    g = grouped_conv_graph()
    ir = g.state["graph"]
    node = ir.nodes[0]
    assert node.OP == "conv_fprop" and (node.alpha, node.beta) == (1.0, 0.5)
    assert node.inputs["X"].dims == (1, 6, 3, 5, 5) and node.inputs["X"].strides == (450, 75, 25, 5, 1)
    assert node.inputs["W"].dims == (8, 3, 1, 3, 3)
    assert node.outputs["Y"].dims == (1, 8, 3, 3, 3) and node.groups == 2
    assert get(g, A.CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, T.CUDNN_TYPE_INT64) == \
        (1, [registry.global_count()])
    assert get(g, A.CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, T.CUDNN_TYPE_BOOLEAN) == (1, [False])
    count, ops = get(g, A.CUDNN_ATTR_OPERATIONGRAPH_OPS, DESC)
    assert count == 1 and ops[0].type == D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR


def test_operation_graph_failures():
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ABS), x=tensor(1, [4]), y=tensor(2, [4]), fin=False)
    expect(finalize(graph([op], fin=False)), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATIONGRAPH_OPS", "not finalized")
    ok(finalize(op))
    from ncudnn.handle import cudnnCreate, cudnnDestroy
    h = ok(cudnnCreate())
    g = make(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, {A.CUDNN_ATTR_OPERATIONGRAPH_OPS: (DESC, [op]),
                                                         A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE: (T.CUDNN_TYPE_HANDLE, h)},
             fin=False)
    ok(cudnnDestroy(h))
    expect(finalize(g), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATIONGRAPH_HANDLE", "destroyed")
    expect(set_attr(g, A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE, T.CUDNN_TYPE_HANDLE, h), S.CUDNN_STATUS_BAD_PARAM,
           "destroyed")
    expect(set_attr(g, A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE, T.CUDNN_TYPE_HANDLE, [object()]), S.CUDNN_STATUS_BAD_PARAM,
           "cudnnHandle_t")
    expect(finalize(graph([op, op], fin=False)), S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, "listed twice")
    other = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ABS), x=tensor(1, [5]), y=tensor(3, [5]))
    expect(finalize(graph([op, other], fin=False)), S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, "uid 1")
    dangling = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ABS), x=tensor(1, [4]), y=tensor(9, [4], virtual=True))
    expect(finalize(graph([dangling], fin=False)), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATIONGRAPH_OPS",
           "dangling")
    expect(set_attr(create(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR), A.CUDNN_ATTR_OPERATIONGRAPH_OPS, DESC,
                    tensor(5, [1])), S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "CUDNN_BACKEND_TENSOR_DESCRIPTOR")


# ------------------------------------------------------------------------- engine, config, heur
def test_engine_failures():
    g = bias_relu_graph()
    expect(finalize(engine(g, registry.global_count(), fin=False)), S.CUDNN_STATUS_NOT_SUPPORTED,
           "CUDNN_ATTR_ENGINE_GLOBAL_INDEX", "outside")
    expect(finalize(engine(g, -1, fin=False)), S.CUDNN_STATUS_NOT_SUPPORTED, "outside")
    unfinalized = graph([pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ABS), x=tensor(1, [4]), y=tensor(2, [4]))],
                        fin=False)
    expect(finalize(engine(unfinalized, 0, fin=False)), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_ENGINE_OPERATION_GRAPH",
           "not finalized")
    conv = grouped_conv_graph()  # indices are per graph: the engines that run it first, then pointwise_fused
    assert finalize(engine(conv, 0, fin=False))[0] == S.CUDNN_STATUS_SUCCESS
    pw = conv.state["engines"].index(registry.by_name("pointwise_fused"))
    msg = expect(finalize(engine(conv, pw, fin=False)), S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                 "CUDNN_ATTR_ENGINE_GLOBAL_INDEX", "pointwise_fused")
    assert "conv_fprop" in msg


def test_reference_use_cases_grouped_conv_engine_config_plan_execute(rng):
    """The reference's use cases in a row, at simulator size: a grouped 3-D convolution graph (6-d
    tensors, CUDNN_CONVOLUTION mode, alpha 1, beta 0.5), an engine config of one engine and no knobs
    (the first global index that supports the graph), its workspace size, a plan, a variant pack, execute."""
    dims = dict(n=1, g=2, c=2, k=2, d=2, h=4, w=4)
    g = grouped_conv_graph(**dims)
    eng = None
    for index in range(registry.global_count()):
        candidate = engine(g, index, fin=False)
        status = finalize(candidate)[0]
        if status == S.CUDNN_STATUS_SUCCESS:
            eng = candidate
            break
        assert CUDNN_STATUS_CATEGORY(status) == S.CUDNN_STATUS_NOT_SUPPORTED, peek_last_error()
    if eng is None:
        pytest.skip("no engine runs a grouped 3-D convolution yet (every engine index: NOT_SUPPORTED)")
    cfg = engine_config(eng)
    ws = get(cfg, A.CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64)[1][0]
    p = plan(cfg)
    assert get(p, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64)[1] == [ws]
    n, gr, c, k, d, h, w = (dims[x] for x in "ngckdhw")
    x, wt = random(rng, [n, gr, c, d, h, w]), random(rng, [gr, k, c, 1, 3, 3])
    prior = random(rng, [n, gr, k, d, h - 2, w - 2])
    y = cuda.to_device(prior)
    workspace = cuda.device_array(ws, np.uint8) if ws else None
    pack = variant_pack({ord("x"): cuda.to_device(x), ord("w"): cuda.to_device(wt), ord("y"): y}, workspace)
    ok(cudnnBackendExecute(handle(), p, pack))
    from ncudnn.reference import conv_fprop
    conv = conv_fprop(x.reshape(n, gr * c, d, h, w), wt.reshape(gr * k, c, 1, 3, 3), groups=gr,
                      cross_correlation=False)
    assert_close(y.copy_to_host(), conv.reshape(prior.shape) + 0.5 * prior.astype(np.float64), "float32")


def test_engine_config_knobs_and_notes():
    g = bias_relu_graph()
    eng = engine(g, registry.by_name("pointwise_fused").global_index)
    count, infos = get(eng, A.CUDNN_ATTR_ENGINE_KNOB_INFO, DESC)
    assert count == len(infos) == 3  # ARRAY_SIZE_PER_THREAD, BLOCK_SIZE, CTA_COUNT (grid cap in waves)
    knobs = {get(i, A.CUDNN_ATTR_KNOB_INFO_TYPE, T.CUDNN_TYPE_KNOB_TYPE)[1][0]: i for i in infos}
    assert K.CUDNN_KNOB_TYPE_CTA_COUNT in knobs
    block = knobs[K.CUDNN_KNOB_TYPE_BLOCK_SIZE]
    lo = get(block, A.CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, T.CUDNN_TYPE_INT64)[1][0]
    hi = get(block, A.CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, T.CUDNN_TYPE_INT64)[1][0]
    step = get(block, A.CUDNN_ATTR_KNOB_INFO_STRIDE, T.CUDNN_TYPE_INT64)[1][0]
    assert (lo, hi, step) == (128, 1024, 128)
    assert get(eng, A.CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.CUDNN_TYPE_BEHAVIOR_NOTE)[0] >= 0
    assert get(eng, A.CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, T.CUDNN_TYPE_NUMERICAL_NOTE)[0] >= 0
    cfg = engine_config(eng, [(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 512)])
    assert get(cfg, A.CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64) == (1, [0])
    assert cfg.state["ec"].config.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE) == 512
    mine = create(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR)
    count, out = get(cfg, A.CUDNN_ATTR_ENGINECFG_ENGINE, DESC, 1, [mine])
    assert out == [mine] and get(mine, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, T.CUDNN_TYPE_INT64)[1] == [eng.value(
        A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX)]
    expect(finalize(engine_config(eng, [(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 100)], fin=False)),
           S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_ATTR_ENGINECFG_KNOB_CHOICES", "CUDNN_KNOB_TYPE_BLOCK_SIZE = 100")
    expect(finalize(engine_config(eng, [(K.CUDNN_KNOB_TYPE_SPLIT_K, 1)], fin=False)), S.CUDNN_STATUS_NOT_SUPPORTED,
           "has no knob CUDNN_KNOB_TYPE_SPLIT_K")
    expect(finalize(engine_config(eng, [(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 256), (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 512)],
                                  fin=False)), S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, "chosen twice")
    expect(finalize(engine_config(eng, [(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 384)], fin=False)),
           S.CUDNN_STATUS_NOT_SUPPORTED, "power of 2")
    expect(cudnnBackendGetAttribute(cfg, A.CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO, DESC, 1),
           S.CUDNN_STATUS_NOT_SUPPORTED, "placeholder")


def test_heuristics_results_are_finalized_engine_configs():
    g = bias_relu_graph()
    for mode in (H.CUDNN_HEUR_MODE_A, H.CUDNN_HEUR_MODE_INSTANT, H.CUDNN_HEUR_MODE_B, H.CUDNN_HEUR_MODE_FALLBACK):
        h = heuristics(g, mode)
        count, _ = get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 0)
        assert count >= 1
        cfgs = [create(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) for _ in range(count)]
        n, out = get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, count, cfgs)
        assert n == count and out == cfgs and all(c.finalized for c in cfgs)
        eng = get(cfgs[0], A.CUDNN_ATTR_ENGINECFG_ENGINE, DESC)[1][0]
        assert get(eng, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, T.CUDNN_TYPE_INT64)[1][0] < registry.global_count()
    expect(cudnnBackendGetAttribute(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1,
                                    [create(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR)]),
           S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "CUDNN_BACKEND_ENGINECFG_DESCRIPTOR")


# --------------------------------------------------------------------------- plan and execute
def test_plan_and_variant_pack_execution_use_case(data, rng):
    x, b, y, buffers = data
    g = bias_relu_graph()
    cfg = get(heuristics(g), A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)[1][0]
    p = plan(cfg)
    ws = get(p, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64)[1][0]
    assert ok(cudnnGetExecutionPlanWorkspaceSize(handle(), p, None)) == ws
    workspace = cuda.device_array(max(ws, 1), np.uint8) if ws else None
    pack = variant_pack(buffers, workspace)
    ok(cudnnBackendExecute(handle(), p, pack))
    assert_close(y.copy_to_host(), oracle(x, b), "float32")
    x2 = random(rng, SHAPE)  # same pack, new data in the same buffers: executed again, not cached
    buffers[UX].copy_to_device(x2)
    y.copy_to_device(np.full(SHAPE, poison_value(np.float32), np.float32))
    ok(cudnnBackendExecute(handle(), p, pack))
    assert_close(y.copy_to_host(), oracle(x2, b), "float32")


def test_plan_json_round_trip_executes(data):
    x, b, y, buffers = data
    g = bias_relu_graph()
    p = plan(engine_config(engine(g, registry.by_name("pointwise_fused").global_index)))
    n, text = get(p, A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, T.CUDNN_TYPE_CHAR, 1 << 20)
    assert n == len(text) + 1 and text.startswith("{")
    q = make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
        A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION: (T.CUDNN_TYPE_CHAR, text)})
    ok(cudnnBackendExecute(handle(), q, variant_pack(buffers)))
    assert_close(y.copy_to_host(), oracle(x, b), "float32")
    import json
    broken = json.loads(text)
    broken.pop("graph", None)
    for text, status in (("{}", S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH), ("not json", S.CUDNN_STATUS_BAD_PARAM),
                         ("[1]", S.CUDNN_STATUS_BAD_PARAM), (json.dumps(broken), S.CUDNN_STATUS_BAD_PARAM)):
        bad = make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
            A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
            A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION: (T.CUDNN_TYPE_CHAR, text)}, fin=False)
        expect(finalize(bad), status, "CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION")
    expect(finalize(make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle())}, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
        "CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG")


def test_execute_failures(data):
    x, b, y, buffers = data
    g = bias_relu_graph()
    p = plan(engine_config(engine(g, registry.by_name("pointwise_fused").global_index)))
    pack = variant_pack(buffers)
    expect(cudnnBackendExecute(handle(), plan(engine_config(engine(g, 0)), fin=False), pack),
           S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "executionPlan")
    expect(cudnnBackendExecute(handle(), pack, p), S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "executionPlan")
    expect(cudnnBackendExecute(None, p, pack), S.CUDNN_STATUS_BAD_PARAM, "NULL")
    missing = variant_pack({UX: buffers[UX], UB: buffers[UB]})
    expect(cudnnBackendExecute(handle(), p, missing), S.CUDNN_STATUS_BAD_PARAM, f"uid {UY}")
    extra = variant_pack({**buffers, UT: buffers[UY]})
    expect(cudnnBackendExecute(handle(), p, extra), S.CUDNN_STATUS_BAD_PARAM, f"[{UT}]")
    small = variant_pack({**buffers, UY: cuda.device_array(3, np.float32)})
    expect(cudnnBackendExecute(handle(), p, small), S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
           "CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR")
    expect(cudnnBackendPopulateCudaGraph(handle(), p, pack, None), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudaGraph")
    expect(cudnnBackendPopulateCudaGraph(handle(), pack, pack, 1), S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)


@pytest.mark.sim_only
def test_native_cuda_graphs_are_refused_in_the_simulator(data):
    x, b, y, buffers = data
    p = plan(engine_config(engine(bias_relu_graph(), registry.by_name("pointwise_fused").global_index)))
    pack = variant_pack(buffers)
    expect(cudnnBackendPopulateCudaGraph(handle(), p, pack, 1), S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API,
           "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR", "simulator")
    status = cudnnBackendUpdateCudaGraph(handle(), p, pack, 1)[0]  # never populated
    assert status == S.CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH and "populated" in peek_last_error()


@pytest.mark.gpu
def test_populate_and_update_a_native_cuda_graph(data, rng):
    """The reference's CUDA graph use case: populate, instantiate, launch; update with a new pack, relaunch."""
    from cuda.bindings import driver
    x, b, y, buffers = data
    p = plan(engine_config(engine(bias_relu_graph(), registry.by_name("pointwise_fused").global_index)))
    err, cg = driver.cuGraphCreate(0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    ok(cudnnBackendPopulateCudaGraph(handle(), p, variant_pack(buffers), cg))
    assert np.isnan(y.copy_to_host()).all(), "populating must not run the kernels"
    err, _, n = driver.cuGraphGetNodes(cg, 0)
    assert err == driver.CUresult.CUDA_SUCCESS and n >= 1, (err, n)
    err, exe = driver.cuGraphInstantiate(cg, 0)
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphInstantiate: {err}"
    err = driver.cuGraphLaunch(exe, 0)[0]
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphLaunch: {err}"
    cuda.synchronize()
    assert_close(y.copy_to_host(), oracle(x, b), "float32")
    x2 = random(rng, SHAPE)
    y2 = cuda.to_device(np.full(SHAPE, poison_value(np.float32), np.float32))
    x2d = cuda.to_device(x2)  # the caller keeps the graph's buffers alive until it has run
    ok(cudnnBackendUpdateCudaGraph(handle(), p, variant_pack({**buffers, UX: x2d, UY: y2}), cg))
    err, exe2 = driver.cuGraphInstantiate(cg, 0)
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphInstantiate after update: {err}"
    err = driver.cuGraphLaunch(exe2, 0)[0]
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphLaunch after update: {err}"
    cuda.synchronize()
    assert_close(y2.copy_to_host(), oracle(x2, b), "float32")


def test_variant_pack_checks():
    expect(finalize(make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, [1, 2]),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, [0]),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, 0)}, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
        "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS", "counts must match")
    expect(finalize(make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, [1, 1]),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, [0, 0]),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, 0)}, fin=False)),
        S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, "[1]")
    vp = create(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    expect(set_attr(vp, A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.CUDNN_TYPE_VOID_PTR, ["abc"]),
           S.CUDNN_STATUS_BAD_PARAM, "not a pointer")
    expect(set_attr(vp, A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.CUDNN_TYPE_VOID_PTR, [object()]),
           S.CUDNN_STATUS_BAD_PARAM, "not device memory")
    expect(set_attr(vp, A.CUDNN_ATTR_VARIANT_PACK_INTERMEDIATES, T.CUDNN_TYPE_VOID_PTR, [0]),
           S.CUDNN_STATUS_NOT_SUPPORTED, "placeholder")
    ok(set_attr(vp, A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.CUDNN_TYPE_INT64, []))
    ok(set_attr(vp, A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.CUDNN_TYPE_VOID_PTR, []))
    ok(set_attr(vp, A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE, T.CUDNN_TYPE_VOID_PTR, None))
    ok(finalize(vp))
    assert get(vp, A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.CUDNN_TYPE_INT64) == (0, [])


def test_kernel_cache():
    g = bias_relu_graph()
    cache = make(D.CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR, {})
    eng = engine(g, registry.by_name("pointwise_fused").global_index)
    cfg = engine_config(eng)
    other = engine_config(eng, [(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 1024)])
    assert ok(cudnnBackendGetAttribute(cache, A.CUDNN_ATTR_KERNEL_CACHE_IS_ENGINECFG_KERNEL_CACHED, DESC, 1,
                                       [cfg]))[0] == 0
    plan(cfg, cache=cache)
    assert ok(cudnnBackendGetAttribute(cache, A.CUDNN_ATTR_KERNEL_CACHE_IS_ENGINECFG_KERNEL_CACHED, DESC, 1,
                                       [cfg]))[0] == 1
    assert ok(cudnnBackendGetAttribute(cache, A.CUDNN_ATTR_KERNEL_CACHE_IS_ENGINECFG_KERNEL_CACHED, DESC, 1,
                                       [other]))[0] == 0
    assert get(cache, A.CUDNN_ATTR_KERNEL_CACHE_ENTRY_COUNT, T.CUDNN_TYPE_INT64) == (1, [1])
    expect(cudnnBackendGetAttribute(cache, A.CUDNN_ATTR_KERNEL_CACHE_IS_ENGINECFG_KERNEL_CACHED, DESC, 1),
           S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "engine config")


def test_run_only_intermediates_is_not_supported():
    g = bias_relu_graph()
    p = plan(engine_config(engine(g, registry.by_name("pointwise_fused").global_index)), fin=False)
    ok(set_attr(p, A.CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS, T.CUDNN_TYPE_INT64, [UT]))
    expect(finalize(p), S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS")


def test_sm_count_targets():
    g = bias_relu_graph()
    pw = registry.by_name("pointwise_fused").global_index
    eng = engine(g, pw, fin=False)
    ok(set_attr(eng, A.CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, T.CUDNN_TYPE_INT32, -1))
    expect(finalize(eng), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_ENGINE_SM_COUNT_TARGET")
    sms = g.state["ctx"].device.sm_count
    ok(set_attr(eng, A.CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, T.CUDNN_TYPE_INT32, sms + 1))
    expect(finalize(eng), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_ENGINE_SM_COUNT_TARGET", f"[0, {sms}]")
    ok(set_attr(eng, A.CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, T.CUDNN_TYPE_INT32, sms))
    ok(finalize(eng))
    assert get(eng, A.CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, T.CUDNN_TYPE_INT32) == (1, [sms])
    h = make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {
        A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, g), A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, 3),
        A.CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET: (T.CUDNN_TYPE_INT32, -5)}, fin=False)
    expect(finalize(h), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET")


def test_by_value_scalar_in_the_variant_pack(data):
    """Y = relu((X + B) * s) with s a by-value tensor: the pack carries the host value itself."""
    x, b, y, buffers = data
    xs, bs = tensor(UX, SHAPE), tensor(UB, BIAS)
    s = tensor(105, [1, 1, 1, 1], by_value=True)
    t1, t2, ys = tensor(UT, SHAPE, virtual=True), tensor(106, SHAPE, virtual=True), tensor(UY, SHAPE)
    ops = [pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ADD), x=xs, b=bs, y=t1),
           pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_MUL), x=t1, b=s, y=t2),
           pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_RELU_FWD), x=t2, y=ys)]
    g = graph(ops)
    p = plan(get(heuristics(g), A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)[1][0])
    scale = 1.75
    ok(cudnnBackendExecute(handle(), p, variant_pack({**buffers, 105: scale})))
    ref = ref_pointwise(P.CUDNN_POINTWISE_RELU_FWD, (x.astype(np.float64) + b) * scale)
    assert_close(y.copy_to_host(), ref, "float32")
    ok(cudnnBackendExecute(handle(), p, variant_pack({**buffers, 105: np.array([-0.5], np.float32)})))
    ref = ref_pointwise(P.CUDNN_POINTWISE_RELU_FWD, (x.astype(np.float64) + b) * -0.5)
    assert_close(y.copy_to_host(), ref, "float32")
    expect(cudnnBackendExecute(handle(), p, variant_pack({**buffers, 105: np.array([])})), S.CUDNN_STATUS_BAD_PARAM,
           "by-value")


def test_layout_info_of_an_engine_with_a_preferred_layout(monkeypatch):
    from ncudnn.backend import cudnnBackendInitialize
    from ncudnn.types import cudnnBackendLayoutType_t as L
    g = bias_relu_graph()
    pw = registry.by_name("pointwise_fused")
    assert get(engine(g, pw.global_index), A.CUDNN_ATTR_ENGINE_LAYOUT_INFO, DESC) == (0, [])
    monkeypatch.setattr(pw, "preferred_layout", L.CUDNN_LAYOUT_TYPE_PREFERRED_NHWC, raising=False)
    eng = engine(g, pw.global_index)
    count, infos = get(eng, A.CUDNN_ATTR_ENGINE_LAYOUT_INFO, DESC)
    uids = [get(i, A.CUDNN_ATTR_LAYOUT_INFO_TENSOR_UID, T.CUDNN_TYPE_INT64)[1][0] for i in infos]
    assert count == 3 and uids == [UX, UB, UY]
    assert get(infos[0], A.CUDNN_ATTR_LAYOUT_INFO_TYPES, T.CUDNN_TYPE_LAYOUT_TYPE) == \
        (1, [L.CUDNN_LAYOUT_TYPE_PREFERRED_NHWC])
    ok(cudnnBackendInitialize(infos[0]))  # a copy: re-initializing it leaves the engine's own intact
    again = get(eng, A.CUDNN_ATTR_ENGINE_LAYOUT_INFO, DESC)[1][0]
    assert get(again, A.CUDNN_ATTR_LAYOUT_INFO_TENSOR_UID, T.CUDNN_TYPE_INT64) == (1, [UX])
