"""Numba device arrays over a :class:`~ncudnn.memory.view.DeviceView`'s memory (the form kernels take) and
fresh device buffers (:func:`allocate`, :class:`WorkspacePool`): numba allocations on a GPU, registered host
memory in the simulator.
"""
import threading

import numpy as np

from ..platform import simulator_enabled
from ..types import cudnnStatus_t
from .dtypes import kernel_dtype
from .sim_regions import register_host
from .view import DeviceView, bad_param, packed_strides, span_bytes

__all__ = ["to_numba", "allocate", "WorkspacePool"]

S = cudnnStatus_t

# ------------------------------------------------------------------------------- numba arrays

def to_numba(view, shape=None, strides=None, dtype=None):
    """A numba device array over the view's memory (a simulated array in the simulator).

    shape / strides (elements) default to the view's; dtype defaults to :func:`kernel_dtype` of the
    view's (bf16 and fp8 arrive as their bits). Cached per view and geometry.
    """
    shape = view.shape if shape is None else tuple(int(d) for d in shape)
    strides = (view.strides if shape == view.shape else packed_strides(shape)) if strides is None \
        else tuple(int(s) for s in strides)
    dt = kernel_dtype(view.dtype) if dtype is None else np.dtype(dtype)
    key = (shape, strides, dt.str)
    arr = view._cache.get(key)
    if arr is not None:
        return arr
    if len(shape) != len(strides):
        raise bad_param(f"{len(shape)} dims but {len(strides)} strides")
    need = span_bytes(shape, strides, dt.itemsize)
    if view.nbytes is not None and need > view.nbytes:
        raise bad_param(f"view holds {view.nbytes} bytes; shape {shape} strides {strides} of {dt.name} "
                   f"address {need}", S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    byte_strides = tuple(s * dt.itemsize for s in strides)
    if simulator_enabled():
        arr = _sim_array(view, shape, byte_strides, dt, need)
    else:
        arr = _gpu_array(view, shape, byte_strides, dt, need)
    view._cache[key] = arr
    return arr


def _sim_array(view, shape, byte_strides, dt, need):
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    reg = view._region
    if reg is None:
        raise bad_param("view has no simulated memory behind it")
    offset = view.ptr - reg.base
    if offset < 0 or offset + need > reg.size:
        raise bad_param(f"view [0x{view.ptr:x}, +{need}) leaves its simulated allocation",
                   S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    host = np.ndarray(shape, dtype=dt, buffer=reg.u8, offset=offset, strides=byte_strides)
    return FakeCUDAArray(host)


_ctx = threading.local()


def _gpu_array(view, shape, byte_strides, dt, need):
    from numba import cuda
    from numba.cuda.cudadrv import devicearray, driver

    ctx = getattr(_ctx, "ctx", None)
    if ctx is None:
        ctx = _ctx.ctx = cuda.current_context()
    mem = driver.MemoryPointer(ctx, driver.binding.CUdeviceptr(view.ptr), size=max(need, 1),
                               owner=view.owner)
    return devicearray.DeviceNDArray(shape=shape, strides=byte_strides, dtype=dt, gpu_data=mem,
                                     stream=0)


# ------------------------------------------------------------------------------- allocation

def allocate(nbytes, alignment=256):
    """A fresh device buffer of ``nbytes`` bytes (uint8 view, ``alignment``-aligned)."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise bad_param(f"cannot allocate {nbytes} bytes")
    if simulator_enabled():
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        reg = register_host(raw)
        start = (-reg.base) % alignment
        return DeviceView(reg.base + start, nbytes, np.uint8, (nbytes,), (1,), raw, reg)
    from numba import cuda

    try:
        arr = cuda.device_array(max(nbytes, 1), dtype=np.uint8)
    except Exception as e:
        from ..errors import InternalError

        raise InternalError(f"device allocation of {nbytes} bytes failed: {e}",
                            S.CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) from None
    ptr = arr.__cuda_array_interface__["data"][0]
    if ptr % alignment:
        raise bad_param(f"allocation at 0x{ptr:x} is not {alignment}-byte aligned")
    return DeviceView(ptr, nbytes, np.uint8, (nbytes,), (1,), arr)


class WorkspacePool:
    """A grow-only device buffer: :meth:`get` returns a view of at least the bytes asked for."""

    def __init__(self, alignment=256):
        self.alignment = alignment
        self._buf = None
        self.grow_count = 0

    @property
    def capacity(self):
        return 0 if self._buf is None else self._buf.nbytes

    def get(self, nbytes):
        """A uint8 view of ``nbytes`` bytes at the start of the pool (reallocated only to grow)."""
        nbytes = int(nbytes)
        if nbytes > self.capacity:
            self._buf = None  # drop the old buffer before taking the bigger one
            self._buf = allocate(nbytes, self.alignment)
            self.grow_count += 1
        if self._buf is None:
            self._buf = allocate(0, self.alignment)
        b = self._buf
        return DeviceView(b.ptr, nbytes, np.uint8, (nbytes,), (1,), b.owner, b._region)

    def release(self):
        self._buf = None
