"""A grid-wide barrier for persistent kernels, inline instead of a call into the device runtime.

``cuda.cg.this_grid().sync()`` is a call to ``cudaCGSynchronizeGrid`` in libcudadevrt (an ABI call: live
registers saved on the stack around it) and needs a cooperative launch. :func:`grid_barrier` is the same
arrive-and-wait, inlined:

* every thread of the block reaches ``syncthreads``; then thread (0, 0) adds to a 32-bit counter in global
  memory with ``atom.add.release.gpu`` (the block's earlier writes are published first: release is
  cumulative over the barrier) and spins with ``ld.acquire.gpu`` until the counter's top bit flips;
  ``syncthreads`` again lets the block go on.
* Block (0, 0) adds ``0x80000000 - (blocks - 1)``, every other block adds 1: once all ``blocks`` blocks
  have arrived the counter grew by exactly 0x80000000, so bit 31 has flipped and bits 0-30 are as before,
  whatever order the adds came in (the low bits can reach 0x80000000 only with every add in). The counter
  needs no reset between barriers or launches: it only has to start with bits 0-30 zero (a zeroed
  allocation), and stays so after every completed barrier.

Contract: every block of the grid calls it the same number of times; the grid is co-resident (at most one
wave: a cooperative launch guarantees it, and refuses a grid that is not); two launches that share one
counter must not interleave their barriers (:func:`device_counter` says when one counter a device is safe). The simulator runs blocks one after
another, so there the grid must be one block (then the counter flips at the master's own add).
"""
import threading

import numba
import numpy as np
from numba import cuda

from ...platform import simulator_enabled
from .ptx import atom_add_release_gpu, ld_acquire_gpu

__all__ = ["grid_barrier", "TOP_BIT", "device_counter"]

TOP_BIT = 0x80000000

_COUNTERS = {}
_LOCK = threading.Lock()


def device_counter():
    """The current device's barrier counter: a zeroed uint32 device array of one element, allocated once and
    kept for the process. Shared by every launch on the device, so only grids that can never overlap may use
    it: full grids of blocks that each take a whole SM (a second such grid cannot start a block before the first
    has left its last barrier; the engines pad the shared memory to guarantee one block an SM)."""
    dev = 0 if simulator_enabled() else cuda.get_current_device().id
    with _LOCK:
        arr = _COUNTERS.get(dev)
        if arr is None:
            arr = _COUNTERS[dev] = cuda.to_device(np.zeros(1, np.uint32))
        return arr


@cuda.jit(device=True, inline=True)
def grid_barrier(bar, blocks):
    """Wait until all ``blocks`` blocks of the grid arrived (``bar``: a uint32 array, element 0 the counter)."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.threadIdx.z == 0:
        master = cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0 and cuda.blockIdx.z == 0
        add = numba.uint32(TOP_BIT - (blocks - 1)) if master else numba.uint32(1)
        old = atom_add_release_gpu(bar, 0, add)
        while ((ld_acquire_gpu(bar, 0) ^ old) & numba.uint32(TOP_BIT)) == 0:
            pass
    cuda.syncthreads()
