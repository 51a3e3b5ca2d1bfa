"""Self-describing buffers checked against the tensor they are bound to, and dims that are not integers.

A numba / torch / CuPy / DLPack buffer carries its dtype, shape and strides: a mismatch with the declared
tensor is CUDNN_STATUS_BAD_PARAM naming the tensor (name and uid) with both layouts, in pygraph
execute, the backend variant pack (with cudnnGetLastErrorString) and the legacy API; a strided view
that matches the declared strides is legal and is honoured (elements outside it stay untouched). Raw
integer pointers stay unchecked, as in cuDNN. Non-integer dims / strides (2.5, 2.0, True) are
BAD_PARAM everywhere dims enter: pygraph tensor() / set_dim / set_stride / override_shapes, backend
attributes and legacy descriptors."""
import ctypes

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
import ncudnn.legacy as L
from ncudnn import memory
from ncudnn.memory import producers
from ncudnn.errors import peek_last_error
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.types import cudnnStatus_t as S


def lastdim(a, s):
    """a[..., s] for arrays whose indexing takes no Ellipsis (numba device arrays on a GPU)."""
    return a[(slice(None),) * (a.ndim - 1) + (s,)]

SHAPE = size([2, 4, 8], [16, 64, 512])


# --------------------------------------------------------------------------- producers

class FakeCAI:
    """A torch / CuPy-like producer: only ``__cuda_array_interface__`` (typestr, shape, byte strides)."""

    def __init__(self, dev, strides=True):
        self._dev = dev
        self.__cuda_array_interface__ = {
            "data": (memory.device_pointer(dev), False), "shape": tuple(dev.shape),
            "strides": tuple(dev.strides) if strides else None, "typestr": dev.dtype.str, "version": 3}


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype, _PyCapsule_New.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                                     ctypes.c_void_p]
_DL = {np.dtype(np.float32): (2, 32), np.dtype(np.float64): (2, 64), np.dtype(np.int32): (0, 32),
       np.dtype(np.float16): (2, 16)}


class FakeDLPack:
    """A DLPack producer (kDLCUDA) over a numba device array, as torch.utils.dlpack would export it."""

    def __init__(self, dev):
        self._dev = dev
        nd = dev.ndim
        self._shape = (ctypes.c_int64 * nd)(*dev.shape)
        self._strides = (ctypes.c_int64 * nd)(*(s // dev.dtype.itemsize for s in dev.strides))
        t = self._t = producers._DLTensor()
        t.data, t.byte_offset, t.ndim = memory.device_pointer(dev), 0, nd
        t.device.device_type, t.device.device_id = memory.kDLCUDA, 0
        t.dtype.code, t.dtype.bits = _DL[dev.dtype]
        t.dtype.lanes, t.shape, t.strides = 1, self._shape, self._strides

    def __dlpack__(self, **kw):
        return _PyCapsule_New(ctypes.addressof(self._t), b"dltensor", None)

    def __dlpack_device__(self):
        return (memory.kDLCUDA, 0)


PRODUCERS = {"numba": lambda d: d, "cai": FakeCAI, "dlpack": FakeDLPack}


# --------------------------------------------------------------------------- pygraph

def relu_graph(y_strides=None, dtype=cudnn.data_type.FLOAT):
    g = cudnn.pygraph(io_data_type=dtype, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=SHAPE)
    Y = g.relu(input=X)
    Y.set_output(True).set_name("Y")
    if y_strides is not None:
        Y.set_stride(y_strides)
    g.build([cudnn.heur_mode.A])
    return g, X, Y


def poisoned(shape, dtype=np.float32):
    return cuda.to_device(np.full(shape, poison_value(dtype), dtype))


BIG = SHAPE[:-1] + [2 * SHAPE[-1]]
BAD_INPUTS = {   # X buffers that disagree with the declared FLOAT X of SHAPE
    "float64": lambda x: x.astype(np.float64),
    "int32": lambda x: (x * 8).astype(np.int32),
    "extra_channels": lambda x: np.concatenate([x, x[:, :2]], axis=1),
}


@pytest.mark.parametrize("producer", list(PRODUCERS))
@pytest.mark.parametrize("bad", list(BAD_INPUTS))
def test_mismatched_input_is_bad_param_naming_the_tensor(rng, producer, bad):
    g, X, Y = relu_graph()
    x = random(rng, SHAPE)
    given = BAD_INPUTS[bad](x)
    y = poisoned(SHAPE)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.execute({X: PRODUCERS[producer](cuda.to_device(given)), Y: y}, None)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM
    msg = str(e.value)
    assert f"tensor 'X' (uid {X.get_uid()})" in msg and f"dims {SHAPE}" in msg
    assert f"given {given.dtype.name} buffer shape {tuple(given.shape)}" in msg
    assert np.isnan(y.copy_to_host()).all()  # nothing ran


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_strided_output_view_declared_packed_is_bad_param(rng, producer):
    g, X, Y = relu_graph()
    big = poisoned(BIG)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.execute({X: cuda.to_device(random(rng, SHAPE)), Y: PRODUCERS[producer](lastdim(big, slice(None, None, 2)))}, None)
    assert f"tensor 'Y' (uid {Y.get_uid()})" in str(e.value) and "strides" in str(e.value)
    assert np.isnan(big.copy_to_host()).all()  # not a single element written, in the view or beside it


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_strided_output_view_matching_declared_strides_is_honoured(rng, producer):
    big_strides = list(memory.packed_strides(BIG))
    g, X, Y = relu_graph(y_strides=big_strides[:-1] + [2])
    x = random(rng, SHAPE)
    big = poisoned(BIG)
    g.execute({X: PRODUCERS[producer](cuda.to_device(x)), Y: PRODUCERS[producer](lastdim(big, slice(1, None, 2)))}, None)
    out = big.copy_to_host()
    assert_close(lastdim(out, slice(1, None, 2)), np.maximum(x.astype(np.float64), 0), "float32")
    assert np.isnan(lastdim(out, slice(None, None, 2))).all()  # the elements beside the view are untouched


def test_legal_forms_of_a_packed_tensor(rng):
    """1-D flat storage, a reshape of a packed buffer, untyped bytes, a bf16 tensor in uint16 bits."""
    g, X, Y = relu_graph()
    x = random(rng, SHAPE)
    n = int(np.prod(SHAPE))
    ref = np.maximum(x.astype(np.float64), 0)
    for make_x, make_y in [(lambda: cuda.to_device(x.reshape(-1)), lambda: poisoned([n])),
                           (lambda: cuda.to_device(x.reshape(SHAPE[0] * SHAPE[1], -1)), lambda: poisoned([n, 1])),
                           (lambda: FakeCAI(cuda.to_device(x), strides=False), lambda: poisoned(SHAPE))]:
        y = make_y()
        g.execute({X: make_x(), Y: y}, None)
        assert_close(y.copy_to_host().reshape(SHAPE), ref, "float32")
    raw = memory.allocate(n * 4)  # untyped bytes: only the size is checked
    memory.to_numba(raw, shape=(n,), dtype=np.float32).copy_to_device(x.reshape(-1))
    y = poisoned(SHAPE)
    g.execute({X: raw, Y: y}, None)
    assert_close(y.copy_to_host(), ref, "float32")
    gb, Xb, Yb = relu_graph(dtype=cudnn.data_type.BFLOAT16)
    xb = x.astype(ml_dtypes.bfloat16)
    yb = poisoned(SHAPE, np.uint16)
    gb.execute({Xb: cuda.to_device(xb.view(np.uint16)), Yb: yb}, None)
    assert_close(yb.copy_to_host().view(ml_dtypes.bfloat16), np.maximum(xb.astype(np.float64), 0), "bfloat16")
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="given float32 buffer"):
        gb.execute({Xb: cuda.to_device(x), Yb: yb}, None)


def test_raw_pointers_stay_unchecked(rng):
    g, X, Y = relu_graph()
    x = random(rng, SHAPE)
    xd, y = cuda.to_device(x), poisoned(SHAPE)
    g.execute({X: memory.device_pointer(xd), Y: memory.device_pointer(y)}, None)
    assert_close(y.copy_to_host(), np.maximum(x.astype(np.float64), 0), "float32")


# --------------------------------------------------------------------------- backend

def test_backend_variant_pack_mismatch_is_bad_param_with_last_error(rng):
    from ncudnn.backend import cudnnBackendExecute
    from ncudnn.types import cudnnBackendAttributeName_t as A, cudnnBackendAttributeType_t as T
    from ncudnn.types import cudnnBackendDescriptorType_t as D
    from ncudnn.types import cudnnPointwiseMode_t as P
    import importlib.util
    import os
    here = os.path.join(os.path.dirname(__file__), "..", "backend", "backend_build.py")
    spec = importlib.util.spec_from_file_location("_bb_for_buffer_checks", here)
    bb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bb)
    xs, ys = bb.tensor(1, SHAPE), bb.tensor(2, SHAPE)
    g = bb.graph([bb.pointwise_op(bb.pointwise_desc(P.CUDNN_POINTWISE_RELU_FWD), x=xs, y=ys)])
    DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
    h = bb.make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, g),
                                                       A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, 0)})
    cfg = bb.get(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 1)[1][0]
    plan = bb.make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, bb.handle()),
        A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfg)})
    x = random(rng, SHAPE)

    def pack(xbuf, ybuf):
        return bb.make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
            A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, [1, 2]),
            A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, [xbuf, ybuf]),
            A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, None)})

    y = poisoned(SHAPE)
    bb.expect(cudnnBackendExecute(bb.handle(), plan, pack(FakeDLPack(cuda.to_device(x.astype(np.float64))), y)),
              S.CUDNN_STATUS_BAD_PARAM, "uid 1", "declared FLOAT", "given float64 buffer")
    big = poisoned(BIG)
    bb.expect(cudnnBackendExecute(bb.handle(), plan, pack(cuda.to_device(x), FakeCAI(lastdim(big, slice(None, None, 2))))),
              S.CUDNN_STATUS_BAD_PARAM, "uid 2", "strides")
    assert np.isnan(y.copy_to_host()).all() and np.isnan(big.copy_to_host()).all()
    bb.ok(cudnnBackendExecute(bb.handle(), plan, pack(cuda.to_device(x), y)))
    assert_close(y.copy_to_host(), np.maximum(x.astype(np.float64), 0), "float32")


# --------------------------------------------------------------------------- legacy

def _legacy_desc(shape, dtype=cudnn.cudnnDataType_t.CUDNN_DATA_FLOAT):
    _, d = L.cudnnCreateTensorDescriptor()
    assert L.cudnnSetTensorNdDescriptor(d, dtype, len(shape), list(shape),
                                        list(memory.packed_strides(shape)))[0] == S.CUDNN_STATUS_SUCCESS
    return d


def _relu_desc():
    _, a = L.cudnnCreateActivationDescriptor()
    assert L.cudnnSetActivationDescriptor(a, cudnn.cudnnActivationMode_t.CUDNN_ACTIVATION_RELU, 0, 0.0)[0] == \
        S.CUDNN_STATUS_SUCCESS
    return a


def test_legacy_buffer_mismatch_is_bad_param(rng):
    _, h = cudnn.cudnnCreate()
    shape = SHAPE + [1]
    d, a = _legacy_desc(shape), _relu_desc()
    x = random(rng, shape)
    y = poisoned(shape)
    st = L.cudnnActivationForward(h, a, 1.0, d, cuda.to_device(x.astype(np.float64)), 0.0, d, y)
    assert st[0] == S.CUDNN_STATUS_BAD_PARAM and "given float64 buffer" in peek_last_error()
    big = poisoned(shape[:-2] + [2 * shape[-2], 1])
    st = L.cudnnActivationForward(h, a, 1.0, d, cuda.to_device(x), 0.0, d, big[:, :, ::2])
    assert st[0] == S.CUDNN_STATUS_BAD_PARAM and "strides" in peek_last_error()
    assert np.isnan(y.copy_to_host()).all() and np.isnan(big.copy_to_host()).all()
    assert L.cudnnActivationForward(h, a, 1.0, d, cuda.to_device(x), 0.0, d, y)[0] == S.CUDNN_STATUS_SUCCESS
    assert_close(y.copy_to_host(), np.maximum(x.astype(np.float64), 0), "float32")


# --------------------------------------------------------------------------- non-integer dims

@pytest.mark.parametrize("dims, strides", [([2.5, 4], None), ([2.0, 4], None), ([True, 4], None),
                                           ([2, 4], [4.0, 1]), ([2, 4], [4, 0.5]), ([2, "4"], None)])
def test_pygraph_non_integer_dims_are_bad_param(dims, strides):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.tensor(name="X", dim=dims, stride=strides)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "tensor 'X'" in str(e.value)
    t = g.tensor(name="Z", dim=[2, 4])
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="is not an integer"):
        t.set_dim(dims) if strides is None else t.set_stride(strides)
    assert t.get_dim() == [2, 4] and t.get_stride() == [4, 1]


def test_override_shapes_non_integer_is_bad_param(rng):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT,
                      is_override_shape_enabled=True)
    X = g.tensor(name="X", dim=SHAPE)
    Y = g.relu(input=X)
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    x, y = cuda.to_device(random(rng, SHAPE)), poisoned(SHAPE)
    bad = [SHAPE[0] + 0.5] + SHAPE[1:]
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="override_shapes"):
        g.execute({X: x, Y: y}, None, override_uids=[X.get_uid()], override_shapes=[bad])


@pytest.mark.parametrize("dims", [[2.5, 4, 8], [2.0, 4, 8], [True, 4, 8]])
def test_backend_non_integer_dims_are_bad_param(dims):
    from ncudnn.backend import cudnnBackendCreateDescriptor, cudnnBackendSetAttribute
    from ncudnn.types import cudnnBackendAttributeName_t as A, cudnnBackendAttributeType_t as T
    from ncudnn.types import cudnnBackendDescriptorType_t as D
    _, t = cudnnBackendCreateDescriptor(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)
    for name in (A.CUDNN_ATTR_TENSOR_DIMENSIONS, A.CUDNN_ATTR_TENSOR_STRIDES):
        st = cudnnBackendSetAttribute(t, name, T.CUDNN_TYPE_INT64, 3, dims)
        assert st[0] == S.CUDNN_STATUS_BAD_PARAM and "not an integer" in peek_last_error()


@pytest.mark.parametrize("dims", [[2.5, 4, 8], [2, 4, True]])
def test_legacy_non_integer_dims_are_bad_param(dims):
    _, d = L.cudnnCreateTensorDescriptor()
    F = cudnn.cudnnDataType_t.CUDNN_DATA_FLOAT
    assert L.cudnnSetTensorNdDescriptor(d, F, 3, dims, [32, 8, 1])[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnSetTensorNdDescriptor(d, F, 3, [2, 4, 8], dims)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnSetTensor4dDescriptorEx(d, F, 2, 4, 8, 1.5, 32, 8, 1, 1)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnSetTensorNdDescriptorEx(d, 0, F, 3, dims)[0] == S.CUDNN_STATUS_BAD_PARAM


# --------------------------------------------------------------------------- real torch on the GPU

@pytest.mark.gpu
def test_torch_tensors_are_checked_and_views_honoured(rng):
    torch = pytest.importorskip("torch")
    g, X, Y = relu_graph()
    x = torch.from_numpy(random(rng, SHAPE)).cuda()
    for bad in (x.double(), x.int(), torch.cat([x, x[:, :2]], 1)):
        y = torch.full(SHAPE, float("nan"), device="cuda")
        with pytest.raises(cudnn.cudnnGraphBadParamError, match=f"tensor 'X' \\(uid {X.get_uid()}\\)"):
            g.execute({X: bad, Y: y}, None)
        assert torch.isnan(y).all()
    big = torch.full(BIG, float("nan"), device="cuda")
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="tensor 'Y'"):
        g.execute({X: x, Y: lastdim(big, slice(None, None, 2))}, None)
    assert torch.isnan(big).all()
    g2, X2, Y2 = relu_graph(y_strides=list(big.stride()[:-1]) + [2])
    g2.execute({X2: x, Y2: lastdim(big, slice(1, None, 2))}, None)
    torch.cuda.synchronize()
    out = big.cpu().numpy()
    assert_close(lastdim(out, slice(1, None, 2)), np.maximum(x.cpu().numpy().astype(np.float64), 0), "float32")
    assert np.isnan(lastdim(out, slice(None, None, 2))).all()


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_a_new_view_at_a_known_address_is_checked_again(rng, producer):
    """The plan's binding cache is keyed by what a buffer says of itself, not by its address alone: after
    a good run, a buffer at the same address with another dtype (input) or as a strided view (output)
    is BAD_PARAM, and nothing is written."""
    g, X, Y = relu_graph()
    x = cuda.to_device(random(rng, SHAPE).astype(np.float32))
    n = int(np.prod(SHAPE))
    big = poisoned(BIG)
    packed = big.reshape(-1)[:n].reshape(SHAPE)  # starts where the strided view below starts
    g.execute({X: PRODUCERS[producer](x), Y: PRODUCERS[producer](packed)}, None)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.execute({X: PRODUCERS[producer](x.view(np.int32)), Y: PRODUCERS[producer](packed)}, None)
    assert f"tensor 'X' (uid {X.get_uid()})" in str(e.value) and "int32" in str(e.value)
    before = big.copy_to_host()
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.execute({X: PRODUCERS[producer](x), Y: PRODUCERS[producer](lastdim(big, slice(None, None, 2)))}, None)
    assert f"tensor 'Y' (uid {Y.get_uid()})" in str(e.value) and "strides" in str(e.value)
    np.testing.assert_array_equal(big.copy_to_host().view(np.uint32), before.view(np.uint32))


def test_a_cached_plan_names_the_tensors_of_the_graph_that_runs_it(rng):
    """Two graphs of one structure and uids share the compiled plan (the plan cache), but a bad buffer is
    named as the graph being executed names it (the full suite ran a same-structure graph first and the
    message named that graph's output)."""
    def graph(xname, yname):
        g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
        X = g.tensor(name=xname, dim=SHAPE)
        Y = g.relu(input=X)
        Y.set_output(True).set_name(yname)
        g.build([cudnn.heur_mode.A])
        return g, X, Y
    x = cuda.to_device(random(rng, SHAPE).astype(np.float32))
    g1, X1, Y1 = graph("first_in", "first_out")
    g1.execute({X1: x, Y1: poisoned(SHAPE)}, None)
    g2, X2, Y2 = graph("X", "Y")
    assert (X2.get_uid(), Y2.get_uid()) == (X1.get_uid(), Y1.get_uid())
    big = poisoned(BIG)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g2.execute({X2: x, Y2: lastdim(big, slice(None, None, 2))}, None)
    assert f"tensor 'Y' (uid {Y2.get_uid()})" in str(e.value) and "first_out" not in str(e.value)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g1.execute({X1: x, Y1: lastdim(big, slice(None, None, 2))}, None)
    assert "first_out" in str(e.value)
