"""Warp / block primitives and bit casts: the one place with a CUDA-simulator fallback.

On a GPU these are ``cuda.jit`` device functions over warp shuffles and libdevice bit casts. The
CUDA simulator has neither, so when ``numba.config.ENABLE_CUDASIM`` is set at import, the same
names are bound to Python implementations: a shuffle exchanges values through a per-warp barrier
(one simulator thread per CUDA thread), a bit cast goes through a NumPy view. Kernels import these
names and never branch on the simulator themselves.

Contract (both paths):

* ``f32_as_u32(x)`` / ``u32_as_f32(u)``: reinterpret 32 bits (no value conversion).
* ``shfl_down(v, delta)``, ``shfl_xor(v, lane_mask)``, ``shfl_idx(v, src_lane)``: full-warp
  shuffles (mask 0xffffffff). Every lane of the warp must call them (no divergence); an
  out-of-range source lane returns the caller's own value.
* ``warp_sum / warp_max / warp_min(v)``: butterfly (xor) reduction, every lane gets the result;
  the combination order is fixed, so results are deterministic. NaN: max/min propagate NaN.
* ``block_sum / block_max / block_min(v, smem)``: whole-block reduction, every thread gets the
  result. The block size must be a multiple of 32 (whole warps) for every warp/block reduction. ``smem`` is a shared array of at least 32 elements of v's type, allocated by the kernel;
  every thread of the block must call (it contains ``syncthreads``). Fixed order (deterministic).
* ``block_sum2(a, b, smem_a, smem_b)``: two sums in one pass (e.g. sum and sum of squares).
"""
import functools
import threading

import numba
import numpy as np
from numba import cuda

__all__ = ["SIM", "WARP", "FULL_MASK", "sm_count", "launch", "set_launcher", "f32_as_u32",
           "u32_as_f32", "shfl_down", "shfl_xor", "shfl_idx", "warp_sum", "warp_max", "warp_min",
           "block_sum", "block_max", "block_min", "block_sum2"]

SIM = bool(numba.config.ENABLE_CUDASIM)
WARP = 32
FULL_MASK = 0xFFFFFFFF


_LAUNCHER = None


def set_launcher(fn):
    """Route every launch of the kernel modules through ``fn(kernel, grid, block, stream, args)``
    (e.g. a cached driver-level launcher); ``None`` restores numba's own launch. Returns the old one.
    """
    global _LAUNCHER
    old, _LAUNCHER = _LAUNCHER, fn
    return old


def launch(kernel, grid, block, stream, *args):
    """Launch ``kernel`` (a ``cuda.jit`` dispatcher) on ``grid`` x ``block`` on ``stream``."""
    if _LAUNCHER is not None:
        return _LAUNCHER(kernel, grid, block, stream, args)
    kernel[grid, block, stream](*args)


@functools.lru_cache(maxsize=None)
def sm_count():
    """Multiprocessors of the current device (launch sizing); 2 in the simulator (small grids)."""
    if SIM:
        return 2
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)

if not SIM:
    from numba.cuda import libdevice

    @cuda.jit(device=True, inline=True)
    def f32_as_u32(x):
        return numba.uint32(libdevice.float_as_int(x))

    @cuda.jit(device=True, inline=True)
    def u32_as_f32(u):
        return libdevice.int_as_float(numba.int32(u))

    @cuda.jit(device=True, inline=True)
    def shfl_down(v, delta):
        return cuda.shfl_down_sync(FULL_MASK, v, delta)

    @cuda.jit(device=True, inline=True)
    def shfl_xor(v, lane_mask):
        return cuda.shfl_xor_sync(FULL_MASK, v, lane_mask)

    @cuda.jit(device=True, inline=True)
    def shfl_idx(v, src_lane):
        return cuda.shfl_sync(FULL_MASK, v, src_lane)

else:
    _state_lock = threading.Lock()
    _BARRIER_TIMEOUT_S = 30.0   # a lane that never arrives is a kernel bug: fail, don't hang

    def _warp_slot():
        """(barrier, slots, lane, lanes in this warp) for the calling simulator thread."""
        t = threading.current_thread()
        mgr = t._manager
        nthreads = int(np.prod(mgr._block_dim))
        warp, lane = divmod(t.thread_id, WARP)
        with _state_lock:
            states = mgr.__dict__.setdefault("_ncudnn_warp_state", {})
            st = states.get(warp)
            if st is None:
                n = min(WARP, nthreads - warp * WARP)
                st = states[warp] = (threading.Barrier(n, timeout=_BARRIER_TIMEOUT_S), [None] * n)
        barrier, slots = st
        return barrier, slots, lane, len(slots)

    def _exchange(v, src_of):
        barrier, slots, lane, n = _warp_slot()
        slots[lane] = v
        barrier.wait()
        src = src_of(lane)
        out = slots[src] if 0 <= src < n else v
        barrier.wait()   # nobody overwrites a slot before every lane has read
        return out

    def f32_as_u32(x):
        return int(np.array(x, dtype=np.float32).view(np.uint32))

    def u32_as_f32(u):
        return np.array(int(u) & FULL_MASK, dtype=np.uint32).view(np.float32)[()]

    def shfl_down(v, delta):
        return _exchange(v, lambda lane: lane + delta)

    def shfl_xor(v, lane_mask):
        return _exchange(v, lambda lane: lane ^ lane_mask)

    def shfl_idx(v, src_lane):
        return _exchange(v, lambda lane: src_lane)


@cuda.jit(device=True, inline=True)
def _max(a, b):
    return a if (a != a or a >= b) else b


@cuda.jit(device=True, inline=True)
def _min(a, b):
    return a if (a != a or a <= b) else b


@cuda.jit(device=True, inline=True)
def warp_sum(v):
    v += shfl_xor(v, 16)
    v += shfl_xor(v, 8)
    v += shfl_xor(v, 4)
    v += shfl_xor(v, 2)
    v += shfl_xor(v, 1)
    return v


@cuda.jit(device=True, inline=True)
def warp_max(v):
    v = _max(v, shfl_xor(v, 16))
    v = _max(v, shfl_xor(v, 8))
    v = _max(v, shfl_xor(v, 4))
    v = _max(v, shfl_xor(v, 2))
    v = _max(v, shfl_xor(v, 1))
    return v


@cuda.jit(device=True, inline=True)
def warp_min(v):
    v = _min(v, shfl_xor(v, 16))
    v = _min(v, shfl_xor(v, 8))
    v = _min(v, shfl_xor(v, 4))
    v = _min(v, shfl_xor(v, 2))
    v = _min(v, shfl_xor(v, 1))
    return v


@cuda.jit(device=True, inline=True)
def _flat_tid():
    return cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y
                                                 + cuda.blockDim.y * cuda.threadIdx.z)


@cuda.jit(device=True, inline=True)
def _nwarps():
    return (cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z + WARP - 1) // WARP


@cuda.jit(device=True, inline=True)
def block_sum(v, smem):
    tid = _flat_tid()
    v = warp_sum(v)
    if tid % WARP == 0:
        smem[tid // WARP] = v
    cuda.syncthreads()
    t = smem[0]
    for w in range(1, _nwarps()):
        t += smem[w]
    cuda.syncthreads()   # smem may be reused right after
    return t


@cuda.jit(device=True, inline=True)
def block_sum2(a, b, smem_a, smem_b):
    tid = _flat_tid()
    a = warp_sum(a)
    b = warp_sum(b)
    if tid % WARP == 0:
        smem_a[tid // WARP] = a
        smem_b[tid // WARP] = b
    cuda.syncthreads()
    ta = smem_a[0]
    tb = smem_b[0]
    for w in range(1, _nwarps()):
        ta += smem_a[w]
        tb += smem_b[w]
    cuda.syncthreads()
    return ta, tb


@cuda.jit(device=True, inline=True)
def block_max(v, smem):
    tid = _flat_tid()
    v = warp_max(v)
    if tid % WARP == 0:
        smem[tid // WARP] = v
    cuda.syncthreads()
    t = smem[0]
    for w in range(1, _nwarps()):
        t = _max(t, smem[w])
    cuda.syncthreads()
    return t


@cuda.jit(device=True, inline=True)
def block_min(v, smem):
    tid = _flat_tid()
    v = warp_min(v)
    if tid % WARP == 0:
        smem[tid // WARP] = v
    cuda.syncthreads()
    t = smem[0]
    for w in range(1, _nwarps()):
        t = _min(t, smem[w])
    cuda.syncthreads()
    return t
