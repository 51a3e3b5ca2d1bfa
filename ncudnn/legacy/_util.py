"""Small checks shared by the legacy API: enum arguments, descriptor arguments, host scalars, arrays.

Each raises a :class:`~ncudnn.errors.CudnnError` with cuDNN's documented status (BAD_PARAM for a bad
enumerant, a NULL or destroyed descriptor, a NULL data pointer); the ``c_api`` wrapper turns it into
the returned status and the last-error message.
"""
import ctypes
import numbers

import numpy as np

from ..errors import BadParamError, CudnnError
from ..types import cudnnStatus_t

S = cudnnStatus_t


def enum_arg(cls, value, name):
    """``value`` as a member of enum ``cls`` (BAD_PARAM for anything else, COUNT sentinels included)."""
    try:
        m = cls(int(value))
    except (TypeError, ValueError):
        raise BadParamError(f"{name} = {value!r} is not a valid {cls.__name__} enumerant") from None
    if m.name.endswith("_COUNT"):
        raise BadParamError(f"{name} = {m.name} is a count, not a valid {cls.__name__} enumerant")
    return m


def int_arg(value, name):
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        try:
            if isinstance(value, bool) or int(value) != value:
                raise ValueError
        except (TypeError, ValueError):
            raise BadParamError(f"{name} = {value!r} is not an integer") from None
    return int(value)


def int_array(values, count, name):
    """The first ``count`` entries of ``values`` as ints (BAD_PARAM when NULL or too short)."""
    if values is None:
        raise BadParamError(f"{name} is NULL")
    vals = list(values)
    if len(vals) < count:
        raise BadParamError(f"{name} has {len(vals)} entries, {count} needed")
    return tuple(int_arg(v, f"{name}[{i}]") for i, v in enumerate(vals[:count]))


def float_arg(value, name):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BadParamError(f"{name} = {value!r} is not a number") from None


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
    except (TypeError, ValueError):
        raise BadParamError(f"{name} = {value!r} is not a real number") from None


def need_ptr(ptr, name):
    """Device data arguments must not be NULL."""
    if ptr is None or (isinstance(ptr, int) and not isinstance(ptr, bool) and ptr == 0):
        raise BadParamError(f"{name} is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    return ptr


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


def not_supported(message, status=S.CUDNN_STATUS_NOT_SUPPORTED):
    return CudnnError(message, status)
