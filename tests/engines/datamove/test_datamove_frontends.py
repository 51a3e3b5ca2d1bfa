"""Concat and reshape end to end through the front ends onto the "data_movement" engine: the backend
descriptor API (operation descriptors -> heuristics -> plan -> variant pack -> cudnnBackendExecute)
and the cudnn-frontend pygraph drop-in (validate -> build -> execute), against ncudnn.reference.ops
(float64) on fresh random inputs with poisoned outputs."""
import os
import sys

import numpy as np
from numba import cuda

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend"))

import ncudnn as cudnn  # noqa: E402
from backend_build import A, D, T, get, graph, handle, make, ok, tensor  # noqa: E402
from ncudnn.backend import cudnnBackendExecute  # noqa: E402
from ncudnn.reference.ops import run_op  # noqa: E402
from ncudnn.testing import poison_value, random  # noqa: E402
from ncudnn.types import cudnnBackendReshapeMode_t as RM  # noqa: E402

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR


def backend_run(g, buffers):
    h = make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, g),
                                                    A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, 0)})
    count, cfgs = get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)
    assert count >= 1
    plan = make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
        A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfgs[0])})
    ws = get(plan, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64)[1][0]
    assert ws == 0
    pack = make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, list(buffers)),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, list(buffers.values())),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, None)})
    ok(cudnnBackendExecute(handle(), plan, pack))


def poisoned(n):
    return cuda.to_device(np.full(n, poison_value(np.float32), np.float32))


def test_backend_concat_executes(rng):
    a, b = random(rng, [2, 3, 4]), random(rng, [2, 5, 4])
    y = poisoned(2 * 8 * 4)
    op = make(D.CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_CONCAT_AXIS: (T.CUDNN_TYPE_INT64, 1),
        A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS: (DESC, [tensor(1, [2, 3, 4]), tensor(2, [2, 5, 4])]),
        A.CUDNN_ATTR_OPERATION_CONCAT_OUTPUT_DESC: (DESC, tensor(3, [2, 8, 4]))})
    backend_run(graph([op]), {1: cuda.to_device(a), 2: cuda.to_device(b), 3: y})
    ref = run_op("concat", {"X0": a, "X1": b}, {"axis": 1})["Y"]
    np.testing.assert_array_equal(y.copy_to_host().reshape(2, 8, 4), ref)


def test_backend_reshape_transposes(rng):
    """LOGICAL reshape onto the same dims with transposed strides: a physical transpose."""
    a = random(rng, [12, 10])
    y = poisoned(120)
    op = make(D.CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_RESHAPE_XDESC: (DESC, tensor(1, [12, 10])),
        A.CUDNN_ATTR_OPERATION_RESHAPE_YDESC: (DESC, tensor(2, [12, 10], [1, 12])),
        A.CUDNN_ATTR_OPERATION_RESHAPE_MODE: (T.CUDNN_TYPE_RESHAPE_MODE, RM.CUDNN_RESHAPE_LOGICAL)})
    backend_run(graph([op]), {1: cuda.to_device(a), 2: y})
    np.testing.assert_array_equal(y.copy_to_host().reshape(10, 12).T, a)


def _pygraph():
    return cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def _build(g):
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    g.build_plans()
    assert g.get_workspace_size() == 0


def test_pygraph_concatenate_executes(rng):
    g = _pygraph()
    x = g.tensor(name="x", dim=[2, 3, 4], stride=[12, 4, 1])
    z = g.tensor(name="z", dim=[2, 2, 4], stride=[8, 4, 1])
    cat = g.concatenate(inputs=[x, z], axis=1, name="cat")
    cat.set_output(True)
    _build(g)
    a, b = random(rng, [2, 3, 4]), random(rng, [2, 2, 4])
    y = poisoned(40)
    g.execute({x: cuda.to_device(a), z: cuda.to_device(b), cat: y}, None)
    np.testing.assert_array_equal(y.copy_to_host().reshape(2, 5, 4), np.concatenate([a, b], axis=1))


def test_pygraph_reshape_executes(rng):
    g = _pygraph()
    x = g.tensor(name="x", dim=[2, 3, 4], stride=[12, 4, 1])
    rs = g.reshape(x, name="rs", reshape_mode=cudnn.reshape_mode.LOGICAL)
    rs.set_output(True).set_dim([6, 4]).set_stride([1, 6])
    _build(g)
    a = random(rng, [2, 3, 4])
    y = poisoned(24)
    g.execute({x: cuda.to_device(a), rs: y}, None)
    ref = run_op("reshape", {"X": a}, {}, {"Y": (6, 4)})["Y"]
    np.testing.assert_array_equal(y.copy_to_host().reshape(4, 6).T, ref)
