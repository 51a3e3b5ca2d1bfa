"""The simulator twin of :class:`ncudnn.kernels.runtime.launch.PreparedLaunch` (numba's CUDA simulator: no
driver): the same ``run(ptrs, stream)`` calls ``dispatcher[grid, block, 0, shared](*args)`` with simulator
arrays, rebuilding an array over host memory wherever a pointer or view was given."""
import ctypes
import threading

import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support

from .launch_args import ArgView, _is_view_tuple, as_arg_view, data_pointer


class SimPreparedLaunch:
    """Simulator twin of :class:`PreparedLaunch`: runs ``dispatcher[grid, block, 0, shared](*args)``."""

    def __init__(self, kernel, grid, block, shared, args, ptrs):
        self.kernel = kernel
        self.grid, self.block, self.shared = grid, block, shared
        self.n_ptrs = len(ptrs)
        self._paths = [_path_of(p[3]) for p in ptrs]
        self._specs = [(p[1], p[2]) for p in ptrs]  # (type, prepare-time argument: shape source)
        self._args = [_as_list(a) for a in args]
        for path, (ty, val) in zip(self._paths, self._specs):
            _set_path(self._args, path, _sim_value(val, ty, val))
        self._lock = threading.Lock()

    def run(self, ptrs=None, stream=0):
        with self._lock:
            if ptrs is not None:
                if len(ptrs) != self.n_ptrs:
                    raise ValueError(f"{len(ptrs)} pointers for {self.n_ptrs} pointer parameters")
                for path, (ty, val), p in zip(self._paths, self._specs, ptrs):
                    _set_path(self._args, path, _sim_value(p, ty, val))
            args = [_as_tuple(a) for a in self._args]
            self.kernel.dispatcher[self.grid, self.block, 0, self.shared](*args)


def _path_of(where):
    # "argument 3[1][0]" -> (3, 1, 0)
    head, *rest = where.split("[")
    return (int(head.split()[1]),) + tuple(int(r.rstrip("]")) for r in rest)


def _as_list(a):
    if isinstance(a, tuple) and not isinstance(a, ArgView) and not _is_view_tuple(a):
        return [_as_list(x) for x in a]
    return a


def _as_tuple(a):
    return tuple(_as_tuple(x) for x in a) if isinstance(a, list) else a


def _set_path(args, path, value):
    for i in path[:-1]:
        args = args[i]
    args[path[-1]] = value


def _sim_value(p, ty, spec):
    """A simulator argument for pointer parameter ``ty``: arrays pass through, pointers become views."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    if isinstance(p, FakeCUDAArray) or isinstance(p, np.void):
        return p
    if isinstance(p, np.ndarray):
        return FakeCUDAArray(p)
    if isinstance(ty, types.CPointer):
        return data_pointer(p)
    ptr = data_pointer(p)
    if isinstance(ty, types.Record):
        return _host_array(ptr, (), (), numpy_support.as_dtype(ty))[()]
    ref = as_arg_view(spec)  # run() patches the pointer only: shape and strides stay as prepared
    return FakeCUDAArray(_host_array(ptr, ref.shape, ref.strides, numpy_support.as_dtype(ty.dtype)))


def _host_array(ptr, shape, strides, dtype):
    """NumPy view of host memory at ``ptr`` (simulated device memory is host memory)."""
    if any(int(d) == 0 for d in shape):
        return np.empty(shape, dtype)
    span = sum((int(d) - 1) * int(s) for d, s in zip(shape, strides)) + dtype.itemsize
    buf = (ctypes.c_char * span).from_address(ptr)
    return np.ndarray(shape, dtype, buffer=buf, strides=strides)
