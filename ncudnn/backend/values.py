"""Checking and converting one element of an attribute value (``arrayOfElements``) by its type.

Each ``cudnnBackendAttributeType_t`` has one converter: Python value in, stored value out, or
:class:`BadParamError` naming what was wrong. Enum-typed attributes accept a member of the right
enum class or a plain int with a valid value; a member of another enum class, a bool for a number,
or a sentinel member (``*_COUNT``) is refused.
"""
import enum
import numbers
from fractions import Fraction

import numpy as np

from .. import types as _t
from ..errors import BadParamError
from ..types import cudnnBackendAttributeType_t as T

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1

#: Attribute type -> the enum class its elements belong to.
ENUM_OF_TYPE = {
    T.CUDNN_TYPE_DATA_TYPE: _t.cudnnDataType_t,
    T.CUDNN_TYPE_CONVOLUTION_MODE: _t.cudnnConvolutionMode_t,
    T.CUDNN_TYPE_HEUR_MODE: _t.cudnnBackendHeurMode_t,
    T.CUDNN_TYPE_KNOB_TYPE: _t.cudnnBackendKnobType_t,
    T.CUDNN_TYPE_NAN_PROPOGATION: _t.cudnnNanPropagation_t,
    T.CUDNN_TYPE_NUMERICAL_NOTE: _t.cudnnBackendNumericalNote_t,
    T.CUDNN_TYPE_LAYOUT_TYPE: _t.cudnnBackendLayoutType_t,
    T.CUDNN_TYPE_ATTRIB_NAME: _t.cudnnBackendAttributeName_t,
    T.CUDNN_TYPE_POINTWISE_MODE: _t.cudnnPointwiseMode_t,
    T.CUDNN_TYPE_GENSTATS_MODE: _t.cudnnGenStatsMode_t,
    T.CUDNN_TYPE_BN_FINALIZE_STATS_MODE: _t.cudnnBnFinalizeStatsMode_t,
    T.CUDNN_TYPE_REDUCTION_OPERATOR_TYPE: _t.cudnnReduceTensorOp_t,
    T.CUDNN_TYPE_BEHAVIOR_NOTE: _t.cudnnBackendBehaviorNote_t,
    T.CUDNN_TYPE_TENSOR_REORDERING_MODE: _t.cudnnBackendTensorReordering_t,
    T.CUDNN_TYPE_RESAMPLE_MODE: _t.cudnnResampleMode_t,
    T.CUDNN_TYPE_PADDING_MODE: _t.cudnnPaddingMode_t,
    T.CUDNN_TYPE_SIGNAL_MODE: _t.cudnnSignalMode_t,
    T.CUDNN_TYPE_NORM_MODE: _t.cudnnBackendNormMode_t,
    T.CUDNN_TYPE_NORM_FWD_PHASE: _t.cudnnBackendNormFwdPhase_t,
    T.CUDNN_TYPE_RNG_DISTRIBUTION: _t.cudnnRngDistribution_t,
    T.CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE: _t.cudnnMoeGroupedMatmulMode_t,
    T.CUDNN_TYPE_RESHAPE_MODE: _t.cudnnBackendReshapeMode_t,
    T.CUDNN_TYPE_OPERATIONGRAPH_MODE: _t.cudnnBackendOperationGraphMode_t,
}

_SENTINEL_SUFFIXES = ("_TYPE_COUNT", "_MODES_COUNT", "_TYPE_COUNTS", "LAYOUT_TYPE_COUNT")


def _is_int(v):
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v):
    return isinstance(v, (numbers.Real, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_))


def to_enum(enum_cls, v):
    if isinstance(v, enum.Enum) and type(v) is not enum_cls:
        raise BadParamError(f"{v!r} is a {type(v).__name__}, expected a {enum_cls.__name__}")
    if not _is_int(v):
        raise BadParamError(f"{v!r} is not a {enum_cls.__name__} value")
    try:
        member = enum_cls(int(v))
    except ValueError:
        raise BadParamError(f"{int(v)} is not a valid {enum_cls.__name__} value") from None
    if member.name.endswith(_SENTINEL_SUFFIXES):
        raise BadParamError(f"{member.name} is a count sentinel, not a valid {enum_cls.__name__}")
    return member


def to_int(v, lo, hi, what):
    if not _is_int(v):
        raise BadParamError(f"{v!r} is not an integer ({what})")
    v = int(v)
    if not lo <= v <= hi:
        raise BadParamError(f"{v} is out of the {what} range")
    return v


def to_bool(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if _is_int(v) and int(v) in (0, 1):
        return bool(v)
    raise BadParamError(f"{v!r} is not a boolean")


def to_float(v, single):
    if not _is_real(v):
        raise BadParamError(f"{v!r} is not a {'float' if single else 'double'}")
    return float(np.float32(v)) if single else float(v)


def to_fraction(v):
    if isinstance(v, Fraction):
        num, den = v.numerator, v.denominator
    elif _is_int(v):
        num, den = int(v), 1
    elif isinstance(v, (tuple, list)) and len(v) == 2 and all(_is_int(x) for x in v):
        num, den = int(v[0]), int(v[1])
    elif hasattr(v, "numerator") and hasattr(v, "denominator"):
        num, den = int(v.numerator), int(v.denominator)
    else:
        raise BadParamError(f"{v!r} is not a cudnnFraction_t (numerator, denominator)")
    if den == 0:
        raise BadParamError(f"cudnnFraction_t {num}/{den} has a zero denominator")
    if not all(INT64_MIN <= x <= INT64_MAX for x in (num, den)):
        raise BadParamError(f"cudnnFraction_t {num:.6g}/{den:.6g}: its int64_t parts cannot hold it")
    return Fraction(num, den)


def to_void_ptr(v):
    """A data pointer: an int (0 is NULL), None (NULL), any device buffer ``ncudnn.memory`` accepts
    (``__cuda_array_interface__``, ``__dlpack__``, torch-like, numba arrays), a ctypes object, or a host
    scalar / NumPy array (a by-value tensor's value; see ncudnn.host_values)."""
    if v is None:
        return 0
    if isinstance(v, (bool, np.bool_, str, bytes)):
        raise BadParamError(f"{v!r} is not a pointer")
    if _is_int(v):
        if not 0 <= int(v) < 2 ** 64:
            raise BadParamError(f"{int(v)} is not a valid pointer")
        return int(v)
    if isinstance(v, (float, np.floating, np.ndarray, np.generic)):
        return v
    from ..host_values import is_ctypes
    if is_ctypes(v):
        return v  # a host pointer / value of a by-value tensor (c_void_p: a pointer of either kind)
    from ..errors import CudnnError
    from ..memory import device_pointer
    try:
        device_pointer(v)
    except CudnnError as e:
        raise BadParamError(f"{type(v).__name__} is not device memory: {e.message}") from None
    return v


def to_handle(v):
    if v is None:
        raise BadParamError("the cudnnHandle_t is NULL")
    try:
        from .. import handle as _handle
    except ImportError:
        return v
    check = getattr(_handle, "get_handle_or_raise", None)
    if check is not None:
        check(v)  # raises a CudnnError naming what is wrong
    return v


def convert(attr_type, v):
    """One element of ``attr_type`` (not descriptors, not CHAR: the machinery handles those)."""
    if attr_type in ENUM_OF_TYPE:
        return to_enum(ENUM_OF_TYPE[attr_type], v)
    if attr_type == T.CUDNN_TYPE_INT64:
        return to_int(v, INT64_MIN, INT64_MAX, "int64_t")
    if attr_type == T.CUDNN_TYPE_INT32:
        return to_int(v, INT32_MIN, INT32_MAX, "int32_t")
    if attr_type == T.CUDNN_TYPE_BOOLEAN:
        return to_bool(v)
    if attr_type == T.CUDNN_TYPE_FLOAT:
        return to_float(v, True)
    if attr_type == T.CUDNN_TYPE_DOUBLE:
        return to_float(v, False)
    if attr_type == T.CUDNN_TYPE_FRACTION:
        return to_fraction(v)
    if attr_type == T.CUDNN_TYPE_VOID_PTR:
        return to_void_ptr(v)
    if attr_type == T.CUDNN_TYPE_HANDLE:
        return to_handle(v)
    raise BadParamError(f"attribute type {attr_type.name} cannot carry {v!r}")


def recast(values, from_type, to_type):
    """Stored values of ``from_type`` read back as ``to_type`` (both accepted by the attribute)."""
    if from_type == to_type:
        return list(values)
    if to_type in (T.CUDNN_TYPE_FLOAT, T.CUDNN_TYPE_DOUBLE):
        return [to_float(float(v), to_type == T.CUDNN_TYPE_FLOAT) for v in values]
    if to_type == T.CUDNN_TYPE_FRACTION:
        return [Fraction(v) for v in values]
    if to_type == T.CUDNN_TYPE_INT64:
        out = []
        for v in values:
            if Fraction(v).denominator != 1:
                raise BadParamError(f"value {v} is not an integer: read it as CUDNN_TYPE_FRACTION")
            out.append(int(v))
        return out
    return [convert(to_type, v) for v in values]
