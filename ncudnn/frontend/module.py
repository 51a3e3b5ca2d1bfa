"""Module-level functions of the ``cudnn`` frontend module: versions, handles, streams, last error."""
from ..engines import api
from ..errors import check, cudnnGetLastErrorString
from ..handle import cudnnCreate, cudnnDestroy, cudnnGetStream, cudnnSetStream
from ..types import MACROS
from ..version import CUDNN_VERSION
from .errors import reraise
from .kernel_cache import kernel_cache


def backend_version():
    """The cuDNN API level ncudnn implements, encoded major*10000 + minor*100 + patch (e.g. 92700)."""
    return CUDNN_VERSION


def backend_version_string():
    """``"major.minor.patch"`` of :func:`backend_version`."""
    return f"{MACROS['CUDNN_MAJOR']}.{MACROS['CUDNN_MINOR']}.{MACROS['CUDNN_PATCHLEVEL']}"


def _checked(result):
    status, *outs = result
    try:
        check(status)
    except Exception as e:
        raise reraise(e) from None
    return outs[0] if outs else None


def create_handle():
    """A cuDNN handle on the current device (its stream is the default stream)."""
    return _checked(cudnnCreate())


def destroy_handle(handle):
    """Release ``handle`` (waits for its stream)."""
    _checked(cudnnDestroy(handle))


def set_stream(handle, stream):
    """Run the handle's work on ``stream`` (int handle, numba / torch / CuPy / cuda-python stream)."""
    _checked(cudnnSetStream(handle, stream))


def get_stream(handle):
    """The stream last given to :func:`set_stream` (0 for the default stream)."""
    return _checked(cudnnGetStream(handle))


def get_last_error_string():
    """The message of the last failure on this thread (cleared by reading)."""
    return cudnnGetLastErrorString()


def create_kernel_cache():
    """A fresh, empty kernel cache for ``pygraph(kernel_cache=...)`` (each call a new one, as in
    cudnn-frontend): see :mod:`.kernel_cache`; ``serialize()`` / ``deserialize()`` carry it to another
    process."""
    return kernel_cache()


def create_device_properties(device_id=None):
    """Properties of the current device as the engine layer's cost model sees them (a nominal H200 in
    the simulator): name, cc, sm_count, peaks, memory sizes."""
    return api.context().device
