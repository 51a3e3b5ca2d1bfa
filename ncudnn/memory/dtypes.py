"""Element types of device buffers: cudnnDataType_t <-> NumPy dtype (ml_dtypes for bf16 / fp8), the names
producers use for them, and the dtype a numba kernel receives (bf16 / fp8 as their bits).
"""
import ml_dtypes
import numpy as np

from ..errors import NotSupportedError
from ..types import cudnnDataType_t, cudnnStatus_t

__all__ = ["DTYPE_OF", "CUDNN_TYPE_OF", "numpy_dtype", "cudnn_dtype", "kernel_dtype"]

S = cudnnStatus_t
DT = cudnnDataType_t

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
