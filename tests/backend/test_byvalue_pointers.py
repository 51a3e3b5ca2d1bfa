"""By-value tensors in the backend variant pack: the data pointer of a by-value tensor is a host pointer
to its value (what code ported from C passes), or a ctypes object / NumPy scalar / float holding it.

BN finalize (count, epsilon, momentum) and layer norm (epsilon) through cudnnBackendExecute, each
by-value form against the float64 graph oracle on fresh random inputs with poisoned outputs; a host
pointer is read at every execute; forms that cannot be read are BAD_PARAM with the last-error string
naming the tensor, never a value made of the address."""
import ctypes

import numpy as np
import pytest
from numba import cuda

import test_backend_ops as op_cases
from backend_build import A, D, S, T, expect, get, graph, handle, make, ok
from ncudnn.backend import cudnnBackendExecute
from ncudnn.reference.ops import run_graph
from ncudnn.testing import assert_close, poison_value, random
from ncudnn.types import cudnnBackendNormFwdPhase_t as PH
from ncudnn.types import cudnnBackendNormMode_t as NM

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR


def _form(kind, value, keep):
    """``value`` (float32) as variant-pack form ``kind``; ``keep`` holds what must stay alive."""
    c = ctypes.c_float(value)
    host = np.array([value], np.float32)
    keep += [c, host]
    return {
        "address": ctypes.addressof(c),
        "numpy_address": host.ctypes.data,
        "c_void_p": ctypes.c_void_p(ctypes.addressof(c)),
        "ctypes": c,
        "pointer": ctypes.pointer(c),
        "byref": ctypes.byref(c),
        "ctypes_array": (ctypes.c_float * 1)(value),
        "numpy_scalar": np.float32(value),
        "zero_d": np.array(value, np.float32),
        "float": float(value),
    }[kind]


FORMS = ["address", "numpy_address", "c_void_p", "ctypes", "pointer", "byref", "ctypes_array", "numpy_scalar",
         "zero_d", "float"]


def _bn_finalize_inputs(rng):
    count = float(rng.integers(8, 32))
    total = rng.uniform(-4.0, 4.0, (1, 8, 1, 1)).astype(np.float32)
    sqsum = (total.astype(np.float64) ** 2 / count + rng.uniform(0.5, 2.0, (1, 8, 1, 1))).astype(np.float32)
    return {10: total, 11: sqsum, 30: np.float32(count), 31: np.float32(rng.uniform(1e-5, 1e-3)),
            32: np.float32(rng.uniform(0.05, 0.3))}


def _layernorm_inputs(rng):
    return {5: np.float32(rng.uniform(1e-5, 1e-2))}


CASES = {
    "bn_finalize": (op_cases.bn_finalize, _bn_finalize_inputs),
    "layernorm_infer": (lambda: op_cases.norm_fwd(NM.CUDNN_LAYER_NORM, PH.CUDNN_NORM_FWD_INFERENCE),
                        _layernorm_inputs),
}


def _plan(g):
    h = make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, g),
                                                    A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, 3)})
    count, cfgs = get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)
    assert count, "no engine config for the graph"
    plan = make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, handle()),
        A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfgs[0])})
    ws = get(plan, A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64)[1][0]
    return plan, (cuda.device_array(ws, np.uint8) if ws else None)


def _pack(buffers, workspace):
    return make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
        A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, list(buffers)),
        A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, list(buffers.values())),
        A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, workspace)})


def _setup(case, rng):
    """(graph, plan, workspace, tensors, inputs {uid: host value}, device buffers, outputs {uid: device})."""
    build, made = CASES[case]
    g = graph([build()])
    ir = g.state["graph"]
    produced = {t.uid for n in ir.nodes for t in n.outputs.values()}
    tensors = {u: t for u, t in ir.tensors().items() if not t.is_virtual}
    special = made(rng)
    inputs, buffers, outputs = {}, {}, {}
    for uid, t in sorted(tensors.items()):
        if uid in produced:
            outputs[uid] = buffers[uid] = cuda.to_device(np.full(t.dims, poison_value(np.float32), np.float32))
        elif t.is_by_value:
            inputs[uid] = special[uid]
        else:
            v = special.get(uid)
            inputs[uid] = random(rng, t.dims, np.float32, 0.5, 1.5) if v is None else v
            buffers[uid] = cuda.to_device(inputs[uid])
    plan, ws = _plan(g)
    return ir, plan, ws, tensors, inputs, buffers, outputs


def _check(ir, tensors, inputs, outputs, case):
    # the oracle gets each by-value tensor's value through its descriptor
    for uid, v in inputs.items():
        if tensors[uid].is_by_value:
            tensors[uid].value = float(v)
    expected = run_graph(ir, {u: np.asarray(v, np.float64) for u, v in inputs.items()})
    for uid, dev in outputs.items():
        assert_close(dev.copy_to_host(), expected[uid], "float32", name=f"{case} uid {uid}")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", list(CASES))
def test_by_value_forms_are_read_as_values(case, form, rng):
    ir, plan, ws, tensors, inputs, buffers, outputs = _setup(case, rng)
    keep = []
    for uid, t in tensors.items():
        if t.is_by_value:
            buffers[uid] = _form(form, float(inputs[uid]), keep)
    ok(cudnnBackendExecute(handle(), plan, _pack(buffers, ws)))
    _check(ir, tensors, inputs, outputs, case)


def test_a_host_pointer_is_read_at_every_execute(rng):
    ir, plan, ws, tensors, inputs, buffers, outputs = _setup("layernorm_infer", rng)
    eps = ctypes.c_float(float(inputs[5]))
    buffers[5] = ctypes.addressof(eps)
    pack = _pack(buffers, ws)
    ok(cudnnBackendExecute(handle(), plan, pack))
    _check(ir, tensors, inputs, outputs, "layernorm_infer")
    inputs[5] = np.float32(rng.uniform(0.5, 2.0))  # a large epsilon changes Y visibly
    eps.value = float(inputs[5])
    for dev in outputs.values():
        dev.copy_to_device(np.full(dev.shape, poison_value(np.float32), np.float32))
    ok(cudnnBackendExecute(handle(), plan, pack))
    _check(ir, tensors, inputs, outputs, "layernorm_infer")


@pytest.mark.parametrize("bad, status, fragment", [
    (lambda: ctypes.c_double(1e-3), S.CUDNN_STATUS_BAD_PARAM, "c_double holds 8 bytes"),
    (lambda: ctypes.pointer(ctypes.c_double(1e-3)), S.CUDNN_STATUS_BAD_PARAM, "pointer to c_double"),
    (lambda: 1, S.CUDNN_STATUS_BAD_PARAM, "not a readable host address"),
    (lambda: 1 << 62, S.CUDNN_STATUS_BAD_PARAM, "not a readable host address"),
    (lambda: ctypes.c_void_p(0), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL"),
    (lambda: np.zeros(3, np.float32), S.CUDNN_STATUS_BAD_PARAM, "3 elements"),
])
def test_unreadable_by_value_forms_are_bad_param(bad, status, fragment, rng):
    ir, plan, ws, tensors, inputs, buffers, outputs = _setup("layernorm_infer", rng)
    buffers[5] = bad()
    expect(cudnnBackendExecute(handle(), plan, _pack(buffers, ws)), status, "uid 5", fragment)
    for dev in outputs.values():
        assert np.isnan(dev.copy_to_host()).all()  # nothing ran


@pytest.mark.parametrize("form", ["int", "float", "numpy_scalar", "ctypes", "pointer", "byref"])
def test_pygraph_by_value_numbers_are_values_and_ctypes_are_read(rng, form):
    """In pygraph a Python int is the value (cudnn-frontend), not an address; ctypes objects are read."""
    import ncudnn as cudnn
    shape = [2, 3, 4]
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=shape)
    s = g.tensor(name="s", dim=[1, 1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT)
    Y = g.scale(input=X, scale=s)
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    value = int(rng.integers(2, 9)) if form == "int" else float(rng.uniform(0.5, 2.0))
    c = ctypes.c_float(value)
    given = {"int": value, "float": value, "numpy_scalar": np.float32(value), "ctypes": c,
             "pointer": ctypes.pointer(c), "byref": ctypes.byref(c)}[form]
    x = random(rng, shape)
    y = cuda.to_device(np.full(shape, poison_value(np.float32), np.float32))
    g.execute({X: cuda.to_device(x), s: given, Y: y}, None)
    assert_close(y.copy_to_host(), x.astype(np.float64) * np.float32(value), "float32")
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="c_double holds 8 bytes"):
        g.execute({X: cuda.to_device(x), s: ctypes.c_double(value), Y: y}, None)
