"""Producer adapters: what a torch or CuPy tensor, a numba device array (real or simulated), an object with
``__cuda_array_interface__`` or ``__dlpack__``, or a raw integer device pointer says about its memory
(:func:`describe`), and :func:`as_view`, which checks that against a descriptor and makes the
:class:`~ncudnn.memory.view.DeviceView`.
"""
import ctypes

import ml_dtypes
import numpy as np

from ..platform import simulator_enabled
from ..types import cudnnStatus_t
from .dtypes import numpy_dtype
from .sim_regions import find_region, register_host, root_of
from .view import DeviceView, bad_param, packed_strides, span_bytes

__all__ = ["kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLCUDAManaged", "int_value", "describe", "as_view", "device_pointer"]

S = cudnnStatus_t


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
            raise bad_param(f"{what}: byte stride {s} is not a multiple of the element size {itemsize}")
        out.append(int(s) // itemsize)
    return tuple(out)


def _host_region(ptr, shape, strides, itemsize, owner, extent):
    """Simulator: the memory behind a host address that a producer vouches for (owner keeps it alive)."""
    reg = find_region(ptr)
    if reg is not None:
        return reg
    # no simulated device array holds this address: reading it would touch arbitrary host memory
    raise bad_param(f"pointer 0x{ptr:x} is not in any simulated device array (the simulator cannot vouch for it)")


def _from_sim_array(obj):
    a = obj._ary
    if not isinstance(a, np.ndarray):
        raise bad_param(f"simulated device array wraps {type(a).__name__}, not an ndarray")
    if any(s < 0 for s in a.strides):
        raise bad_param("negative strides are not supported")
    reg = register_host(root_of(a))
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
        raise bad_param(f"tensor on device {dev!r} is host memory; a device tensor is needed")
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
        raise bad_param(f"__cuda_array_interface__ typestr {typestr!r} is not a NumPy type string") from None
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
        raise bad_param(f"__dlpack__ returned a capsule named {name!r}")
    if t.device.device_type not in _DL_DEVICE_OK:
        raise bad_param(f"DLPack tensor on device type {t.device.device_type} is not CUDA memory")
    if t.dtype.lanes != 1:
        raise bad_param(f"DLPack dtype with {t.dtype.lanes} lanes is not supported")
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
        reg = find_region(ptr) if ptr else None
        if ptr and reg is None:
            raise bad_param(f"pointer 0x{ptr:x} is not simulated device memory (ncudnn.memory.allocate, "
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
        raise bad_param("a NumPy array is host memory: copy it to the device first (cuda.to_device)")
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "stride", None)):
        return _from_torch_like(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj)
    ptr = int_value(obj)
    if ptr is None and obj is not None:
        raise bad_param(f"{type(obj).__name__} is not device memory (no __cuda_array_interface__, "
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
        raise bad_param("device pointer is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    if not 0 < raw.ptr < 1 << 64:
        raise bad_param(f"device pointer {raw.ptr} is not a 64-bit address")
    if dtype is None and raw.dtype is None:
        raise bad_param(f"the element type of {type(obj).__name__} is unknown: pass dtype")
    dt = numpy_dtype(raw.dtype if dtype is None else dtype)
    if dims is not None:
        shape = tuple(int(d) for d in dims)
        strides = packed_strides(shape) if strides is None else tuple(int(s) for s in strides)
    elif raw.shape is None:
        raise bad_param("a raw pointer needs dims (and strides) from its descriptor")
    else:
        shape = tuple(raw.shape)
        strides = tuple(raw.strides) if strides is None else tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise bad_param(f"{len(shape)} dims but {len(strides)} strides")
    if any(d < 0 for d in shape) or any(s < 0 for s in strides):
        raise bad_param(f"negative dims or strides: dims {shape}, strides {strides}")
    align = dt.itemsize if alignment is None else int(alignment)
    if align > 1 and raw.ptr % align:
        raise bad_param(f"pointer 0x{raw.ptr:x} is not aligned to {align} bytes",
                   S.CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    need = span_bytes(shape, strides, dt.itemsize)
    if raw.extent is not None and need > raw.extent:
        raise bad_param(f"buffer holds {raw.extent} bytes but dims {shape} strides {strides} of "
                   f"{dt.name} address {need}", S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    region = raw.region
    if region is None and simulator_enabled():
        region = _host_region(raw.ptr, shape, strides, dt.itemsize, raw.owner, raw.extent)
    return DeviceView(raw.ptr, raw.extent, dt, shape, strides, raw.owner, region)


def device_pointer(obj):
    """The integer device address of ``obj`` (simulated arrays become resolvable raw pointers)."""
    return _describe(obj).ptr
