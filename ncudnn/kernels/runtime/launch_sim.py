"""The simulator twin of :class:`ncudnn.kernels.runtime.launch.PreparedLaunch` (numba's CUDA simulator: no
driver): the same ``run(ptrs, stream)`` calls ``dispatcher[grid, block, 0, shared](*args)`` with simulator
arrays, rebuilding an array over host memory wherever a pointer or view was given.

The simulator runs every GPU thread as a Python thread, so a large launch takes minutes. A launch of more
than :data:`NOTICE_THREADS` threads says so once per kernel, grid and block: ``simulator: conv_fprop runs
1.2 M threads (grid 9375x1x1, block 128x1x1) on the CPU; expect minutes`` goes to ncudnn's log at WARNING
(a callback or ``CUDNN_LOGDEST_DBG`` when set) or else to stderr, so it is seen with no logging set up.
While such a launch runs, a watcher thread reports every :data:`PROGRESS_SECONDS` the blocks done (read
from the simulator's block loop in the launching thread's frame, nothing added per thread): a
``\r``-rewritten line on stderr when stderr is a terminal, an INFO log line otherwise.
``NCUDNN_SIM_NOTICE_THREADS`` overrides the threshold (0: no notice, no progress)."""
import ctypes
import os
import sys
import threading
import time

import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support

from ...memory.sim_regions import covers
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
            watch = _announce(self.kernel, self.grid, self.block)
            try:
                self.kernel.dispatcher[self.grid, self.block, 0, self.shared](*args)
            finally:
                if watch is not None:
                    watch.stop()


#: simulated launches of more threads than this announce themselves (env NCUDNN_SIM_NOTICE_THREADS; 0: off)
NOTICE_THREADS = 100_000
#: seconds between two progress reports of an announced launch
PROGRESS_SECONDS = 5.0
_announced = set()        # (kernel name, grid, block) already announced
_announced_lock = threading.Lock()


def _notice_threads():
    env = os.environ.get("NCUDNN_SIM_NOTICE_THREADS", "").strip()
    try:
        return int(float(env)) if env else NOTICE_THREADS
    except ValueError:
        return NOTICE_THREADS


def _count(n):
    """``1.2 M`` / ``150 k`` / ``800``: a thread count for a person."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} M"
    return f"{n / 1e3:.0f} k" if n >= 10_000 else str(n)


def _dims(d):
    return "x".join(str(int(v)) for v in d)


def _say(severity, message):
    """``message`` through ncudnn's log; to stderr when the log delivered it nowhere (and ``severity`` is
    the warning: the notice must be seen with no logging configured)."""
    from ... import log   # the kernels import nothing above them but the log
    from ...types import cudnnSeverity_t as sev

    level = sev.CUDNN_SEV_WARNING if severity == "warning" else sev.CUDNN_SEV_INFO
    if not log.log(level, message) and severity == "warning":
        try:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _announce(kernel, grid, block):
    """The notice of a launch over the threshold (once per kernel, grid and block) and its progress
    watcher (None below the threshold)."""
    limit = _notice_threads()
    blocks = int(grid[0]) * int(grid[1]) * int(grid[2])
    threads = blocks * int(block[0]) * int(block[1]) * int(block[2])
    if limit <= 0 or threads <= limit:
        return None
    name = getattr(kernel, "name", None) or "kernel"
    key = (name, tuple(map(int, grid)), tuple(map(int, block)))
    with _announced_lock:
        first = key not in _announced
        _announced.add(key)
    if first:
        _say("warning", f"simulator: {name} runs {_count(threads)} threads (grid {_dims(grid)}, block "
                        f"{_dims(block)}) on the CPU; expect minutes")
    return _Progress(name, blocks)


class _Progress:
    """Every PROGRESS_SECONDS while the launch runs: blocks done / total, read from the ``grid_point`` of
    the simulator's block loop (``FakeCUDAKernel.__call__``) in the launching thread's frames."""

    def __init__(self, name, blocks):
        self.name, self.blocks = name, blocks
        self.launcher = threading.get_ident()
        self.start = time.monotonic()
        self.shown = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ncudnn-sim-progress", daemon=True)
        self._thread.start()

    def _blocks_done(self):
        """Blocks the simulator has finished: the row-major index of the block it runs (np.ndindex
        order), or None where its loop is not found."""
        frame = sys._current_frames().get(self.launcher)
        while frame is not None:
            if frame.f_code.co_name == "__call__":
                local = frame.f_locals
                point, grid = local.get("grid_point"), local.get("grid_dim")
                if point is not None and grid is not None:
                    done = 0
                    for p, g in zip(point, grid):
                        done = done * int(g) + int(p)
                    return done
            frame = frame.f_back
        return None

    def _watch(self):
        while not self._done.wait(PROGRESS_SECONDS):
            done = self._blocks_done()
            what = f"block {done}/{self.blocks}" if done is not None else f"{self.blocks} blocks"
            line = f"simulator: {self.name} {what}, {time.monotonic() - self.start:.0f} s"
            try:
                tty = sys.stderr.isatty()
            except (AttributeError, ValueError):
                tty = False
            if tty:
                sys.stderr.write("\r" + line)
                sys.stderr.flush()
                self.shown = True
            else:
                _say("info", line)

    def stop(self):
        self._done.set()
        self._thread.join()
        if self.shown:
            try:
                sys.stderr.write(f"\rsimulator: {self.name} done, {time.monotonic() - self.start:.0f} s\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass


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
    """NumPy view of host memory at ``ptr`` (simulated device memory is host memory). The bytes it spans must
    lie in one live simulated allocation (``memory.sim_regions``): a pointer into freed or foreign memory is an
    error here, not a read or write of whatever the host heap holds there."""
    if any(int(d) == 0 for d in shape):
        return np.empty(shape, dtype)
    span = sum((int(d) - 1) * int(s) for d, s in zip(shape, strides)) + dtype.itemsize
    neg = sum((int(d) - 1) * int(s) for d, s in zip(shape, strides) if int(s) < 0)
    pos = sum((int(d) - 1) * int(s) for d, s in zip(shape, strides) if int(s) > 0)
    if not covers(ptr + neg, pos - neg + dtype.itemsize):
        raise ValueError(f"simulated launch: pointer 0x{ptr:x} (+{span} bytes) is not inside a live simulated "
                         "device allocation (freed, or never allocated as device memory)")
    buf = (ctypes.c_char * span).from_address(ptr)
    return np.ndarray(shape, dtype, buffer=buf, strides=strides)
