"""The seed document's backend use case, ported line by line as a C user would: a grouped 3-D
convolution forward (6-D tensors x [n, g, c, d, h, w], w [g, k, c, t, r, s], y [n, g, k, o, p, q],
CUDNN_CONVOLUTION, alpha 1, beta 0.5), an engine with CUDNN_ATTR_ENGINE_GLOBAL_INDEX 0 and no knobs,
an engine config, a plan, a variant pack and cudnnBackendExecute, checked against the float64 oracle.

In cuDNN an engine's global index is meaningful per operation graph: index 0 of this graph must be an
engine that runs it, and the indices the heuristics report for it must name the same engines."""
import numpy as np
import pytest
from numba import cuda

import ncudnn
from ncudnn.backend import (cudnnBackendCreateDescriptor, cudnnBackendExecute, cudnnBackendFinalize,
                            cudnnBackendGetAttribute, cudnnBackendSetAttribute)
from ncudnn.reference import conv_fprop as ref_conv_fprop
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.types import cudnnBackendAttributeName_t as A
from ncudnn.types import cudnnBackendAttributeType_t as T
from ncudnn.types import cudnnBackendDescriptorType_t as D
from ncudnn.types import cudnnStatus_t as S

n, g, c, k = size((1, 2, 2, 2), (2, 4, 8, 8))
d, h, w_ = size((3, 4, 4), (6, 10, 10))
t, r, s = 2, 2, 2
o, p, q = d - t + 1, h - r + 1, w_ - s + 1
DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR


def check(result):
    assert result[0] == S.CUDNN_STATUS_SUCCESS, f"{result[0]!r}: {ncudnn.cudnnGetLastErrorString()}"
    return result[1] if len(result) == 2 else result[1:]


def create(dtype):
    return check(cudnnBackendCreateDescriptor(dtype))


def set_(desc, name, atype, count, values):
    check(cudnnBackendSetAttribute(desc, name, atype, count, values))


def tensor_desc(dims, strides, uid, alignment=4):
    desc = create(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)
    set_(desc, A.CUDNN_ATTR_TENSOR_DATA_TYPE, T.CUDNN_TYPE_DATA_TYPE, 1, ncudnn.CUDNN_DATA_FLOAT)
    set_(desc, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, 6, dims)
    set_(desc, A.CUDNN_ATTR_TENSOR_STRIDES, T.CUDNN_TYPE_INT64, 6, strides)
    set_(desc, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, 1, uid)
    set_(desc, A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, T.CUDNN_TYPE_INT64, 1, alignment)
    check(cudnnBackendFinalize(desc))
    return desc


def packed(dims):
    return [int(np.prod(dims[i + 1:])) for i in range(len(dims))]


def seed_graph(handle):
    """Steps 1-5 of the use case: tensors, convolution descriptor, forward operation, operation graph."""
    xDesc = tensor_desc([n, g, c, d, h, w_], [g * c * d * h * w_, c * d * h * w_, d * h * w_, h * w_, w_, 1], ord("x"))
    wDesc = tensor_desc([g, k, c, t, r, s], packed([g, k, c, t, r, s]), ord("w"))
    yDesc = tensor_desc([n, g, k, o, p, q], packed([n, g, k, o, p, q]), ord("y"))

    cDesc = create(D.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)
    nbDims = 3
    set_(cDesc, A.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, T.CUDNN_TYPE_INT64, 1, nbDims)
    set_(cDesc, A.CUDNN_ATTR_CONVOLUTION_COMP_TYPE, T.CUDNN_TYPE_DATA_TYPE, 1, ncudnn.CUDNN_DATA_FLOAT)
    set_(cDesc, A.CUDNN_ATTR_CONVOLUTION_CONV_MODE, T.CUDNN_TYPE_CONVOLUTION_MODE, 1, ncudnn.CUDNN_CONVOLUTION)
    set_(cDesc, A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, T.CUDNN_TYPE_INT64, nbDims, [0, 0, 0])
    set_(cDesc, A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, T.CUDNN_TYPE_INT64, nbDims, [0, 0, 0])
    set_(cDesc, A.CUDNN_ATTR_CONVOLUTION_DILATIONS, T.CUDNN_TYPE_INT64, nbDims, [1, 1, 1])
    set_(cDesc, A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, T.CUDNN_TYPE_INT64, nbDims, [1, 1, 1])
    check(cudnnBackendFinalize(cDesc))

    fprop = create(D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
    alpha, beta = 1.0, 0.5
    set_(fprop, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, DESC, 1, xDesc)
    set_(fprop, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, DESC, 1, wDesc)
    set_(fprop, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, DESC, 1, yDesc)
    set_(fprop, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, DESC, 1, cDesc)
    set_(fprop, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, T.CUDNN_TYPE_FLOAT, 1, alpha)
    set_(fprop, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, T.CUDNN_TYPE_FLOAT, 1, beta)
    check(cudnnBackendFinalize(fprop))

    op_graph = create(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    set_(op_graph, A.CUDNN_ATTR_OPERATIONGRAPH_OPS, DESC, 1, [fprop])
    set_(op_graph, A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE, T.CUDNN_TYPE_HANDLE, 1, handle)
    check(cudnnBackendFinalize(op_graph))
    return op_graph


def engine_config(op_graph, gidx):
    """The engine-config use case: the engine of this graph at ``gidx``, no knobs set."""
    engine = create(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR)
    set_(engine, A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH, DESC, 1, op_graph)
    set_(engine, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, T.CUDNN_TYPE_INT64, 1, gidx)
    check(cudnnBackendFinalize(engine))
    engcfg = create(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    set_(engcfg, A.CUDNN_ATTR_ENGINECFG_ENGINE, DESC, 1, engine)
    check(cudnnBackendFinalize(engcfg))
    count, (workspaceSize,) = check(cudnnBackendGetAttribute(engcfg, A.CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE,
                                                             T.CUDNN_TYPE_INT64, 1, None))
    assert count == 1 and workspaceSize >= 0
    return engcfg


def execute(handle, engcfg, x, wt, y_init):
    """The plan / variant pack / execute use case; returns y after the call."""
    plan = create(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    set_(plan, A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE, T.CUDNN_TYPE_HANDLE, 1, handle)
    set_(plan, A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, DESC, 1, engcfg)
    check(cudnnBackendFinalize(plan))
    _, (workspaceSize,) = check(cudnnBackendGetAttribute(plan, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                         T.CUDNN_TYPE_INT64, 1, None))
    xData, wData, yData = cuda.to_device(x), cuda.to_device(wt), cuda.to_device(y_init)
    workspace = cuda.device_array(max(int(workspaceSize), 1), np.uint8)
    varpack = create(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    set_(varpack, A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.CUDNN_TYPE_VOID_PTR, 3, [xData, wData, yData])
    set_(varpack, A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.CUDNN_TYPE_INT64, 3, [ord("x"), ord("w"), ord("y")])
    set_(varpack, A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE, T.CUDNN_TYPE_VOID_PTR, 1, workspace)
    check(cudnnBackendFinalize(varpack))
    check(cudnnBackendExecute(handle, plan, varpack))
    return yData.copy_to_host()


def oracle(x, wt, y_init):
    """y = 1 * conv(x, w) + 0.5 * y, CUDNN_CONVOLUTION (flipped filter), groups g."""
    x5 = x.reshape(n, g * c, d, h, w_)
    w5 = wt.reshape(g * k, c, t, r, s)
    y = ref_conv_fprop(x5, w5, groups=g, cross_correlation=False)
    return (y + 0.5 * y_init.reshape(y.shape).astype(np.float64)).reshape(n, g, k, o, p, q)


@pytest.fixture
def handle():
    h = check(ncudnn.cudnnCreate())
    yield h
    ncudnn.cudnnDestroy(h)


@pytest.fixture
def data(rng):
    x = random(rng, [n, g, c, d, h, w_])
    wt = random(rng, [g, k, c, t, r, s])
    y_init = random(rng, [n, g, k, o, p, q])   # beta = 0.5 reads y: random, not poison
    return x, wt, y_init


@pytest.mark.gpu
def test_seed_grouped_conv_gidx0_gpu(handle, data):
    x, wt, y_init = data
    y = execute(handle, engine_config(seed_graph(handle), 0), x, wt, y_init)
    assert_close(y, oracle(x, wt, y_init), "float32")


def test_seed_grouped_conv_engine_index_0_runs(handle, data):
    x, wt, y_init = data
    y = execute(handle, engine_config(seed_graph(handle), 0), x, wt, y_init)
    assert_close(y, oracle(x, wt, y_init), "float32")


def test_every_index_of_the_graph_runs_or_refuses(handle, data):
    """Indices 0 .. ENGINE_GLOBAL_COUNT-1 of this graph: each finalizes to an engine that runs the graph
    correctly, or refuses with NOT_SUPPORTED and a reason; the ones that run come first (no gap)."""
    x, wt, y_init = data
    op_graph = seed_graph(handle)
    _, (count,) = check(cudnnBackendGetAttribute(op_graph, A.CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                                 T.CUDNN_TYPE_INT64, 1, None))
    ref = oracle(x, wt, y_init)
    refused = False
    for gidx in range(count):
        engine = create(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR)
        set_(engine, A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH, DESC, 1, op_graph)
        set_(engine, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, T.CUDNN_TYPE_INT64, 1, gidx)
        status = cudnnBackendFinalize(engine)[0]
        if status != S.CUDNN_STATUS_SUCCESS:
            assert ncudnn.errors.CUDNN_STATUS_CATEGORY(status) == S.CUDNN_STATUS_NOT_SUPPORTED, (gidx, status)
            assert ncudnn.cudnnGetLastErrorString()
            refused = True
            continue
        assert not refused, f"index {gidx} runs after a refused index: the graph's engines are not first"
        _, (back,) = check(cudnnBackendGetAttribute(engine, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                                    T.CUDNN_TYPE_INT64, 1, None))
        assert back == gidx
        if gidx < 3:   # a few of them end to end (each is a compile in the simulator)
            engcfg = create(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
            set_(engcfg, A.CUDNN_ATTR_ENGINECFG_ENGINE, DESC, 1, engine)
            check(cudnnBackendFinalize(engcfg))
            assert_close(execute(handle, engcfg, x, wt, y_init), ref, "float32", name=f"gidx {gidx}")


def test_heuristic_indices_name_the_same_engines(handle):
    """The engine of each heuristic result reports a global index that, set on a new ENGINE descriptor
    of the same graph, finalizes to an engine with the same knobs (the same engine)."""
    op_graph = seed_graph(handle)
    heur = create(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    set_(heur, A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, DESC, 1, op_graph)
    set_(heur, A.CUDNN_ATTR_ENGINEHEUR_MODE, T.CUDNN_TYPE_HEUR_MODE, 1, ncudnn.CUDNN_HEUR_MODE_A)
    check(cudnnBackendFinalize(heur))
    count, cfgs = check(cudnnBackendGetAttribute(heur, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 8, None))
    assert count >= 1
    for cfg in cfgs[:count]:
        _, (eng,) = check(cudnnBackendGetAttribute(cfg, A.CUDNN_ATTR_ENGINECFG_ENGINE, DESC, 1, None))
        _, (gidx,) = check(cudnnBackendGetAttribute(eng, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, T.CUDNN_TYPE_INT64, 1,
                                                    None))
        again = create(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR)
        set_(again, A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH, DESC, 1, op_graph)
        set_(again, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, T.CUDNN_TYPE_INT64, 1, gidx)
        check(cudnnBackendFinalize(again))
        assert again.state["engine"] is eng.state["engine"], gidx
