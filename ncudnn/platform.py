"""Where kernels run: a real GPU, or numba's CUDA simulator.

The decision has to be made before numba is imported (numba reads NUMBA_ENABLE_CUDASIM once), so
:func:`select_backend` probes the driver with ctypes, not through numba.
"""
import ctypes
import ctypes.util
import os


def gpu_present():
    """True when a CUDA driver loads and reports at least one device (no numba import)."""
    for name in ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.cuInit(0) != 0:
                return False
            count = ctypes.c_int(0)
            return lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
        except AttributeError:
            return False
    return False


def select_backend():
    """Turn on the CUDA simulator when no GPU is present, unless the user already chose.

    Returns True when kernels will run in the simulator.
    """
    global _SIM
    if "NUMBA_ENABLE_CUDASIM" not in os.environ and not gpu_present():
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    _SIM = None
    return simulator_enabled()


_SIM = None


def simulator_enabled():
    """Whether NUMBA_ENABLE_CUDASIM is on. Read from the environment once (numba reads it once, at
    import, too; the heuristics ask for every config): :func:`select_backend` and :func:`refresh`
    read it again."""
    global _SIM
    if _SIM is None:
        _SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    return _SIM


def refresh():
    """Forget the cached NUMBA_ENABLE_CUDASIM reading (after changing the environment)."""
    global _SIM
    _SIM = None
