"""Device memory from any producer, as one typed, strided view.

:func:`as_view` turns a torch or CuPy tensor, a numba device array (real or simulated), any object
with ``__cuda_array_interface__`` or ``__dlpack__``, or a raw integer device pointer (with the shape,
strides and dtype of a descriptor) into a :class:`DeviceView`. :func:`to_numba` gives a numba device
array over the same memory, the form kernels take. :func:`allocate` and :class:`WorkspacePool` make
device buffers (numba allocations on a GPU, host memory in the simulator).

The descriptor rule is cuDNN's for raw pointers: a buffer is accepted when it holds at least the bytes
that the descriptor's dims and strides address, whatever the producer's own shape.

In the simulator "device" memory is host memory: numba's simulated arrays (``cuda.to_device``) and
:func:`allocate` buffers are registered here by address, so their integer pointers resolve back to
memory, and :func:`to_numba` returns simulated arrays over that memory (NumPy stride tricks).
Plain host arrays (NumPy, CPU tensors) are refused in both places.
"""
import ctypes
import threading
import weakref

import ml_dtypes
import numpy as np

from .errors import BadParamError, NotSupportedError
from .platform import simulator_enabled
from .types import cudnnDataType_t, cudnnStatus_t

S = cudnnStatus_t
DT = cudnnDataType_t

# ---------------------------------------------------------------------------------------- dtypes

#: cudnnDataType_t -> NumPy dtype (ml_dtypes for bf16 / fp8)
DTYPE_OF = {
    DT.CUDNN_DATA_FLOAT: np.dtype(np.float32),
    DT.CUDNN_DATA_DOUBLE: np.dtype(np.float64),
    DT.CUDNN_DATA_HALF: np.dtype(np.float16),
    DT.CUDNN_DATA_BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    DT.CUDNN_DATA_INT8: np.dtype(np.int8),
    DT.CUDNN_DATA_UINT8: np.dtype(np.uint8),
    DT.CUDNN_DATA_INT32: np.dtype(np.int32),
    DT.CUDNN_DATA_UINT32: np.dtype(np.uint32),
    DT.CUDNN_DATA_INT64: np.dtype(np.int64),
    DT.CUDNN_DATA_BOOLEAN: np.dtype(np.bool_),
    DT.CUDNN_DATA_FP8_E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    DT.CUDNN_DATA_FP8_E5M2: np.dtype(ml_dtypes.float8_e5m2),
}
#: NumPy dtype -> cudnnDataType_t (the inverse of DTYPE_OF)
CUDNN_TYPE_OF = {v: k for k, v in DTYPE_OF.items()}

# names producers use (torch prints "torch.float32", CuPy / NumPy "float32")
_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "bf16": "bfloat16", "fp32": "float32",
    "fp16": "float16", "fp64": "float64", "int": "int32", "long": "int64", "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
}
_ML = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
       "float8_e5m2": ml_dtypes.float8_e5m2}

#: What kernels see: numba has no bf16 / fp8 array types, so those arrive as their bits.
_KERNEL_DTYPE = {np.dtype(ml_dtypes.bfloat16): np.dtype(np.uint16),
                 np.dtype(ml_dtypes.float8_e4m3fn): np.dtype(np.uint8),
                 np.dtype(ml_dtypes.float8_e5m2): np.dtype(np.uint8)}


def numpy_dtype(x):
    """NumPy dtype of a cudnnDataType_t, a NumPy/ml_dtypes dtype, or a name ("torch.bfloat16", "fp8_e4m3").

    Raises NotSupportedError (NOT_SUPPORTED_DATA_TYPE) for anything outside :data:`DTYPE_OF`.
    """
    if isinstance(x, (DT, int)) and not isinstance(x, bool):
        try:
            return DTYPE_OF[DT(int(x))]
        except (KeyError, ValueError):
            raise NotSupportedError(f"cudnnDataType_t {x!r} has no ncudnn buffer type",
                                    S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE) from None
    if isinstance(x, str) or not isinstance(x, (np.dtype, type)):
        name = str(x).rsplit(".", 1)[-1].lower()
        name = _ALIASES.get(name, name)
        x = _ML.get(name, name)
    try:
        dt = np.dtype(x)
    except TypeError:
        dt = None
    if dt not in CUDNN_TYPE_OF:
        raise NotSupportedError(f"dtype {x!r} is not one of ncudnn's buffer types",
                                S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    return dt


def cudnn_dtype(x):
    """cudnnDataType_t of a dtype or name (see :func:`numpy_dtype`)."""
    return CUDNN_TYPE_OF[numpy_dtype(x)]


def kernel_dtype(dtype):
    """The dtype a numba kernel receives for buffers of ``dtype``: bf16 -> uint16, fp8 -> uint8."""
    dt = np.dtype(dtype)
    return _KERNEL_DTYPE.get(dt, dt)


# ------------------------------------------------------------------------------------ geometry

def packed_strides(dims):
    """C-order (fully packed) strides in elements."""
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= int(d)
    return tuple(reversed(strides))


def span_bytes(dims, strides, itemsize):
    """Bytes addressed from the first element: (sum((d - 1) * s) + 1) * itemsize; 0 when any dim is 0."""
    if any(int(d) == 0 for d in dims):
        return 0
    return (sum((int(d) - 1) * int(s) for d, s in zip(dims, strides)) + 1) * int(itemsize)


def _bad(msg, status=S.CUDNN_STATUS_BAD_PARAM):
    return BadParamError(msg, status)


# ---------------------------------------------------------------------- simulated allocations

class _Region:
    """A simulated device allocation: host memory [base, base + size) kept alive by ``root``."""

    __slots__ = ("base", "size", "_root", "u8")

    def __init__(self, base, size, root):
        self.base, self.size = base, size
        self._root = weakref.ref(root) if _weakrefable(root) else (lambda r=root: r)
        self.u8 = np.ctypeslib.as_array((ctypes.c_uint8 * max(size, 1)).from_address(base))[:size]

    @property
    def root(self):
        return self._root()


def _weakrefable(obj):
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


_regions = {}  # base address -> _Region, simulated allocations only
# Reentrant: a finalizer (_forget) can run from garbage collection while this thread holds the lock.
_regions_lock = threading.RLock()


try:
    _byte_bounds = np.lib.array_utils.byte_bounds
except AttributeError:  # NumPy < 2
    _byte_bounds = np.byte_bounds


def _register(root):
    """Record a host array as simulated device memory; returns its _Region."""
    low, high = _byte_bounds(root)
    with _regions_lock:
        reg = _regions.get(low)
        if reg is not None and reg.size >= high - low and reg.root is root:
            return reg
        reg = _Region(low, high - low, root)
        _regions[low] = reg
    weakref.finalize(root, _forget, low, reg)
    return reg


def _forget(base, reg):
    with _regions_lock:
        if _regions.get(base) is reg:
            del _regions[base]


def _find_region(ptr):
    with _regions_lock:
        for reg in list(_regions.values()):
            if reg.base <= ptr < reg.base + max(reg.size, 1) and reg.root is not None:
                return reg
    return None


def _root_of(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


# ----------------------------------------------------------------------------------- the view

class DeviceView:
    """A typed, strided window on device memory.

    ``ptr`` device address of element [0, ..., 0] (a host address in the simulator); ``nbytes`` bytes
    usable from ``ptr`` (None when unknowable, e.g. a raw pointer); ``dtype`` NumPy dtype; ``shape``
    and ``strides`` (elements); ``owner`` keeps the memory alive.
    """

    __slots__ = ("ptr", "nbytes", "dtype", "shape", "strides", "owner", "_region", "_cache",
                 "__weakref__")

    def __init__(self, ptr, nbytes, dtype, shape, strides, owner=None, region=None):
        self.ptr = int(ptr)
        self.nbytes = None if nbytes is None else int(nbytes)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.strides = tuple(int(s) for s in strides)
        self.owner = owner
        self._region = region
        self._cache = {}

    @property
    def data_type(self):
        """cudnnDataType_t of the elements."""
        return CUDNN_TYPE_OF[self.dtype]

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def span(self):
        """Bytes the shape and strides address from ``ptr``."""
        return span_bytes(self.shape, self.strides, self.itemsize)

    def sub(self, offset=0, nbytes=None, dtype=None, shape=None, strides=None):
        """A view ``offset`` bytes in, over the same memory (owner kept): e.g. a tensor in a workspace.

        nbytes defaults to what is left; dtype to this view's; shape to the elements that fit (1-D);
        strides (elements) to packed. Raises BAD_PARAM_SIZE_INSUFFICIENT when it would leave this view.
        """
        offset = int(offset)
        left = None if self.nbytes is None else self.nbytes - offset
        if offset < 0 or (left is not None and left < 0):
            raise _bad(f"offset {offset} lies outside a view of {self.nbytes} bytes",
                       S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        nbytes = left if nbytes is None else int(nbytes)
        dt = self.dtype if dtype is None else numpy_dtype(dtype)
        if shape is None:
            shape = ((nbytes if nbytes is not None else 0) // dt.itemsize,)
        shape = tuple(int(d) for d in shape)
        strides = packed_strides(shape) if strides is None else tuple(int(s) for s in strides)
        need = span_bytes(shape, strides, dt.itemsize)
        if (nbytes is not None and need > nbytes) or (left is not None and nbytes > left):
            raise _bad(f"sub-view of {need} bytes at offset {offset} leaves a view of {self.nbytes} bytes",
                       S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        return DeviceView(self.ptr + offset, nbytes, dt, shape, strides, self.owner, self._region)

    def __repr__(self):
        return (f"DeviceView(ptr=0x{self.ptr:x}, nbytes={self.nbytes}, dtype={self.dtype.name}, "
                f"shape={self.shape}, strides={self.strides})")


# ------------------------------------------------------------------------------ producers

class _Raw:
    """What a producer says about its memory, before a descriptor is applied."""

    __slots__ = ("ptr", "extent", "dtype", "shape", "strides", "owner", "region")

    def __init__(self, ptr, extent, dtype, shape, strides, owner, region=None):
        self.ptr, self.extent, self.dtype = ptr, extent, dtype
        self.shape, self.strides, self.owner, self.region = shape, strides, owner, region


def _elem_strides(byte_strides, itemsize, what):
    out = []
    for s in byte_strides:
        if int(s) % itemsize:
            raise _bad(f"{what}: byte stride {s} is not a multiple of the element size {itemsize}")
        out.append(int(s) // itemsize)
    return tuple(out)


def _host_region(ptr, shape, strides, itemsize, owner, extent):
    """Simulator: the memory behind a host address that a producer vouches for (owner keeps it alive)."""
    reg = _find_region(ptr)
    if reg is not None:
        return reg
    # no simulated device array holds this address: reading it would touch arbitrary host memory
    raise _bad(f"pointer 0x{ptr:x} is not in any simulated device array (the simulator cannot vouch for it)")


def _from_sim_array(obj):
    a = obj._ary
    if not isinstance(a, np.ndarray):
        raise _bad(f"simulated device array wraps {type(a).__name__}, not an ndarray")
    if any(s < 0 for s in a.strides):
        raise _bad("negative strides are not supported")
    reg = _register(_root_of(a))
    ptr = a.__array_interface__["data"][0]
    dt = a.dtype
    itemsize = a.dtype.itemsize
    strides = _elem_strides(a.strides, itemsize, "numba array")
    extent = span_bytes(a.shape, strides, itemsize)
    return _Raw(ptr, extent, dt, a.shape, strides, reg.root, reg)


def _from_torch_like(obj):
    dev = getattr(obj, "device", None)
    dev_type = getattr(dev, "type", None)
    is_cuda = getattr(obj, "is_cuda", dev_type == "cuda")
    if not is_cuda:
        raise _bad(f"tensor on device {dev!r} is host memory; a device tensor is needed")
    shape = tuple(int(d) for d in obj.shape)
    strides = tuple(int(s) for s in obj.stride())
    itemsize = int(obj.element_size())
    return _Raw(int(obj.data_ptr()), span_bytes(shape, strides, itemsize), obj.dtype, shape, strides, obj)


def _from_cai(obj, cai):
    ptr = int(cai["data"][0] or 0)
    shape = tuple(int(d) for d in cai["shape"])
    typestr = cai["typestr"]
    try:
        raw_dt = np.dtype(typestr)
    except TypeError:
        raise _bad(f"__cuda_array_interface__ typestr {typestr!r} is not a NumPy type string") from None
    itemsize = raw_dt.itemsize
    if cai.get("strides") is None:
        strides = packed_strides(shape)
    else:
        strides = _elem_strides(cai["strides"], itemsize, "__cuda_array_interface__")
    dt = None if raw_dt.kind == "V" else raw_dt  # '<V2' is bf16 / fp8 bits with no name
    return _Raw(ptr, span_bytes(shape, strides, itemsize), dt, shape, strides, obj)


# DLPack (dlpack.h): structs and codes
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
_DL_DEVICE_OK = (kDLCUDA, kDLCUDAHost, kDLCUDAManaged)
_DL_CODES = {  # (code, bits) -> dtype
    (0, 8): np.int8, (0, 32): np.int32, (0, 64): np.int64, (1, 8): np.uint8, (1, 32): np.uint32,
    (2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64, (4, 16): ml_dtypes.bfloat16,
    (6, 8): np.bool_, (10, 8): ml_dtypes.float8_e4m3fn, (12, 8): ml_dtypes.float8_e5m2,
}

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype, _capsule_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj):
    capsule = obj.__dlpack__()
    name = _capsule_name(capsule)
    addr = _capsule_ptr(capsule, name)
    if name == b"dltensor":
        t = _DLTensor.from_address(addr)  # DLManagedTensor begins with its DLTensor
    elif name == b"dltensor_versioned":
        t = _DLManagedTensorVersioned.from_address(addr).dl_tensor
    else:
        raise _bad(f"__dlpack__ returned a capsule named {name!r}")
    if t.device.device_type not in _DL_DEVICE_OK:
        raise _bad(f"DLPack tensor on device type {t.device.device_type} is not CUDA memory")
    if t.dtype.lanes != 1:
        raise _bad(f"DLPack dtype with {t.dtype.lanes} lanes is not supported")
    code = _DL_CODES.get((t.dtype.code, t.dtype.bits))
    dt = np.dtype(code) if code is not None else f"DLPack type code {t.dtype.code} bits {t.dtype.bits}"
    itemsize = max(t.dtype.bits // 8, 1)
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = (tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides else packed_strides(shape))
    ptr = (t.data or 0) + int(t.byte_offset)
    # The unconsumed capsule frees the tensor when it dies: keep it (and the producer) alive.
    return _Raw(ptr, span_bytes(shape, strides, itemsize), dt, shape, strides, (obj, capsule))


def _gpu_extent(ptr):
    """Bytes from ptr to the end of its CUDA allocation, or None when the driver cannot say."""
    try:
        from cuda.bindings import driver

        err, base, size = driver.cuMemGetAddressRange(ptr)
        if int(err) != 0:
            return None
        return int(base) + int(size) - ptr
    except Exception:
        return None


def int_value(obj):
    """The integer value of a pointer or handle object, or None when it has none.

    Takes ints, ctypes.c_void_p, anything with __index__ / __int__ (cuda-python's CUdeviceptr, CUstream)
    or getPtr(); never a bool or a float.
    """
    if isinstance(obj, ctypes.c_void_p):
        return obj.value or 0
    if isinstance(obj, (bool, float)):
        return None
    for name in ("__index__", "__int__", "getPtr"):
        conv = getattr(obj, name, None)
        if conv is not None:
            try:
                return int(conv())
            except (TypeError, ValueError):
                return None
    return None


def _from_int(ptr):
    if simulator_enabled():
        reg = _find_region(ptr) if ptr else None
        if ptr and reg is None:
            raise _bad(f"pointer 0x{ptr:x} is not simulated device memory (ncudnn.memory.allocate, "
                       "cuda.to_device or device_pointer() make some)")
        extent = reg.base + reg.size - ptr if reg else None
        return _Raw(ptr, extent, None, None, None, reg.root if reg else None, reg)
    return _Raw(ptr, _gpu_extent(ptr) if ptr else None, None, None, None, None)


def _is_sim_array(obj):
    return simulator_enabled() and getattr(obj, "__cuda_ndarray__", False) and hasattr(obj, "_ary")


def describe(obj):
    """What ``obj`` says about its memory before a descriptor is applied: ``ptr``, ``extent`` (bytes,
    or None), ``dtype`` (a NumPy dtype, a producer's dtype object or name, or None when unknown),
    ``shape`` and element ``strides`` (both None for a raw integer pointer), ``owner``. Passing the
    result to :func:`as_view` does not describe ``obj`` again."""
    return _describe(obj)


def _describe(obj):
    """Dispatch on the producer kind."""
    if isinstance(obj, _Raw):
        return obj
    if isinstance(obj, DeviceView):
        return _Raw(obj.ptr, obj.nbytes, obj.dtype, obj.shape, obj.strides, obj.owner, obj._region)
    if _is_sim_array(obj):
        return _from_sim_array(obj)
    if isinstance(obj, np.ndarray):
        raise _bad("a NumPy array is host memory: copy it to the device first (cuda.to_device)")
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "stride", None)):
        return _from_torch_like(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj)
    ptr = int_value(obj)
    if ptr is None and obj is not None:
        raise _bad(f"{type(obj).__name__} is not device memory (no __cuda_array_interface__, "
                   "__dlpack__, data_ptr() or integer pointer)")
    return _from_int(ptr or 0)


def as_view(obj, dims=None, strides=None, dtype=None, alignment=None):
    """A :class:`DeviceView` of ``obj``, checked against an optional descriptor.

    dims / strides (elements) / dtype describe the tensor as a descriptor does; when dims is given it
    wins over the producer's own shape (strides then default to packed). ``alignment`` (bytes)
    defaults to the element size. Raises BadParamError with BAD_PARAM_NULL_POINTER,
    BAD_PARAM_MISALIGNED_POINTER, BAD_PARAM_SIZE_INSUFFICIENT or BAD_PARAM.
    """
    raw = _describe(obj)
    if raw.ptr == 0:
        raise _bad("device pointer is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    if not 0 < raw.ptr < 1 << 64:
        raise _bad(f"device pointer {raw.ptr} is not a 64-bit address")
    if dtype is None and raw.dtype is None:
        raise _bad(f"the element type of {type(obj).__name__} is unknown: pass dtype")
    dt = numpy_dtype(raw.dtype if dtype is None else dtype)
    if dims is not None:
        shape = tuple(int(d) for d in dims)
        strides = packed_strides(shape) if strides is None else tuple(int(s) for s in strides)
    elif raw.shape is None:
        raise _bad("a raw pointer needs dims (and strides) from its descriptor")
    else:
        shape = tuple(raw.shape)
        strides = tuple(raw.strides) if strides is None else tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise _bad(f"{len(shape)} dims but {len(strides)} strides")
    if any(d < 0 for d in shape) or any(s < 0 for s in strides):
        raise _bad(f"negative dims or strides: dims {shape}, strides {strides}")
    align = dt.itemsize if alignment is None else int(alignment)
    if align > 1 and raw.ptr % align:
        raise _bad(f"pointer 0x{raw.ptr:x} is not aligned to {align} bytes",
                   S.CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    need = span_bytes(shape, strides, dt.itemsize)
    if raw.extent is not None and need > raw.extent:
        raise _bad(f"buffer holds {raw.extent} bytes but dims {shape} strides {strides} of "
                   f"{dt.name} address {need}", S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    region = raw.region
    if region is None and simulator_enabled():
        region = _host_region(raw.ptr, shape, strides, dt.itemsize, raw.owner, raw.extent)
    return DeviceView(raw.ptr, raw.extent, dt, shape, strides, raw.owner, region)


def device_pointer(obj):
    """The integer device address of ``obj`` (simulated arrays become resolvable raw pointers)."""
    return _describe(obj).ptr


# ------------------------------------------------------------------------------- numba arrays

def to_numba(view, shape=None, strides=None, dtype=None):
    """A numba device array over the view's memory (a simulated array in the simulator).

    shape / strides (elements) default to the view's; dtype defaults to :func:`kernel_dtype` of the
    view's (bf16 and fp8 arrive as their bits). Cached per view and geometry.
    """
    shape = view.shape if shape is None else tuple(int(d) for d in shape)
    strides = (view.strides if shape == view.shape else packed_strides(shape)) if strides is None \
        else tuple(int(s) for s in strides)
    dt = kernel_dtype(view.dtype) if dtype is None else np.dtype(dtype)
    key = (shape, strides, dt.str)
    arr = view._cache.get(key)
    if arr is not None:
        return arr
    if len(shape) != len(strides):
        raise _bad(f"{len(shape)} dims but {len(strides)} strides")
    need = span_bytes(shape, strides, dt.itemsize)
    if view.nbytes is not None and need > view.nbytes:
        raise _bad(f"view holds {view.nbytes} bytes; shape {shape} strides {strides} of {dt.name} "
                   f"address {need}", S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    byte_strides = tuple(s * dt.itemsize for s in strides)
    if simulator_enabled():
        arr = _sim_array(view, shape, byte_strides, dt, need)
    else:
        arr = _gpu_array(view, shape, byte_strides, dt, need)
    view._cache[key] = arr
    return arr


def _sim_array(view, shape, byte_strides, dt, need):
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    reg = view._region
    if reg is None:
        raise _bad("view has no simulated memory behind it")
    offset = view.ptr - reg.base
    if offset < 0 or offset + need > reg.size:
        raise _bad(f"view [0x{view.ptr:x}, +{need}) leaves its simulated allocation",
                   S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    host = np.ndarray(shape, dtype=dt, buffer=reg.u8, offset=offset, strides=byte_strides)
    return FakeCUDAArray(host)


_ctx = threading.local()


def _gpu_array(view, shape, byte_strides, dt, need):
    from numba import cuda
    from numba.cuda.cudadrv import devicearray, driver

    ctx = getattr(_ctx, "ctx", None)
    if ctx is None:
        ctx = _ctx.ctx = cuda.current_context()
    mem = driver.MemoryPointer(ctx, driver.binding.CUdeviceptr(view.ptr), size=max(need, 1),
                               owner=view.owner)
    return devicearray.DeviceNDArray(shape=shape, strides=byte_strides, dtype=dt, gpu_data=mem,
                                     stream=0)


# ------------------------------------------------------------------------------- allocation

def allocate(nbytes, alignment=256):
    """A fresh device buffer of ``nbytes`` bytes (uint8 view, ``alignment``-aligned)."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise _bad(f"cannot allocate {nbytes} bytes")
    if simulator_enabled():
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        reg = _register(raw)
        start = (-reg.base) % alignment
        return DeviceView(reg.base + start, nbytes, np.uint8, (nbytes,), (1,), raw, reg)
    from numba import cuda

    try:
        arr = cuda.device_array(max(nbytes, 1), dtype=np.uint8)
    except Exception as e:
        from .errors import InternalError

        raise InternalError(f"device allocation of {nbytes} bytes failed: {e}",
                            S.CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) from None
    ptr = arr.__cuda_array_interface__["data"][0]
    if ptr % alignment:
        raise _bad(f"allocation at 0x{ptr:x} is not {alignment}-byte aligned")
    return DeviceView(ptr, nbytes, np.uint8, (nbytes,), (1,), arr)


class WorkspacePool:
    """A grow-only device buffer: :meth:`get` returns a view of at least the bytes asked for."""

    def __init__(self, alignment=256):
        self.alignment = alignment
        self._buf = None
        self.grow_count = 0

    @property
    def capacity(self):
        return 0 if self._buf is None else self._buf.nbytes

    def get(self, nbytes):
        """A uint8 view of ``nbytes`` bytes at the start of the pool (reallocated only to grow)."""
        nbytes = int(nbytes)
        if nbytes > self.capacity:
            self._buf = None  # drop the old buffer before taking the bigger one
            self._buf = allocate(nbytes, self.alignment)
            self.grow_count += 1
        if self._buf is None:
            self._buf = allocate(0, self.alignment)
        b = self._buf
        return DeviceView(b.ptr, nbytes, np.uint8, (nbytes,), (1,), b.owner, b._region)

    def release(self):
        self._buf = None
