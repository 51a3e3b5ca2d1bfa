"""The value of a by-value tensor, from every form cuDNN users give it in.

A by-value tensor (an epsilon, a momentum, a scale) is a host scalar of the tensor's data type. The
two front ends differ in what a plain integer means, as cuDNN and cudnn-frontend do:

* backend API (``CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS``): the data pointer of a by-value tensor is a
  *host pointer to the value*. A Python int (or ``ctypes.c_void_p``, or an object with ``__index__``)
  is that address, and the value is read from it with the declared data type, at every execute;
* pygraph (``execute`` variant packs, op arguments): a Python number is the value itself, as in
  cudnn-frontend's Python API.

In both, a ctypes number (``ctypes.c_float(0.1)``, what ``&eps`` is in C), a ctypes array, a ctypes
pointer (``ctypes.pointer(x)``), ``ctypes.byref(x)``, a NumPy scalar, a one-element host array and a
Python float are read as the value they hold. A ctypes object whose size is not the data type's
(``c_double`` for a FLOAT tensor) is BAD_PARAM, not reinterpreted bits; an address that is NULL, in
the first page or not readable by this process is BAD_PARAM (never a crash); device memory is
BAD_PARAM: a by-value tensor lives on the host.
"""
import ctypes
import numbers
import os

import numpy as np

from .errors import BadParamError
from .types import cudnnStatus_t

S = cudnnStatus_t
#: addresses below this are never host pointers (the unmapped first page; small ints are values)
MIN_ADDRESS = 4096

_CARG = type(ctypes.byref(ctypes.c_int()))
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _write = _libc.write
    _write.restype, _write.argtypes = ctypes.c_ssize_t, [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
except (OSError, AttributeError):  # no C library to probe with: addresses are read unprobed
    _write = None


def readable(addr, nbytes):
    """True when this process can read ``nbytes`` bytes at host address ``addr`` (probed with a
    ``write`` into a pipe, which fails with EFAULT instead of faulting)."""
    if addr < MIN_ADDRESS:
        return False
    if _write is None:
        return True
    r, w = os.pipe()
    try:
        return _write(w, addr, nbytes) == nbytes
    finally:
        os.close(r)
        os.close(w)


def is_ctypes(obj):
    """True for ctypes numbers, arrays, structures, pointers and byref() arguments."""
    return isinstance(obj, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure, ctypes._Pointer, _CARG))


def _read(addr, dtype, what):
    if not addr:
        raise BadParamError(f"{what}: the host pointer is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    if not readable(addr, dtype.itemsize):
        raise BadParamError(f"{what}: 0x{addr:x} is not a readable host address (a by-value tensor's data "
                            "pointer is a host pointer to its value: pass a ctypes object, a NumPy scalar or "
                            "the address of host memory holding it)")
    return np.frombuffer(ctypes.string_at(addr, dtype.itemsize), dtype=dtype)[0]


def _from_ctypes(obj, dtype, what):
    if isinstance(obj, _CARG):
        obj = obj._obj
    if isinstance(obj, ctypes._Pointer):
        addr = ctypes.cast(obj, ctypes.c_void_p).value or 0
        size = ctypes.sizeof(obj._type_)
    elif isinstance(obj, ctypes.c_void_p):
        return _read(obj.value or 0, dtype, what)
    else:
        addr, size = ctypes.addressof(obj), ctypes.sizeof(obj)
    exact = isinstance(obj, ctypes._SimpleCData) or (isinstance(obj, ctypes._Pointer) and
                                                     issubclass(obj._type_, ctypes._SimpleCData))
    if (exact and size != dtype.itemsize) or size < dtype.itemsize:
        kind = type(obj).__name__ if not isinstance(obj, ctypes._Pointer) else f"pointer to {obj._type_.__name__}"
        raise BadParamError(f"{what}: a {kind} holds {size} bytes, the data type {dtype.name} has "
                            f"{dtype.itemsize}")
    return _read(addr, dtype, what)


def _is_device(obj):
    if hasattr(obj, "__cuda_array_interface__") or getattr(obj, "__cuda_ndarray__", False):
        return True
    dev = getattr(obj, "device", None)
    return getattr(obj, "is_cuda", False) is True or getattr(dev, "type", None) == "cuda"


def host_value(obj, dtype, what="by-value tensor", int_is_address=True):
    """The NumPy scalar of ``dtype`` that ``obj`` gives a by-value tensor (see the module docstring).

    ``int_is_address``: a Python int is a host pointer (backend API) rather than the value (pygraph).
    Raises BadParamError (BAD_PARAM, BAD_PARAM_NULL_POINTER) naming ``what``.
    """
    dtype = np.dtype(dtype)
    if obj is None:
        raise BadParamError(f"{what}: no value (NULL)", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    if is_ctypes(obj):
        return _from_ctypes(obj, dtype, what)
    if isinstance(obj, (bool, np.bool_)):
        if dtype == np.bool_ or not int_is_address:
            return dtype.type(obj)
        raise BadParamError(f"{what}: {obj!r} is not a host pointer")
    if isinstance(obj, (float, complex, np.generic)) or (isinstance(obj, numbers.Number) and
                                                         not isinstance(obj, numbers.Integral)):
        return _cast(obj, dtype, what)
    if isinstance(obj, numbers.Integral) or (hasattr(obj, "__index__") and not hasattr(obj, "shape")):
        if not int_is_address:
            return _cast(int(obj), dtype, what)
        return _read(int(obj.__index__()), dtype, what)
    if _is_device(obj):
        raise BadParamError(f"{what}: {type(obj).__name__} is device memory; a by-value tensor is a host "
                            "value (a ctypes object, a NumPy scalar or a host pointer)")
    if hasattr(obj, "item") or isinstance(obj, (np.ndarray, list, tuple)):
        a = np.asarray(obj)
        if a.size != 1:
            raise BadParamError(f"{what}: a host array of {a.size} elements; a by-value tensor holds one")
        return _cast(a.reshape(-1)[0], dtype, what)
    raise BadParamError(f"{what}: {type(obj).__name__} is neither a host value nor a host pointer")


def _cast(v, dtype, what):
    try:
        return np.asarray(v).astype(dtype).reshape(-1)[0]
    except (TypeError, ValueError, OverflowError) as e:
        raise BadParamError(f"{what}: {v!r} is not a {dtype.name} value ({e})") from None
