"""The backend SLICE operation descriptor: finalize checks (BAD_PARAM naming the attribute) and
execution (operation graph -> heuristics -> plan -> variant pack -> cudnnBackendExecute) on the
data_movement engine against NumPy slicing, fresh random input, poisoned output."""
import os
import sys

import numpy as np
import pytest
from numba import cuda

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend"))

from backend_build import (A, D, S, T, create, expect, finalize, get, graph, handle, make, ok,  # noqa: E402
                           set_attr, tensor)
from ncudnn.backend import cudnnBackendExecute  # noqa: E402
from ncudnn.testing import poison_value, random  # noqa: E402

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
I64 = T.CUDNN_TYPE_INT64
P = "CUDNN_ATTR_OPERATION_SLICE_"


def slice_op(xd, yd, start, limit, steps=None, fin=True, x_strides=None):
    attrs = {A[P + "XDESC"]: (DESC, tensor(1, xd, x_strides)), A[P + "YDESC"]: (DESC, tensor(2, yd)),
             A[P + "START_INDICES"]: (I64, list(start)), A[P + "LIMIT_INDICES"]: (I64, list(limit))}
    if steps is not None:
        attrs[A[P + "STRIDES"]] = (I64, list(steps))
    return make(D.CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR, attrs, fin)


def run(op, buffers):
    h = make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, graph([op])),
                                                    A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, 0)})
    count, cfgs = get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)
    assert count >= 1
    plan = make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
        A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfgs[0])})
    assert get(plan, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, I64)[1][0] == 0
    pack = make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (I64, list(buffers)),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, list(buffers.values())),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, None)})
    ok(cudnnBackendExecute(handle(), plan, pack))


@pytest.mark.parametrize("steps", [None, (1, 2, 1, 3)], ids=["unit-strides", "strided"])
def test_backend_slice_executes(rng, steps):
    xd, start, limit = (2, 5, 6, 7), (1, 0, 2, 1), (2, 5, 6, 7)
    k = steps or (1, 1, 1, 1)
    yd = [-(-(b - a) // s) for a, b, s in zip(start, limit, k)]
    x = random(rng, xd)
    y = cuda.to_device(np.full(int(np.prod(yd)), poison_value(np.float32), np.float32))
    run(slice_op(xd, yd, start, limit, steps), {1: cuda.to_device(x), 2: y})
    ref = x.astype(np.float64)[tuple(slice(a, b, s) for a, b, s in zip(start, limit, k))]
    np.testing.assert_array_equal(y.copy_to_host().reshape(yd), ref)


def test_backend_slice_of_nhwc_input(rng):
    n, c, h, w = 2, 6, 3, 4
    xs = [c * h * w, 1, w * c, c]
    x = random(rng, [n, h, w, c])                       # NHWC memory
    y = cuda.to_device(np.full(2 * 3 * 2 * 4, poison_value(np.float32), np.float32))
    run(slice_op((n, c, h, w), (2, 3, 2, 4), (0, 1, 1, 0), (2, 4, 3, 4), x_strides=xs), {1: cuda.to_device(x), 2: y})
    ref = x.astype(np.float64).transpose(0, 3, 1, 2)[:, 1:4, 1:3, :]
    np.testing.assert_array_equal(y.copy_to_host().reshape(2, 3, 2, 4), ref)


@pytest.mark.parametrize("yd,start,limit,steps,attr", [
    ((2, 3), (0, 0, 0), (2, 3, 1), None, "START_INDICES"),       # rank mismatch
    ((2, 3), (0, 0), (2, 7), None, "LIMIT_INDICES"),             # limit past the extent
    ((2, 3), (-1, 0), (1, 3), None, "START_INDICES"),            # negative start
    ((2, 3), (0, 2), (2, 2), None, "LIMIT_INDICES"),             # empty
    ((2, 3), (0, 0), (2, 3), (1, 0), "STRIDES"),                 # zero stride
    ((2, 2), (0, 0), (2, 3), None, "YDESC"),                     # Y dims disagree
])
def test_backend_slice_finalize_refusals(yd, start, limit, steps, attr):
    d = slice_op((4, 6), yd, start, limit, steps, fin=False)
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, P + attr)


def test_backend_slice_start_is_required():
    d = create(D.CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR)
    ok(set_attr(d, A[P + "XDESC"], DESC, tensor(1, (4, 6))))
    ok(set_attr(d, A[P + "YDESC"], DESC, tensor(2, (4, 6))))
    ok(set_attr(d, A[P + "LIMIT_INDICES"], I64, [4, 6]))
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, P + "START_INDICES")
