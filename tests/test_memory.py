"""ncudnn.memory: every producer kind becomes a DeviceView; to_numba shares its memory; the
descriptor rule and the NULL / misaligned / too-small statuses."""
import ctypes

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

import ncudnn
from ncudnn import memory as m
from ncudnn.memory import producers, sim_regions
from ncudnn.errors import BadParamError, CudnnError, NotSupportedError
from ncudnn.testing import random

S = ncudnn.cudnnStatus_t
DT = ncudnn.cudnnDataType_t

ALL_TYPES = {
    DT.CUDNN_DATA_FLOAT: np.float32, DT.CUDNN_DATA_DOUBLE: np.float64, DT.CUDNN_DATA_HALF: np.float16,
    DT.CUDNN_DATA_BFLOAT16: ml_dtypes.bfloat16, DT.CUDNN_DATA_INT8: np.int8, DT.CUDNN_DATA_UINT8: np.uint8,
    DT.CUDNN_DATA_INT32: np.int32, DT.CUDNN_DATA_INT64: np.int64, DT.CUDNN_DATA_BOOLEAN: np.bool_,
    DT.CUDNN_DATA_FP8_E4M3: ml_dtypes.float8_e4m3fn, DT.CUDNN_DATA_FP8_E5M2: ml_dtypes.float8_e5m2,
}


def status_of(fn, *a, **kw):
    with pytest.raises(CudnnError) as ei:
        fn(*a, **kw)
    return ei.value.status


# ---------------------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("cudnn_t", list(ALL_TYPES))
def test_dtype_round_trip(cudnn_t):
    np_t = np.dtype(ALL_TYPES[cudnn_t])
    assert m.numpy_dtype(cudnn_t) == np_t
    assert m.numpy_dtype(int(cudnn_t)) == np_t
    assert m.cudnn_dtype(np_t) is cudnn_t
    assert m.cudnn_dtype(np_t.name) is cudnn_t


@pytest.mark.parametrize("name,expected", [
    ("torch.float32", np.float32), ("torch.half", np.float16), ("torch.bfloat16", ml_dtypes.bfloat16),
    ("torch.float8_e4m3fn", ml_dtypes.float8_e4m3fn), ("torch.float8_e5m2", ml_dtypes.float8_e5m2),
    ("torch.bool", np.bool_), ("torch.long", np.int64), ("bf16", ml_dtypes.bfloat16), ("fp16", np.float16),
])
def test_dtype_names(name, expected):
    assert m.numpy_dtype(name) == np.dtype(expected)


@pytest.mark.parametrize("bad", [DT.CUDNN_DATA_INT8x4, DT.CUDNN_DATA_FP4_E2M1, np.complex64, "torch.quint8",
                                 999])
def test_dtype_unsupported(bad):
    assert status_of(m.numpy_dtype, bad) == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE


def test_kernel_dtype_gives_bits_for_bf16_and_fp8():
    assert m.kernel_dtype(ml_dtypes.bfloat16) == np.uint16
    assert m.kernel_dtype(ml_dtypes.float8_e4m3fn) == np.uint8
    assert m.kernel_dtype(ml_dtypes.float8_e5m2) == np.uint8
    assert m.kernel_dtype(np.float16) == np.float16
    assert m.kernel_dtype(np.float32) == np.float32


def test_span_bytes():
    assert m.span_bytes((2, 3, 4, 5), m.packed_strides((2, 3, 4, 5)), 4) == 2 * 3 * 4 * 5 * 4
    assert m.span_bytes((2, 3, 4, 5), (60, 1, 15, 3), 2) == 120 * 2  # channels-last
    assert m.span_bytes((1, 7, 1, 1), (7, 1, 7, 7), 4) == 28
    assert m.span_bytes((4, 0, 3), (0, 3, 1), 4) == 0
    assert m.span_bytes((3, 4), (0, 1), 4) == 16  # broadcast dim


# ------------------------------------------------------------------------- numba device arrays

def test_numba_array_view_and_shared_memory(rng):
    host = random(rng, (2, 3, 4), np.float32)
    d = cuda.to_device(host)
    v = m.as_view(d)
    assert v.shape == (2, 3, 4) and v.strides == (12, 4, 1)
    assert v.dtype == np.float32 and v.data_type is DT.CUDNN_DATA_FLOAT
    assert v.nbytes == 96 and v.span == 96
    arr = m.to_numba(v)
    np.testing.assert_array_equal(arr.copy_to_host(), host)
    flat = m.to_numba(v, (24,), (1,))
    val = rng.uniform(2, 3)
    flat[5] = val  # a write through one view is seen by the producer: same memory
    assert d.copy_to_host()[0, 1, 1] == np.float32(val)


def test_to_numba_cached_per_geometry():
    v = m.as_view(cuda.to_device(np.zeros(12, np.float32)))
    a, b = m.to_numba(v, (3, 4), (4, 1)), m.to_numba(v, (3, 4), (4, 1))
    assert a is b
    assert m.to_numba(v, (4, 3), (3, 1)) is not a


def test_nhwc_array_accepted_for_nchw_dims_with_channels_last_strides(rng):
    n, c, h, w = 2, 3, 2, 2
    nhwc = random(rng, (n, h, w, c), np.float32)
    d = cuda.to_device(nhwc)
    dims, strides = (n, c, h, w), (h * w * c, 1, w * c, c)
    v = m.as_view(d, dims=dims, strides=strides)
    assert v.shape == dims and v.strides == strides
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), nhwc.transpose(0, 3, 1, 2))


def test_flat_array_accepted_for_1c11(rng):
    bias = random(rng, (5,), np.float32)
    v = m.as_view(cuda.to_device(bias), dims=(1, 5, 1, 1), strides=(5, 1, 1, 1))
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host()[0, :, 0, 0], bias)


def test_kernel_reads_and_writes_through_views(rng):
    """A real kernel launch: y[n, c, h, w] = 2 * x[n, c, h, w], x laid out NHWC, y NCHW."""
    n, c, h, w = 2, 3, 2, 2
    x = random(rng, (n, h, w, c), np.float32)
    xv = m.as_view(cuda.to_device(x), dims=(n, c, h, w), strides=(h * w * c, 1, w * c, c))
    y = cuda.to_device(np.full((n, c, h, w), np.nan, np.float32))
    yv = m.as_view(y)

    @cuda.jit
    def twice(src, dst):
        i = cuda.grid(1)
        if i < dst.size:
            q, ww = divmod(i, dst.shape[3])
            q, hh = divmod(q, dst.shape[2])
            nn, cc = divmod(q, dst.shape[1])
            dst[nn, cc, hh, ww] = src[nn, cc, hh, ww] * np.float32(2.0)

    twice[1, 32](m.to_numba(xv), m.to_numba(yv))
    np.testing.assert_array_equal(y.copy_to_host(), 2 * x.transpose(0, 3, 1, 2))


@pytest.mark.sim_only  # a numba array of an ml_dtypes type exists only in the simulator
def test_bf16_views_arrive_as_bits(rng):
    x = random(rng, (6,), np.float32).astype(ml_dtypes.bfloat16)
    v = m.as_view(cuda.to_device(x))
    assert v.data_type is DT.CUDNN_DATA_BFLOAT16
    bits = m.to_numba(v).copy_to_host()
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, x.view(np.uint16))


# ------------------------------------------------------------------------------ raw pointers

def test_raw_pointer_with_descriptor(rng):
    host = random(rng, (4, 6), np.float32)
    d = cuda.to_device(host)
    ptr = m.device_pointer(d)
    assert isinstance(ptr, int) and ptr != 0
    v = m.as_view(ptr, dims=(2, 12), dtype=DT.CUDNN_DATA_FLOAT)
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), host.reshape(2, 12))
    # an offset pointer inside the allocation still resolves; its extent shrinks accordingly
    v2 = m.as_view(ptr + 8 * 4, dims=(16,), dtype="float32")
    assert v2.nbytes == 16 * 4
    np.testing.assert_array_equal(m.to_numba(v2).copy_to_host(), host.reshape(-1)[8:])
    assert status_of(m.as_view, ptr + 8 * 4, dims=(17,), dtype="float32") == \
        S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT


def test_raw_pointer_accepts_ctypes_and_index_objects():
    d = cuda.to_device(np.arange(4, dtype=np.int32))
    ptr = m.device_pointer(d)

    class Ptr:
        def __int__(self):
            return ptr

    for p in (ctypes.c_void_p(ptr), Ptr(), np.uint64(ptr)):
        v = m.as_view(p, dims=(4,), dtype="int32")
        np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), [0, 1, 2, 3])


def test_raw_pointer_needs_dims_and_dtype():
    ptr = m.device_pointer(cuda.to_device(np.zeros(4, np.float32)))
    assert status_of(m.as_view, ptr, dtype="float32") == S.CUDNN_STATUS_BAD_PARAM
    assert status_of(m.as_view, ptr, dims=(4,)) == S.CUDNN_STATUS_BAD_PARAM


@pytest.mark.sim_only
def test_unknown_pointer_refused_in_simulator():
    host = np.zeros(16, np.float32)  # host memory never registered as a simulated allocation
    assert status_of(m.as_view, host.ctypes.data, dims=(4,), dtype="float32") == S.CUDNN_STATUS_BAD_PARAM


@pytest.mark.parametrize("null", [0, None, ctypes.c_void_p(None)])
def test_null_pointer(null):
    assert status_of(m.as_view, null, dims=(4,), dtype="float32") == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER


def test_misaligned_for_declared_alignment():
    buf = m.allocate(256, alignment=256)
    assert buf.ptr % 256 == 0
    assert m.as_view(buf.ptr + 16, dims=(4,), dtype="float32", alignment=16).ptr == buf.ptr + 16
    assert status_of(m.as_view, buf.ptr + 8, dims=(4,), dtype="float32", alignment=16) == \
        S.CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER
    # default alignment is the element size
    assert status_of(m.as_view, buf.ptr + 2, dims=(4,), dtype="float32") == \
        S.CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER
    assert m.as_view(buf.ptr + 2, dims=(4,), dtype="float16").ptr == buf.ptr + 2


def test_too_small_for_descriptor():
    d = cuda.to_device(np.zeros((2, 3, 4, 4), np.float16))  # 96 elements
    assert status_of(m.as_view, d, dims=(2, 3, 4, 5)) == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    # the same element count is not enough when the strides address more (padding)
    assert status_of(m.as_view, d, dims=(2, 3, 4, 4), strides=(64, 16, 4, 1)) == \
        S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    # a wider declared dtype makes the same dims too large
    assert status_of(m.as_view, d, dims=(2, 3, 4, 4), dtype="float32") == \
        S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT


def test_to_numba_beyond_view_refused():
    v = m.as_view(cuda.to_device(np.zeros(8, np.float32)))
    assert status_of(m.to_numba, v, (9,), (1,)) == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT


def test_bad_geometry():
    d = cuda.to_device(np.zeros(16, np.float32))
    assert status_of(m.as_view, d, dims=(4, 4), strides=(4,)) == S.CUDNN_STATUS_BAD_PARAM
    assert status_of(m.as_view, d, dims=(4, -1)) == S.CUDNN_STATUS_BAD_PARAM
    assert status_of(m.as_view, d, dims=(4, 4), strides=(4, -1)) == S.CUDNN_STATUS_BAD_PARAM
    assert status_of(m.as_view, cuda.to_device(np.zeros(16, np.float32))[::-1]) == S.CUDNN_STATUS_BAD_PARAM


def test_host_memory_and_junk_refused():
    assert status_of(m.as_view, np.zeros(4, np.float32)) == S.CUDNN_STATUS_BAD_PARAM
    assert status_of(m.as_view, "not memory") == S.CUDNN_STATUS_BAD_PARAM
    assert status_of(m.as_view, 1.5) == S.CUDNN_STATUS_BAD_PARAM
    # NumPy's own DLPack capsule says kDLCPU: host memory
    assert status_of(m.as_view, _DLPackOnly(np.zeros(4, np.float32))) == S.CUDNN_STATUS_BAD_PARAM


def test_errors_are_cudnn_errors_with_messages():
    with pytest.raises(BadParamError, match="NULL"):
        m.as_view(0, dims=(1,), dtype="float32")
    with pytest.raises(NotSupportedError):
        m.as_view(cuda.to_device(np.zeros(2, np.complex64)))


# --------------------------------------------------------------------- duck-typed producers

class _DLPackOnly:
    """Hides everything of a NumPy array but its DLPack export."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)


def bits(host):
    """What a kernel sees of ``host``: bf16 / fp8 as their bits."""
    return host.view(m.kernel_dtype(host.dtype))


class Dev:
    """A device copy (bf16 / fp8 uploaded as bits, as torch holds them) and the facts a producer reports."""

    def __init__(self, d, dtype):
        self.d, self.dtype = d, np.dtype(dtype)
        self.ptr = m.device_pointer(d)
        self.shape = tuple(d.shape)
        self.byte_strides = tuple(d.strides)

    @classmethod
    def upload(cls, host):
        return cls(cuda.to_device(bits(host)), host.dtype)

    @property
    def T(self):
        """The transposed view of the same memory (numba's DeviceNDArray.T copies on a GPU)."""
        t = Dev.__new__(Dev)
        t.d, t.dtype, t.ptr = self.d, self.dtype, self.ptr
        t.shape, t.byte_strides = self.shape[::-1], self.byte_strides[::-1]
        return t


class FakeCAI:
    """A CuPy-like producer: only __cuda_array_interface__."""

    def __init__(self, dev, typestr=None, ptr=None):
        self._keep = dev
        self.__cuda_array_interface__ = {
            "data": (dev.ptr if ptr is None else ptr, False), "shape": dev.shape, "strides": dev.byte_strides,
            "typestr": typestr or dev.dtype.str, "version": 3, "stream": None}


class FakeTorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class FakeTorch:
    """A torch.Tensor look-alike: data_ptr(), stride() in elements, element_size(), dtype, is_cuda."""

    def __init__(self, dev, dtype_name, is_cuda=True, ptr=None):
        self._keep = dev
        self.shape = dev.shape
        self.dtype = FakeTorchDtype(dtype_name)
        self.is_cuda = is_cuda
        self._ptr = dev.ptr if ptr is None else ptr
        self._strides = tuple(s // dev.dtype.itemsize for s in dev.byte_strides)
        self._itemsize = dev.dtype.itemsize

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides

    def element_size(self):
        return self._itemsize


def test_cuda_array_interface_producer(rng):
    host = random(rng, (3, 5), np.float32)
    dev = Dev.upload(host)
    v = m.as_view(FakeCAI(dev))
    assert v.shape == (3, 5) and v.strides == (5, 1) and v.dtype == np.float32
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), host)
    # transposed (non-contiguous) producer: strides carried through
    vt = m.as_view(FakeCAI(dev.T))
    assert vt.strides == (1, 5)
    np.testing.assert_array_equal(m.to_numba(vt).copy_to_host(), host.T)
    assert status_of(m.as_view, FakeCAI(dev, ptr=0)) == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER


def test_cuda_array_interface_opaque_typestr_needs_dtype(rng):
    x = random(rng, (4,), np.float32).astype(ml_dtypes.bfloat16)
    cai = FakeCAI(Dev.upload(x), typestr="<V2")
    assert status_of(m.as_view, cai) == S.CUDNN_STATUS_BAD_PARAM
    v = m.as_view(cai, dtype=DT.CUDNN_DATA_BFLOAT16)
    assert v.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), bits(x))


@pytest.mark.parametrize("name,np_t", [("float32", np.float32), ("bfloat16", ml_dtypes.bfloat16),
                                       ("float8_e4m3fn", ml_dtypes.float8_e4m3fn), ("int64", np.int64)])
def test_torch_like_producer(rng, name, np_t):
    host = random(rng, (2, 3), np.float32).astype(np_t)
    v = m.as_view(FakeTorch(Dev.upload(host), name))
    assert v.dtype == np.dtype(np_t) and v.shape == (2, 3) and v.strides == (3, 1)
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), bits(host))


def test_torch_like_cpu_tensor_refused_and_null():
    dev = Dev.upload(np.zeros(3, np.float32))
    assert status_of(m.as_view, FakeTorch(dev, "float32", is_cuda=False)) == S.CUDNN_STATUS_BAD_PARAM
    assert status_of(m.as_view, FakeTorch(dev, "float32", ptr=0)) == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER


# DLPack producers built by hand: a DLManagedTensor(Versioned) in a capsule, device = kDLCUDA
_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeDLPack:
    CODES = {np.dtype(np.float32): (2, 32), np.dtype(np.int8): (0, 8), np.dtype(ml_dtypes.bfloat16): (4, 16),
             np.dtype(ml_dtypes.float8_e5m2): (12, 8)}

    def __init__(self, dev, versioned=False, device_type=m.kDLCUDA, byte_offset=0, strides=True):
        self._keep = dev
        nd = len(dev.shape)
        self._shape = (ctypes.c_int64 * nd)(*dev.shape)
        self._strides = (ctypes.c_int64 * nd)(*(s // dev.dtype.itemsize for s in dev.byte_strides))
        t = producers._DLTensor()
        t.data = dev.ptr - byte_offset
        t.byte_offset = byte_offset
        t.device.device_type, t.device.device_id = device_type, 0
        t.ndim = nd
        t.dtype.code, t.dtype.bits = self.CODES[dev.dtype]
        t.dtype.lanes = 1
        t.shape = self._shape
        t.strides = self._strides if strides else None
        if versioned:
            self._struct = producers._DLManagedTensorVersioned(major=1, minor=0, dl_tensor=t)
            self._name = b"dltensor_versioned"
        else:
            self._struct = t
            self._name = b"dltensor"

    def __dlpack__(self, **kw):
        return _PyCapsule_New(ctypes.addressof(self._struct), self._name, None)

    def __dlpack_device__(self):
        return (m.kDLCUDA, 0)


@pytest.mark.parametrize("versioned", [False, True])
@pytest.mark.parametrize("np_t", [np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2, np.int8])
def test_dlpack_producer(rng, versioned, np_t):
    host = random(rng, (3, 4), np.float32, -4, 4).astype(np_t)
    v = m.as_view(FakeDLPack(Dev.upload(host), versioned=versioned))
    assert v.dtype == np.dtype(np_t) and v.shape == (3, 4) and v.strides == (4, 1)
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), bits(host))


def test_dlpack_byte_offset_no_strides_and_host_device(rng):
    host = random(rng, (2, 4), np.float32)
    dev = Dev.upload(host)
    v = m.as_view(FakeDLPack(dev, byte_offset=64, strides=False))
    assert v.ptr == dev.ptr and v.strides == (4, 1)
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), host)
    assert status_of(m.as_view, FakeDLPack(dev, device_type=m.kDLCPU)) == S.CUDNN_STATUS_BAD_PARAM


# ------------------------------------------------------------------------------- allocation

def test_allocate_alignment_and_use(rng):
    for align in (16, 256, 1024):
        buf = m.allocate(100, alignment=align)
        assert buf.ptr % align == 0 and buf.nbytes == 100 and buf.dtype == np.uint8
    buf = m.allocate(64)
    f = m.to_numba(buf, (16,), (1,), dtype=np.float32)
    vals = random(rng, (16,), np.float32)
    f.copy_to_device(vals)
    again = m.as_view(buf.ptr, dims=(16,), dtype="float32")
    np.testing.assert_array_equal(m.to_numba(again).copy_to_host(), vals)
    assert status_of(m.allocate, -1) == S.CUDNN_STATUS_BAD_PARAM


def test_workspace_pool_grows_only():
    pool = m.WorkspacePool()
    assert pool.capacity == 0
    a = pool.get(1000)
    assert a.nbytes == 1000 and pool.capacity >= 1000 and pool.grow_count == 1
    b = pool.get(10)
    assert b.ptr == a.ptr and b.nbytes == 10 and pool.grow_count == 1
    c = pool.get(5000)
    assert c.nbytes == 5000 and pool.capacity >= 5000 and pool.grow_count == 2
    assert pool.get(4000).ptr == c.ptr and pool.grow_count == 2
    assert m.to_numba(pool.get(5000)).shape == (5000,)
    pool.release()
    assert pool.capacity == 0


def test_sub_views_of_a_workspace(rng):
    ws = m.allocate(256)
    vals = random(rng, (2, 3), np.float32)
    t = ws.sub(64, dtype="float32", shape=(2, 3))
    assert t.ptr == ws.ptr + 64 and t.nbytes == 192 and t.strides == (3, 1) and t.owner is ws.owner
    m.to_numba(t).copy_to_device(vals)
    again = m.as_view(ws.ptr + 64, dims=(6,), dtype="float32")
    np.testing.assert_array_equal(m.to_numba(again).copy_to_host(), vals.reshape(-1))
    assert ws.sub(100).shape == (156,) and ws.sub(128, dtype="float64").shape == (16,)
    assert status_of(ws.sub, 200, dtype="float32", shape=(15,)) == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    assert status_of(ws.sub, 300) == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    assert status_of(ws.sub, 0, nbytes=512) == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT


@pytest.mark.sim_only
def test_simulated_allocation_forgotten_when_freed():
    d = cuda.to_device(np.zeros(8, np.float32))
    ptr = m.device_pointer(d)
    assert m.as_view(ptr, dims=(8,), dtype="float32").nbytes == 32
    del d
    import gc

    gc.collect()
    assert ptr not in sim_regions._regions
    assert status_of(m.as_view, ptr, dims=(8,), dtype="float32") == S.CUDNN_STATUS_BAD_PARAM


@pytest.mark.sim_only
def test_allocation_freed_while_the_registry_is_busy():
    """Garbage collection can free a simulated array while this thread holds the registry lock (inside
    as_view): its finalizer must not deadlock."""
    import gc
    import threading

    done = []

    def scenario():
        d = cuda.to_device(np.zeros(8, np.float32))
        m.device_pointer(d)
        with sim_regions._regions_lock:
            del d
            gc.collect()  # runs the finalizer here, lock held
        done.append(True)

    t = threading.Thread(target=scenario, daemon=True)
    t.start()
    t.join(timeout=20)
    assert done == [True], "finalizer deadlocked on the registry lock"


@pytest.mark.gpu
def test_gpu_raw_pointer_extent_from_driver(rng):
    host = random(rng, (1024,), np.float32)
    d = cuda.to_device(host)
    ptr = d.__cuda_array_interface__["data"][0]
    v = m.as_view(ptr, dims=(1024,), dtype="float32")
    assert v.nbytes is not None and v.nbytes >= 4096
    np.testing.assert_array_equal(m.to_numba(v).copy_to_host(), host)
    assert status_of(m.as_view, ptr, dims=(1 << 30,), dtype="float32") == \
        S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
