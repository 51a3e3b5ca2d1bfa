"""End-to-end through the backend API for the compute operations: graph -> heuristics -> plan ->
variant pack -> cudnnBackendExecute, checked against the float64 reference. While no engine runs an
operation, the test asserts the documented NOT_SUPPORTED answers (every engine index refuses it with
a reason, the heuristics return no config) and skips, saying so."""
import numpy as np
import pytest
from numba import cuda

from backend_build import A, D, S, T, conv_desc, conv_op, finalize, get, graph, handle, make, ok, tensor
from ncudnn.backend import cudnnBackendExecute
from ncudnn.engines import registry
from ncudnn.errors import CUDNN_STATUS_CATEGORY, peek_last_error
from ncudnn.reference import conv_fprop as ref_conv_fprop
from ncudnn.reference import matmul as ref_matmul
from ncudnn.reference import reduction as ref_reduction
from ncudnn.testing import assert_close, poison_value, random
from ncudnn.types import cudnnReduceTensorOp_t as R

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR


def first_config_or_skip(g, what):
    h = make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, g),
                                                    A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, 3)})
    count, cfgs = get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)
    if count:
        return cfgs[0]
    for index in range(registry.global_count()):
        eng = make(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR, {A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH: (DESC, g),
                                                       A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX: (T.CUDNN_TYPE_INT64, index)},
                   fin=False)
        status = finalize(eng)[0]
        assert CUDNN_STATUS_CATEGORY(status) == S.CUDNN_STATUS_NOT_SUPPORTED, (index, status)
        assert any(s in peek_last_error() for s in ("does not support the graph", "not available in this build"))
    pytest.skip(f"no engine runs {what} yet (every engine index: NOT_SUPPORTED with a reason)")


def run(g, buffers):
    cfg = first_config_or_skip(g, g.state["graph"].nodes[0].OP)
    plan = make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
        A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfg)})
    ws = get(plan, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64)[1][0]
    workspace = cuda.device_array(ws, np.uint8) if ws else None
    pack = make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, list(buffers)),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, list(buffers.values())),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, workspace)})
    ok(cudnnBackendExecute(handle(), plan, pack))


def poisoned(shape):
    return cuda.to_device(np.full(shape, poison_value(np.float32), np.float32))


def test_grouped_conv_fprop_executes(rng):
    x, w = random(rng, [1, 4, 5, 5]), random(rng, [4, 2, 3, 3])
    y = poisoned([1, 4, 3, 3])
    op = conv_op(D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, tensor(1, [1, 4, 5, 5]),
                 tensor(2, [4, 2, 3, 3]), tensor(3, [1, 4, 3, 3]), conv_desc(2))
    run(graph([op]), {1: cuda.to_device(x), 2: cuda.to_device(w), 3: y})
    assert_close(y.copy_to_host(), ref_conv_fprop(x, w, groups=2), "float32")


def test_batched_matmul_executes(rng):
    a, b = random(rng, [2, 8, 6]), random(rng, [2, 6, 5])
    c = poisoned([2, 8, 5])
    mm = make(D.CUDNN_BACKEND_MATMUL_DESCRIPTOR, {A.CUDNN_ATTR_MATMUL_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, 0)})
    op = make(D.CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_MATMUL_ADESC: (DESC, tensor(1, [2, 8, 6])),
        A.CUDNN_ATTR_OPERATION_MATMUL_BDESC: (DESC, tensor(2, [2, 6, 5])),
        A.CUDNN_ATTR_OPERATION_MATMUL_CDESC: (DESC, tensor(3, [2, 8, 5])), A.CUDNN_ATTR_OPERATION_MATMUL_DESC: (DESC, mm)})
    run(graph([op]), {1: cuda.to_device(a), 2: cuda.to_device(b), 3: c})
    assert_close(c.copy_to_host(), ref_matmul(a, b), "float32")


def test_reduction_executes(rng):
    x = random(rng, [2, 3, 4, 5])
    y = poisoned([1, 3, 1, 1])
    rd = make(D.CUDNN_BACKEND_REDUCTION_DESCRIPTOR, {
        A.CUDNN_ATTR_REDUCTION_OPERATOR: (T.CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, R.CUDNN_REDUCE_TENSOR_ADD),
        A.CUDNN_ATTR_REDUCTION_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, 0)})
    op = make(D.CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_REDUCTION_XDESC: (DESC, tensor(1, [2, 3, 4, 5])),
        A.CUDNN_ATTR_OPERATION_REDUCTION_YDESC: (DESC, tensor(2, [1, 3, 1, 1])),
        A.CUDNN_ATTR_OPERATION_REDUCTION_DESC: (DESC, rd)})
    run(graph([op]), {1: cuda.to_device(x), 2: y})
    assert_close(y.copy_to_host(), ref_reduction(R.CUDNN_REDUCE_TENSOR_ADD, x, (1, 3, 1, 1)), "float32")
