"""Simulated device allocations: in the simulator "device" memory is host memory, and numba's simulated arrays
and ``allocate`` buffers are registered here by address, so that their integer pointers resolve back to the
memory (and to what keeps it alive).
"""
import ctypes
import threading
import weakref

import numpy as np

__all__ = ["Region", "register_host", "register_span", "find_region", "covers", "root_of"]


class Region:
    """A simulated device allocation: host memory [base, base + size) kept alive by ``root``."""

    __slots__ = ("base", "size", "_root", "u8")

    def __init__(self, base, size, root):
        self.base, self.size = base, size
        self._root = weakref.ref(root) if _weakrefable(root) else (lambda r=root: r)
        self.u8 = np.ctypeslib.as_array((ctypes.c_uint8 * max(size, 1)).from_address(base))[:size]

    @property
    def root(self):
        return self._root()


def _weakrefable(obj):
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


_regions = {}  # base address -> Region, simulated allocations only
# Reentrant: a finalizer (_forget) can run from garbage collection while this thread holds the lock.
_regions_lock = threading.RLock()


try:
    _byte_bounds = np.lib.array_utils.byte_bounds
except AttributeError:  # NumPy < 2
    _byte_bounds = np.byte_bounds


def register_host(root):
    """Record a host array as simulated device memory; returns its Region."""
    low, high = _byte_bounds(root)
    with _regions_lock:
        reg = _regions.get(low)
        if reg is not None and reg.size >= high - low and reg.root is root:
            return reg
        reg = Region(low, high - low, root)
        _regions[low] = reg
    weakref.finalize(root, _forget, low, reg)
    return reg


def register_span(base, size, root):
    """Record ``size`` bytes at ``base`` as simulated device memory while ``root`` lives (memory a torch-like
    tensor owns, taken as device memory under the simulator); returns its Region."""
    with _regions_lock:
        reg = _regions.get(base)
        if reg is not None and reg.size >= size and reg.root is root:
            return reg
        reg = Region(base, size, root)
        _regions[base] = reg
    if _weakrefable(root):
        weakref.finalize(root, _forget, base, reg)
    return reg


def _forget(base, reg):
    with _regions_lock:
        if _regions.get(base) is reg:
            del _regions[base]


def find_region(ptr):
    with _regions_lock:
        for reg in list(_regions.values()):
            if reg.base <= ptr < reg.base + max(reg.size, 1) and reg.root is not None:
                return reg
    return None


def covers(ptr, nbytes):
    """Whether one live simulated allocation holds the ``nbytes`` bytes at ``ptr``."""
    with _regions_lock:
        for reg in list(_regions.values()):
            if reg.base <= ptr and ptr + nbytes <= reg.base + reg.size and reg.root is not None:
                return True
    return False


def root_of(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a
