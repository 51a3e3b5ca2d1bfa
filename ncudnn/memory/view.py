"""The typed, strided window on device memory (:class:`DeviceView`), the geometry it is checked with (packed
strides, the bytes dims and strides address) and the BAD_PARAM error the memory layer raises.
"""
import numpy as np

from ..errors import BadParamError
from ..types import cudnnStatus_t
from .dtypes import CUDNN_TYPE_OF, numpy_dtype

__all__ = ["packed_strides", "span_bytes", "bad_param", "DeviceView"]

S = cudnnStatus_t

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


def bad_param(msg, status=S.CUDNN_STATUS_BAD_PARAM):
    return BadParamError(msg, status)


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
            raise bad_param(f"offset {offset} lies outside a view of {self.nbytes} bytes",
                       S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        nbytes = left if nbytes is None else int(nbytes)
        dt = self.dtype if dtype is None else numpy_dtype(dtype)
        if shape is None:
            shape = ((nbytes if nbytes is not None else 0) // dt.itemsize,)
        shape = tuple(int(d) for d in shape)
        strides = packed_strides(shape) if strides is None else tuple(int(s) for s in strides)
        need = span_bytes(shape, strides, dt.itemsize)
        if (nbytes is not None and need > nbytes) or (left is not None and nbytes > left):
            raise bad_param(f"sub-view of {need} bytes at offset {offset} leaves a view of {self.nbytes} bytes",
                       S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        return DeviceView(self.ptr + offset, nbytes, dt, shape, strides, self.owner, self._region)

    def __repr__(self):
        return (f"DeviceView(ptr=0x{self.ptr:x}, nbytes={self.nbytes}, dtype={self.dtype.name}, "
                f"shape={self.shape}, strides={self.strides})")
