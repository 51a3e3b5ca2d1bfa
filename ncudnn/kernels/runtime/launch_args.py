"""Launch arguments in numba's kernel ABI, without numba device arrays (:mod:`ncudnn.kernels.runtime.launch`).

* views: :class:`ArgView` and :func:`as_arg_view` describe an array argument (``__cuda_array_interface__``
  objects, torch tensors, ncudnn ``DeviceView``, ``(ptr, shape, strides_bytes, itemsize[, dtype])``
  tuples); :func:`data_pointer`, :func:`stream_handle`, :func:`dim3`;
* the ABI: :func:`flatten_args` turns arguments into numba's ``.param`` values (arrays: 5 + 2 ndim
  64-bit words; records / CPointers: a device pointer; scalars at their width; tuples element by
  element), :func:`pack_params` lays them into 8-byte slots with the pointer array the driver takes;
* types: :func:`typeof_arg` (the dispatcher's choice for a value), :func:`normalize_argtypes`.
"""
import ctypes
import struct
from typing import NamedTuple

import numpy as np
from numba.cuda import types
from numba.cuda.core import config as _config
from numba.cuda.core import sigutils
from numba.cuda.np import numpy_support

__all__ = ["SIM", "ArgView", "as_arg_view", "data_pointer", "stream_handle", "dim3", "flatten_args",
           "pack_params", "typeof_arg", "normalize_argtypes"]

SIM = bool(_config.ENABLE_CUDASIM)


# ------------------------------------------------------------------------------- argument views

class ArgView(NamedTuple):
    """An array argument described without any array object: strides in bytes."""

    ptr: int
    shape: tuple
    strides: tuple
    itemsize: int
    dtype: object = None


def _c_strides(shape, itemsize):
    strides, acc = [], itemsize
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


def _is_view_tuple(obj):
    return (type(obj) is tuple and len(obj) in (4, 5) and isinstance(obj[0], int)
            and isinstance(obj[1], tuple) and isinstance(obj[2], tuple) and isinstance(obj[3], int))


def _from_cai(cai):
    shape = tuple(int(d) for d in cai["shape"])
    dt = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    strides = _c_strides(shape, dt.itemsize) if strides is None else tuple(int(s) for s in strides)
    return ArgView(int(cai["data"][0] or 0), shape, strides, dt.itemsize, dt)


def _from_torch(t):
    """torch tensors without their CAI (slow, and refused for tensors that require grad)."""
    if not SIM and not getattr(t, "is_cuda", True):
        raise TypeError(f"tensor on {getattr(t, 'device', 'the host')} is host memory, not a device array")
    it = int(t.element_size())
    try:
        dt = np.dtype(str(t.dtype).rsplit(".", 1)[-1])
    except TypeError:
        dt = None  # bfloat16 / fp8: the kernel signature gives the storage type
    v = ArgView(int(t.data_ptr()), tuple(int(d) for d in t.shape), tuple(int(s) * it for s in t.stride()), it, dt)
    if SIM and all(int(d) > 0 for d in v.shape):   # host memory as device memory: valid while the tensor lives
        from ...memory.sim_regions import register_span
        lo = sum((d - 1) * s for d, s in zip(v.shape, v.strides) if s < 0)
        hi = sum((d - 1) * s for d, s in zip(v.shape, v.strides) if s > 0) + it
        register_span(v.ptr + lo, hi - lo, t)
    return v


def _from_ndarray(a):
    return ArgView(int(a.__array_interface__["data"][0]), tuple(a.shape), tuple(a.strides),
                   a.dtype.itemsize, a.dtype)


def as_arg_view(obj):
    """:class:`ArgView` of an array argument (see the module docstring for what is accepted)."""
    if isinstance(obj, ArgView):
        return obj
    if _is_view_tuple(obj):
        return ArgView(*obj)
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "element_size", None)):
        return _from_torch(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai)
    if SIM:   # simulator device array (host memory), registered so that its pointer resolves while it lives
        ary = getattr(obj, "_ary", None)
        ary = ary if isinstance(ary, np.ndarray) else obj if isinstance(obj, np.ndarray) else None
        if ary is not None:
            from ...memory.sim_regions import register_host, root_of
            register_host(root_of(ary))
            return _from_ndarray(ary)
    sb = getattr(obj, "strides_bytes", None)
    if sb is not None:
        return ArgView(int(obj.ptr), tuple(obj.shape), tuple(sb), int(obj.itemsize),
                       getattr(obj, "dtype", None))
    if hasattr(obj, "ptr") and hasattr(obj, "dtype") and hasattr(obj, "strides"):
        dt = np.dtype(obj.dtype)  # ncudnn DeviceView convention: strides in elements
        return ArgView(int(obj.ptr), tuple(obj.shape), tuple(int(s) * dt.itemsize for s in obj.strides),
                       dt.itemsize, dt)
    raise TypeError(f"{type(obj).__name__} is not a device array argument (no __cuda_array_interface__, "
                    "not an ArgView / (ptr, shape, strides_bytes, itemsize) tuple)")


_PTR_GETTERS = {int: int}


def _ptr_getter(obj):
    if isinstance(obj, tuple):
        return lambda o: int(o[0])
    if callable(getattr(obj, "data_ptr", None)):  # torch: much cheaper than its CAI property
        return lambda o: o.data_ptr()
    if hasattr(obj, "device_ctypes_pointer"):  # numba device array
        return lambda o: o.device_ctypes_pointer.value or 0
    if hasattr(obj, "__cuda_array_interface__"):
        return lambda o: int(o.__cuda_array_interface__["data"][0] or 0)
    if isinstance(getattr(obj, "ptr", None), int):
        return lambda o: o.ptr
    return lambda o: as_arg_view(o).ptr


def data_pointer(obj):
    """Device address of an array argument or integer pointer (cached per argument type)."""
    t = type(obj)
    get = _PTR_GETTERS.get(t)
    if get is None:
        get = _PTR_GETTERS[t] = _ptr_getter(obj)
    return get(obj)


def stream_handle(stream):
    """Integer CUstream of an int, None, a numba stream (``.handle``), a torch stream (``.cuda_stream``),
    anything with ``__cuda_stream__`` or a cuda.bindings CUstream."""
    if stream is None:
        return 0
    if type(stream) is int:
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int((proto() if callable(proto) else proto)[1])
    h = getattr(stream, "cuda_stream", None)
    if h is None:
        h = getattr(stream, "handle", None)
    if h is None:
        h = stream
    if isinstance(h, ctypes.c_void_p):
        return h.value or 0
    return int(h)  # cuda-python handle objects give their value through int(); getPtr() is the storage address


def dim3(d):
    """(x, y, z) of an int or a 1-3 tuple."""
    if isinstance(d, (int, np.integer)):
        return (int(d), 1, 1)
    d = tuple(int(x) for x in d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"launch dimension {d} must have 1 to 3 entries")
    return d + (1,) * (3 - len(d))


# ------------------------------------------------------------------------------------------- ABI

_INT_FMT = {(8, True): "b", (8, False): "B", (16, True): "h", (16, False): "H",
            (32, True): "i", (32, False): "I", (64, True): "q", (64, False): "Q"}


def _contiguous(shape, strides, itemsize, order):
    dims = list(zip(shape, strides))
    if order == "C":
        dims.reverse()
    expected = itemsize
    for d, s in dims:
        if d == 0:
            return True
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def _check_array(ty, v, where):
    if len(v.shape) != ty.ndim or len(v.strides) != ty.ndim:
        raise TypeError(f"{where}: array of ndim {len(v.shape)} for parameter type {ty}")
    want = ty.dtype.size if isinstance(ty.dtype, types.Record) else ty.dtype.bitwidth // 8
    if v.itemsize != want:
        raise TypeError(f"{where}: itemsize {v.itemsize} for parameter type {ty} ({want} bytes)")
    if ty.layout in ("C", "F") and not _contiguous(v.shape, v.strides, v.itemsize, ty.layout):
        raise TypeError(f"{where}: strides {v.strides} are not {ty.layout}-contiguous for {ty}")


def _flatten(ty, val, out, ptrs, where):
    if isinstance(ty, types.Array):
        v = as_arg_view(val)
        _check_array(ty, v, where)
        out += [("q", 0), ("q", 0), ("q", int(np.prod(v.shape, dtype=np.int64))), ("q", v.itemsize)]
        ptrs.append((len(out), ty, val, where))
        out.append(("Q", v.ptr))
        out += [("q", int(d)) for d in v.shape]
        out += [("q", int(s)) for s in v.strides]
    elif isinstance(ty, (types.Record, types.CPointer)):
        p = val if isinstance(val, int) else None
        ptrs.append((len(out), ty, val, where))
        out.append(("Q", 0 if p is None else p))
    elif isinstance(ty, types.Boolean):
        out.append(("?", bool(val)))
    elif isinstance(ty, types.Integer):
        out.append((_INT_FMT[(ty.bitwidth, ty.signed)], int(val)))
    elif ty == types.float16:
        out.append(("H", int(np.float16(val).view(np.uint16))))
    elif ty == types.float32:
        out.append(("f", float(val)))
    elif ty == types.float64:
        out.append(("d", float(val)))
    elif ty in (types.complex64, types.complex128):
        f = "f" if ty == types.complex64 else "d"
        out += [(f, complex(val).real), (f, complex(val).imag)]
    elif isinstance(ty, (types.NPDatetime, types.NPTimedelta)):
        out.append(("q", int(np.asarray(val).view(np.int64))))
    elif isinstance(ty, types.BaseTuple):
        if len(ty) != len(val):
            raise TypeError(f"{where}: {len(val)} values for {ty}")
        for i, (t, v) in enumerate(zip(ty, val)):
            _flatten(t, v, out, ptrs, f"{where}[{i}]")
    elif isinstance(ty, types.EnumMember):
        _flatten(ty.dtype, val.value, out, ptrs, where)
    else:
        raise NotImplementedError(f"{where}: kernel parameter type {ty} is not supported")


def flatten_args(argtypes, args):
    """numba's kernel ABI for ``args`` of ``argtypes``.

    Returns ``(params, ptrs)``: ``params`` is the list of ``(struct format, value)`` PTX parameters in
    order; ``ptrs`` lists the pointer-carrying parameters (arrays, records, CPointers) as
    ``(param index, type, argument, where)``: the slots :meth:`PreparedLaunch.run` patches.
    """
    if len(argtypes) != len(args):
        raise TypeError(f"{len(args)} arguments for a kernel of {len(argtypes)} parameters")
    params, ptrs = [], []
    for i, (ty, val) in enumerate(zip(argtypes, args)):
        _flatten(ty, val, params, ptrs, f"argument {i}")
    return params, ptrs


def pack_params(params):
    """(value buffer, pointer array) for cuLaunchKernel: each parameter in its own 8-byte slot."""
    n = max(len(params), 1)
    vals = (ctypes.c_uint64 * n)()
    for i, (fmt, v) in enumerate(params):
        struct.pack_into("<" + fmt, vals, 8 * i, v)
    base = ctypes.addressof(vals)
    argv = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
    return vals, argv


# ------------------------------------------------------------------------------ argument types

def typeof_arg(val):
    """numba type of a launch argument, as numba's dispatcher would choose it."""
    if isinstance(val, (bool, np.bool_)):
        return types.boolean
    if isinstance(val, int):
        return types.int64
    if isinstance(val, float):
        return types.float64
    if isinstance(val, complex):
        return types.complex128
    if isinstance(val, np.generic):
        return numpy_support.from_dtype(val.dtype)
    if isinstance(val, tuple) and not isinstance(val, ArgView) and not _is_view_tuple(val):
        return types.BaseTuple.from_types([typeof_arg(v) for v in val])
    v = as_arg_view(val)
    if v.dtype is None or np.dtype(v.dtype).kind == "V" and np.dtype(v.dtype).fields is None:
        raise TypeError("an array argument without a dtype needs an explicit signature")
    if _contiguous(v.shape, v.strides, v.itemsize, "C"):
        layout = "C"
    elif _contiguous(v.shape, v.strides, v.itemsize, "F"):
        layout = "F"
    else:
        layout = "A"
    return types.Array(numpy_support.from_dtype(np.dtype(v.dtype)), len(v.shape), layout)


def normalize_argtypes(signature):
    """Tuple of numba argument types of a signature string, ``void(...)`` object or type tuple."""
    argtypes, ret = sigutils.normalize_signature(signature)
    if ret is not None and ret != types.none:
        raise TypeError(f"a kernel returns void, not {ret}")
    return tuple(argtypes)
