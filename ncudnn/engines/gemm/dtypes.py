"""Problem translation checks of the GEMM-family engines: the :class:`Reject` a translation raises (status and
reason for check_support), the kernel dtype of a tensor descriptor and the tensor / precision checks.
"""
from ... import memory
from ...kernels.runtime import dtypes as kdt
from ...types import cudnnStatus_t

__all__ = ["KERNEL_DTYPES", "Reject", "kdtype", "check_tensor", "check_precision"]

S = cudnnStatus_t

KERNEL_DTYPES = ("float32", "float16", "bfloat16", "float64")


class Reject(Exception):
    """Raised by problem translation: ``status`` and ``reason`` for check_support."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status, self.reason = status, reason


_NAMES = {}


def kdtype(t):
    """Kernel dtype name of a tensor descriptor ("float32", "bfloat16", ...), or None."""
    dt = t.dtype
    if dt not in _NAMES:
        try:
            _NAMES[dt] = kdt.dtype_name(memory.numpy_dtype(dt))
        except Exception:
            _NAMES[dt] = None
    return _NAMES[dt]


def check_tensor(node, port, t, kinds=KERNEL_DTYPES):
    """Raise Reject unless ``t`` is a plain strided tensor of a kernel dtype."""
    if t.is_virtual:
        return
    name = kdtype(t)
    if name not in kinds:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                     f"node '{node.name}': {port}: data type {t.dtype.name if t.dtype is not None else None} "
                     f"is not one of {kinds}")
    if t.vector_count != 1 or int(t.reordering) != 0:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"node '{node.name}': {port}: vectorized / reordered "
                     "tensors are not supported")
    if t.ragged_offset is not None:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
                     f"node '{node.name}': {port}: ragged offsets are not supported")


def check_precision(node, names):
    """fp64 only as an all-fp64 problem (fp64 accumulation); else fp32 accumulation."""
    if "float64" in names and any(n != "float64" for n in names):
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': float64 mixed with "
                     f"{sorted(set(names) - {'float64'})}: fp64 needs every operand and the output in fp64")
    return names[0] == "float64"
