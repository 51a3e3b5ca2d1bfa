"""CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR (issue #28): created, set, finalized (the properties read from the
handle's device, or from a JSON document for a device that need not be present) and read back; ENGINEHEUR,
ENGINE and EXECUTION_PLAN take one (CUDNN_ATTR_*_DEVICEPROP) and check support / rank for its properties;
bad input with its documented status and a last error naming the attribute."""
import json

import numpy as np
from numba import cuda

from backend_build import A, D, S, T, create, expect, finalize, get, graph, handle, make, ok, pointwise_desc, \
    pointwise_op, set_attr, tensor
from ncudnn.backend import cudnnBackendExecute, cudnnBackendGetAttribute
from ncudnn.testing import assert_close, random
from ncudnn.types import cudnnPointwiseMode_t as PM

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
JSON = A.CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION
FIELDS = ("name", "cc", "sm_count", "clock_hz", "mem_bandwidth", "peak_fp32", "peak_tf32", "peak_bf16",
          "smem_per_sm", "smem_per_block", "regs_per_sm", "max_threads_per_sm", "l2_bytes")


def props_of_handle():
    return make(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, {A.CUDNN_ATTR_DEVICEPROP_HANDLE: (T.CUDNN_TYPE_HANDLE, handle())})


def json_of(d):
    n, text = get(d, JSON, T.CUDNN_TYPE_CHAR, 1 << 16)
    assert n == len(text) + 1
    return json.loads(text)


def props_from(doc):
    return make(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, {JSON: (T.CUDNN_TYPE_CHAR, json.dumps(doc))})


def small_device():
    doc = json_of(props_of_handle())
    doc.update(name="a small part", sm_count=8)
    return doc


def test_properties_of_the_handles_device():
    doc = json_of(props_of_handle())
    assert set(FIELDS) <= set(doc) and doc["sm_count"] > 0 and len(doc["cc"]) == 2
    assert get(props_of_handle(), A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID, T.CUDNN_TYPE_INT64) == (1, [0])
    d = make(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, {})  # neither set: the current device
    assert json_of(d) == doc


def test_json_round_trip():
    doc = small_device()
    assert json_of(props_from(doc)) == doc


def test_bad_input():
    d = create(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR)
    expect(set_attr(d, A.CUDNN_ATTR_DEVICEPROP_HANDLE, T.CUDNN_TYPE_INT64, 1), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
           A.CUDNN_ATTR_DEVICEPROP_HANDLE)
    expect(set_attr(d, A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID, T.CUDNN_TYPE_INT64, [0, 1]), S.CUDNN_STATUS_BAD_PARAM,
           A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID, "elementCount 2")
    expect(cudnnBackendGetAttribute(d, JSON, T.CUDNN_TYPE_CHAR, 16, None), S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, JSON)
    for doc, why in (("{not json", "not valid JSON"), ("[1, 2]", "JSON object"),
                     (json.dumps(dict(small_device(), warp_size=32)), "warp_size"),
                     (json.dumps({k: v for k, v in small_device().items() if k != "sm_count"}), "sm_count"),
                     (json.dumps(dict(small_device(), sm_count=-4)), "sm_count"),
                     (json.dumps(dict(small_device(), cc=[9])), "cc")):
        d = make(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, {JSON: (T.CUDNN_TYPE_CHAR, doc)}, fin=False)
        expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, JSON, why)
    d = make(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, {A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID: (T.CUDNN_TYPE_INT64, -1)},
             fin=False)
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID)
    d = make(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, {A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID: (T.CUDNN_TYPE_INT64, 7)},
             fin=False)
    expect(finalize(d), S.CUDNN_STATUS_NOT_SUPPORTED, A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID, "current device")


X = [2, 3, 4, 5]


def relu_graph():
    return graph([pointwise_op(pointwise_desc(PM.CUDNN_POINTWISE_RELU_FWD), x=tensor(1, X), y=tensor(2, X))])


def heuristics(g, props=None, sm_target=None, fin=True):
    attrs = {A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, g), A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, 0)}
    if props is not None:
        attrs[A.CUDNN_ATTR_ENGINEHEUR_DEVICEPROP] = (DESC, props)
    if sm_target is not None:
        attrs[A.CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET] = (T.CUDNN_TYPE_INT32, sm_target)
    return make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, attrs, fin)


def test_heuristics_rank_for_the_given_device(rng):
    """Deviceless planning: the heuristics see the DEVICEPROP's 8 SMs (an SM target above them is BAD_PARAM)
    and their configs build and run here."""
    g, small = relu_graph(), props_from(small_device())
    heuristics(g, sm_target=100)  # the handle's device has more than 100 SMs
    expect(finalize(heuristics(g, props=small, sm_target=100, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           A.CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, "[0, 8]")
    h = heuristics(g, props=small, sm_target=8)
    n, (props,) = get(h, A.CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, DESC, 1)
    assert json_of(props)["sm_count"] == 8
    count, cfgs = get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)
    assert count >= 1
    plan = make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
        A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfgs[0]),
        A.CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP: (DESC, props_of_handle())})
    ws = get(plan, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64)[1][0]
    x = random(rng, X)
    y = cuda.to_device(np.full(X, np.nan, np.float32))
    pack = make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, [1, 2]),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, [cuda.to_device(x), y]),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, cuda.device_array(ws, np.uint8) if ws else None)})
    ok(cudnnBackendExecute(handle(), plan, pack))
    assert_close(y.copy_to_host(), np.maximum(x.astype(np.float64), 0), "float32")


def test_engine_checks_the_given_device():
    g, small = relu_graph(), props_from(small_device())
    eng = make(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR, {
        A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH: (DESC, g), A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX: (T.CUDNN_TYPE_INT64, 0),
        A.CUDNN_ATTR_ENGINE_DEVICEPROP: (DESC, small),
        A.CUDNN_ATTR_ENGINE_SM_COUNT_TARGET: (T.CUDNN_TYPE_INT32, 9)}, fin=False)
    expect(finalize(eng), S.CUDNN_STATUS_BAD_PARAM, A.CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, "[0, 8]")


def test_deviceprop_attributes_take_only_a_deviceprop():
    h = create(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    expect(set_attr(h, A.CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, DESC, tensor(1, X)), S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
           A.CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, "CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR")
    props = make(D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, {}, fin=False)
    ok(set_attr(h, A.CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, DESC, props))
    ok(set_attr(h, A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, DESC, relu_graph()))
    ok(set_attr(h, A.CUDNN_ATTR_ENGINEHEUR_MODE, T.CUDNN_TYPE_HEUR_MODE, 0))
    expect(finalize(h), S.CUDNN_STATUS_BAD_PARAM, A.CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, "not finalized")
