"""Values that become graph tensors: Python / NumPy scalars (by-value tensors) and array objects
(their dims, element strides and data type, and whether they live on the host)."""
import numbers

import numpy as np

from ..ir.tensor import packed_strides
from ..types import cudnnDataType_t, cudnnStatus_t
from ..errors import CudnnError, NotSupportedError
from .enums import to_ir_dtype
from .errors import graph_error

S = cudnnStatus_t
DT = cudnnDataType_t


def scalar_dtype(value):
    if isinstance(value, (bool, np.bool_)):
        return DT.CUDNN_DATA_BOOLEAN
    if isinstance(value, np.generic):
        return to_ir_dtype(value.dtype)
    if isinstance(value, numbers.Integral):
        return DT.CUDNN_DATA_INT32
    return DT.CUDNN_DATA_FLOAT


_SCALAR_TYPE = {}  # cudnnDataType_t -> NumPy scalar type (None: no NumPy type), filled on first use


def _scalar_type(dt):
    try:
        return _SCALAR_TYPE[dt]
    except KeyError:
        from ..ir import numpy_dtype

        npd = numpy_dtype(to_ir_dtype(dt))
        t = _SCALAR_TYPE[dt] = npd.type if npd is not None else None
        return t


def np_scalar(value, dt):
    """``value`` as the NumPy scalar of data type ``dt`` (unchanged when ``dt`` is None or has none)."""
    t = _scalar_type(dt) if dt is not None else None
    return t(value) if t is not None else value


def host_scalar(arg, dt):
    """A Python / NumPy scalar from a host tensor (CPU torch tensor, NumPy array), a number or a ctypes
    object / pointer (read with the tensor's data type). A Python int is the value itself here, as in
    cudnn-frontend; only the backend API reads by-value tensors through host addresses."""
    if type(arg) in (float, int) or isinstance(arg, (numbers.Number, np.generic)):
        return np_scalar(arg, dt)
    from ..host_values import host_value, is_ctypes
    if is_ctypes(arg):
        from ..ir import numpy_dtype
        npd = numpy_dtype(to_ir_dtype(dt)) if dt is not None else None
        try:
            return host_value(arg, npd if npd is not None else np.float32, "by-value tensor", int_is_address=False)
        except CudnnError as e:
            raise graph_error(e.status, e.message) from None
    if hasattr(arg, "item"):
        return np_scalar(arg.item(), dt)
    return np_scalar(np.asarray(arg).reshape(-1)[0], dt)


def _lenient(dtype):
    """The data type of an array's dtype, or None (set it with set_data_type) for dtypes cuDNN has no type
    for, e.g. the uint16 bits numba arrays carry bfloat16 in."""
    try:
        return to_ir_dtype(dtype)
    except NotSupportedError:
        return None


def describe_array(obj):
    """(dims, element strides, data_type, is_host) of an array object: torch tensors (``shape``,
    ``stride()``, ``dtype``, ``device``), ``__cuda_array_interface__`` objects (numba, CuPy), NumPy
    arrays (host: by-value), DLPack producers through numba/NumPy when possible."""
    if hasattr(obj, "stride") and callable(obj.stride) and hasattr(obj, "shape"):  # torch-like
        dims = [int(d) for d in obj.shape]
        strides = [int(s) for s in obj.stride()]
        dev = getattr(obj, "device", None)
        host = str(getattr(dev, "type", dev)) == "cpu"
        return dims, strides, _lenient(obj.dtype), host
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        dt = np.dtype(cai["typestr"])
        dims = [int(d) for d in cai["shape"]]
        st = cai.get("strides")
        strides = [int(s) // dt.itemsize for s in st] if st else list(packed_strides(dims))
        declared = getattr(obj, "dtype", dt)
        return dims, strides, _lenient(declared), False
    if isinstance(obj, np.ndarray):
        return list(obj.shape), [s // obj.itemsize for s in obj.strides], _lenient(obj.dtype), True
    if hasattr(obj, "__dlpack__") or getattr(obj, "__cuda_ndarray__", False):
        from ..memory import describe as _describe

        raw = _describe(obj)  # shape, element strides and dtype, without checking the dtype
        return list(raw.shape), list(raw.strides), _lenient(raw.dtype), False
    raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"cannot describe a {type(obj).__name__} as a tensor "
                      "(no shape/stride, __cuda_array_interface__ or __dlpack__)")
