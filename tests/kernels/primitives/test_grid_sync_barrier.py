"""The inline grid barrier (ncudnn.kernels.primitives.grid_sync): the counter protocol over every arrival order (a host
model: the simulator runs blocks one after another, so a many-block barrier cannot run there), the barrier in a
one-block kernel on the simulator / GPU, and the sm_90 PTX of the two gpu-scope instructions."""
import itertools

import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.primitives import grid_sync

TOP = grid_sync.TOP_BIT


def _adds(n):
    return [(TOP - (n - 1)) & 0xFFFFFFFF] + [1] * (n - 1)     # block 0 (the master) first in this list


@pytest.mark.parametrize("n", [1, 2, 3, 5, 132])
def test_gsync_flip_only_at_last_arrival(rng, n):
    orders = list(itertools.permutations(range(n))) if n <= 5 else [rng.permutation(n) for _ in range(50)]
    for start in (0, TOP):                       # bits 0-30 zero; bit 31 either way
        for order in orders:
            c, adds = start, _adds(n)
            for k, b in enumerate(order):
                old = c
                c = (c + adds[b]) & 0xFFFFFFFF
                flipped = bool((c ^ start) & TOP)
                assert flipped == (k == n - 1), (n, list(order), k, hex(old), hex(c))
            assert c == start ^ TOP              # bits 0-30 back to zero: the next barrier needs no reset


def test_gsync_many_barriers_in_sequence():
    c = 0
    for n in (132, 7, 132, 1, 64):
        for a in _adds(n):
            c = (c + a) & 0xFFFFFFFF
        assert c & (TOP - 1) == 0


def _kernel():
    @cuda.jit
    def k(bar, out, reps):
        t = cuda.threadIdx.x
        for r in range(reps):
            out[r * cuda.blockDim.x + (t + 1) % cuda.blockDim.x] = -1.0
            grid_sync.grid_barrier(bar, 1)
            out[r * cuda.blockDim.x + t] = float(r)   # written after every thread's -1 of this round
    return k


def test_gsync_one_block_kernel():
    reps, threads = 3, 8
    bar = cuda.to_device(np.array([TOP], np.uint32))
    out = cuda.to_device(np.full(reps * threads, np.nan, np.float32))
    _kernel()[1, threads](bar, out, reps)
    got = out.copy_to_host().reshape(reps, threads)
    assert np.array_equal(got, np.repeat(np.arange(reps, dtype=np.float32)[:, None], threads, 1))
    assert int(bar.copy_to_host()[0]) == TOP ^ (TOP if reps % 2 else 0)


def test_gsync_device_counter_is_zeroed_and_shared():
    a, b = grid_sync.device_counter(), grid_sync.device_counter()
    assert a is b and a.shape == (1,) and a.dtype == np.uint32
    assert int(a.copy_to_host()[0]) & (TOP - 1) == 0


_PTX = """
import json, sys
from numba import cuda, uint32
from ncudnn.kernels.primitives import grid_sync

def k(bar):
    grid_sync.grid_barrier(bar, 4)
ptx, _ = cuda.compile_ptx(k, (uint32[::1],), cc=(9, 0))
print("STATS " + json.dumps({"atom": ptx.count("atom.add.release.gpu.u32"), "ld": ptx.count("ld.acquire.gpu.u32"),
                             "call": ptx.count("call.uni")}))
"""


def test_gsync_ptx_has_gpu_scope_ops():
    """sm_90 PTX (NVVM in a simulator-off process, no GPU needed): one release add, the acquire load of the
    spin (the loop may be rotated: one copy before it), no device-runtime call."""
    from ptx_stats import ptx_stats

    st = ptx_stats(_PTX, "", timeout=300)
    assert st["atom"] == 1 and 1 <= st["ld"] <= 2 and st["call"] == 0, st
