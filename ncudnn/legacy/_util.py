"""Small checks shared by the legacy API: enum arguments, descriptor arguments, host scalars, arrays.

Each raises a :class:`~ncudnn.errors.CudnnError` with cuDNN's documented status (BAD_PARAM for a bad
enumerant, a NULL or destroyed descriptor, a NULL data pointer); the ``c_api`` wrapper turns it into
the returned status and the last-error message.
"""
import ctypes
import math
import numbers

import numpy as np

from ..errors import BadParamError, CudnnError
from ..types import cudnnStatus_t

S = cudnnStatus_t


def enum_arg(cls, value, name):
    """``value`` as a member of enum ``cls`` (BAD_PARAM for anything else, COUNT sentinels included)."""
    try:
        m = cls(int_arg(value, name))
    except (BadParamError, ValueError):
        raise BadParamError(f"{name} = {value!r:.60} is not a valid {cls.__name__} enumerant") from None
    if m.name.endswith("_COUNT"):
        raise BadParamError(f"{name} = {m.name} is a count, not a valid {cls.__name__} enumerant")
    return m


INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1          # a C int
SIZE_MAX = 2 ** 64 - 1                            # a size_t


def int_arg(value, name, lo=INT_MIN, hi=INT_MAX):
    """``value`` as an int in the C type's range [lo, hi] (a C ``int`` by default): a Python / NumPy
    integer, or a float with an integral value (BAD_PARAM for inf, nan, fractions, strings, None,
    sequences and values the C type cannot hold)."""
    if isinstance(value, (bool, np.bool_)):
        raise BadParamError(f"{name} = {value!r} is not an integer")
    if isinstance(value, (numbers.Integral, np.integer)):
        v = int(value)
    else:
        try:
            f = float(value) if isinstance(value, (numbers.Real, np.floating)) else None
        except (OverflowError, TypeError, ValueError):
            f = None
        if f is None or not math.isfinite(f) or f != int(f):
            raise BadParamError(f"{name} = {value!r:.60} is not an integer")
        v = int(f)
    if not lo <= v <= hi:
        raise BadParamError(f"{name} = {v:.6g} is outside the range of its C type [{lo}, {hi}]")
    return v


def size_arg(value, name):
    """A ``size_t`` argument (a byte count): NULL-ish None is 0; BAD_PARAM for negatives, non-integers
    and values past SIZE_MAX."""
    return int_arg(0 if value is None else value, name, 0, SIZE_MAX)


def int_array(values, count, name):
    """The first ``count`` entries of ``values`` as ints (BAD_PARAM when NULL, not a sequence or too
    short)."""
    if values is None:
        raise BadParamError(f"{name} is NULL")
    count = int_arg(count, f"the entry count of {name}")
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise BadParamError(f"{name} = {values!r:.60} is not an array")
    try:
        vals = list(values)
    except Exception as e:
        raise BadParamError(f"{name} is not an array ({type(e).__name__}: {e})") from None
    if len(vals) < count:
        raise BadParamError(f"{name} has {len(vals)} entries, {count} needed")
    return tuple(int_arg(v, f"{name}[{i}]") for i, v in enumerate(vals[:count]))


def float_arg(value, name):
    """``value`` as a float (BAD_PARAM for strings, None, sequences and integers past the double range)."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, (str, bytes)) or value is None:
        raise BadParamError(f"{name} = {value!r:.60} is not a number")
    try:
        return float(value)
    except (OverflowError, TypeError, ValueError):
        raise BadParamError(f"{name} = {value!r:.60} is not a number (in the range of a double)") from None


def host_scalar(value, name):
    """A scaling factor given as a Python number, a NumPy scalar, a one-element host array or a ctypes
    number (``ctypes.c_float(1.0)``, what ``&alpha`` is in C)."""
    if value is None:
        raise BadParamError(f"{name} is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    if isinstance(value, ctypes._SimpleCData):
        value = value.value
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise BadParamError(f"{name} is a host array of {value.size} elements; one is needed")
        value = value.reshape(-1)[0]
    elif isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise BadParamError(f"{name} is a sequence of {len(value)} elements; one is needed")
        value = value[0]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Number, np.generic)):
        raise BadParamError(f"{name} = {value!r} is not a host scalar")
    try:
        return float(value)
    except (OverflowError, TypeError, ValueError):
        raise BadParamError(f"{name} = {value!r:.60} is not a real number (in the range of a double)") from None


_NOT_POINTERS = (str, bytes, bool, np.bool_, float, complex, np.floating, list, tuple, dict, set)


def _pointer_like(ptr, name):
    if isinstance(ptr, _NOT_POINTERS):
        raise BadParamError(f"{name} = {ptr!r:.60} is not a device pointer or device array")
    if isinstance(ptr, (numbers.Integral, np.integer)) and not 0 <= int(ptr) <= SIZE_MAX:
        raise BadParamError(f"{name} = {int(ptr):.6g} is not a 64-bit address")


def need_ptr(ptr, name):
    """Device data arguments must not be NULL (nor a value that is no pointer: a string, a float...)."""
    if ptr is None or (isinstance(ptr, int) and not isinstance(ptr, bool) and ptr == 0):
        raise BadParamError(f"{name} is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    _pointer_like(ptr, name)
    return ptr


def optional_ptrs(**ptrs):
    """Device data arguments a call does not read here: each NULL or pointer-like."""
    for name, p in ptrs.items():
        if p is not None:
            _pointer_like(p, name)


class Descriptor:
    """Base of the legacy descriptors: created unset; ``check`` rejects NULL / destroyed / unset ones."""

    KIND = "descriptor"

    def __init__(self):
        self.destroyed = False
        self.is_set = False

    def __repr__(self):
        state = "destroyed" if self.destroyed else ("set" if self.is_set else "unset")
        return f"<{type(self).__name__} {state}>"


def desc_arg(desc, cls, name, need_set=True):
    """``desc`` checked to be a live descriptor of ``cls`` (and set, unless ``need_set`` is False)."""
    if desc is None or (isinstance(desc, int) and desc == 0):
        raise BadParamError(f"{name} is NULL: create it with cudnnCreate{cls.KIND}Descriptor()")
    if not isinstance(desc, cls):
        raise BadParamError(f"{name} is a {type(desc).__name__}, not a cudnn{cls.KIND}Descriptor_t")
    if desc.destroyed:
        raise BadParamError(f"{name} was destroyed")
    if need_set and not desc.is_set:
        raise BadParamError(f"{name} has not been set")
    return desc


def optional_descs(**descs):
    """Descriptor arguments a call only sizes by, each NULL (None) or a live descriptor (BAD_PARAM for a
    destroyed one or anything that is not a descriptor)."""
    for name, d in descs.items():
        if d is None:
            continue
        if not isinstance(d, Descriptor):
            raise BadParamError(f"{name} = {d!r:.60} is not a cuDNN descriptor")
        if d.destroyed:
            raise BadParamError(f"{name} was destroyed")


def plausible(scope, ptrs=(), sizes=()):
    """Arguments a call forwards or does not read still get BAD_PARAM when no C value could be them:
    in ``scope`` (the call's ``locals()``) every ``*Desc`` is NULL or a live descriptor, every ``*Data``
    and each name in ``ptrs`` NULL or pointer-like, each name in ``sizes`` a ``size_t``."""
    optional_descs(**{k: v for k, v in scope.items() if k.endswith("Desc")})
    optional_ptrs(**{k: v for k, v in scope.items() if k.endswith("Data") or k in ptrs})
    for k in sizes:
        size_arg(scope[k], k)


def not_supported(message, status=S.CUDNN_STATUS_NOT_SUPPORTED):
    return CudnnError(message, status)
