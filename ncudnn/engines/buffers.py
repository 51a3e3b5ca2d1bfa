"""Variant-pack buffers as the engine layer sees them.

* :func:`ptr_of`: the device address of a pack entry, cheaply (the key of a plan's binding cache):
  an int, a torch tensor (``data_ptr()``), a numba array, anything with ``__cuda_array_interface__``
  or ``__dlpack__``, a :class:`~ncudnn.memory.DeviceView`.
* :func:`tensor_view`: a pack entry checked against its tensor descriptor (dims, strides, dtype,
  alignment, size) as a ``DeviceView``.
* :func:`view_from_bytes`: a typed, strided ``DeviceView`` of a tensor at a byte offset of the
  workspace (materialized intermediates).
* :func:`stream_handle` / :func:`numba_stream`: a stream given as an int, a numba / torch / CuPy
  stream, as the raw CUstream handle and as what numba launches take.
"""
import numpy as np

from .. import memory
from ..errors import BadParamError
from ..platform import simulator_enabled
from ..types import cudnnStatus_t

S = cudnnStatus_t
_U8 = np.dtype(np.uint8)

#: type -> function(obj) -> int device pointer, learned on first sight of a type (plan.py reads it)
GETTERS = {}


def _learn(obj):
    t = type(obj)
    if isinstance(obj, memory.DeviceView):
        return lambda o: o.ptr
    data_ptr = getattr(t, "data_ptr", None)
    if callable(data_ptr) and callable(getattr(obj, "stride", None)):
        return data_ptr  # torch: the unbound C method, no Python frame per call
    if simulator_enabled() and getattr(obj, "__cuda_ndarray__", False):
        return memory.device_pointer
    if hasattr(obj, "device_ctypes_pointer"):
        return lambda o: o.device_ctypes_pointer.value or 0
    if isinstance(getattr(getattr(obj, "data", None), "ptr", None), int) and hasattr(obj, "__cuda_array_interface__"):
        return lambda o: o.data.ptr  # CuPy: its interface dict is rebuilt on every access
    if hasattr(obj, "__cuda_array_interface__"):
        return lambda o: o.__cuda_array_interface__["data"][0] or 0
    return memory.device_pointer


def ptr_of(obj):
    """Device address of ``obj`` (0 for None)."""
    t = type(obj)
    if t is int:
        return obj
    f = GETTERS.get(t)
    if f is None:
        if obj is None:
            return 0
        f = GETTERS[t] = _learn(obj)
    return f(obj)


#: type -> function(obj) -> bytes the object holds (the workspace size check on the hot path)
NBYTES = {}


def _learn_nbytes(obj):
    t = type(obj)
    if isinstance(obj, memory.DeviceView):
        return lambda o: o.nbytes
    if callable(getattr(t, "data_ptr", None)) and callable(getattr(obj, "element_size", None)):
        return lambda o: o.numel() * o.element_size()  # torch
    if getattr(obj, "__cuda_ndarray__", False) and isinstance(getattr(obj, "nbytes", None), int):
        return lambda o: o.nbytes  # numba device arrays (real and simulated)
    return lambda o: memory.as_view(o).nbytes


def nbytes_of(obj):
    """Bytes an array object holds, or None (raw pointers: unknown without asking the driver)."""
    if type(obj) is int or obj is None:
        return None
    f = NBYTES.get(type(obj))
    if f is None:
        f = NBYTES[type(obj)] = _learn_nbytes(obj)
    try:
        return f(obj)
    except Exception:
        return None


def tensor_view(obj, t):
    """``obj`` as a DeviceView with the descriptor's dims, strides, dtype and alignment."""
    if obj is None:
        raise BadParamError(f"{t.label}: no device pointer in the variant pack",
                            S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    try:
        return memory.as_view(obj, dims=t.dims, strides=t.strides, dtype=t.dtype,
                              alignment=min(t.alignment, t.itemsize) if t.itemsize else None)
    except BadParamError as e:
        raise BadParamError(f"{t.label}: {e.message}", e.status) from None


def workspace_view(obj, nbytes):
    """The workspace as a uint8 DeviceView of ``nbytes`` bytes; SIZE_INSUFFICIENT when it holds fewer."""
    if nbytes == 0:
        return None
    if obj is None or (type(obj) is int and obj == 0):
        raise BadParamError(f"the plan needs {nbytes} bytes of workspace, none given",
                            S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    held = nbytes_of(obj)
    if held is not None and held < nbytes:
        raise BadParamError(f"workspace of {held} bytes, the plan needs {nbytes}",
                            S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    try:
        return memory.as_view(obj, dims=(nbytes,), strides=(1,), dtype=_U8, alignment=1)
    except BadParamError as e:
        raise BadParamError(f"workspace: {e.message}", e.status) from None


def view_from_bytes(ws, offset, t):
    """A DeviceView of tensor descriptor ``t`` at byte ``offset`` of the uint8 view ``ws``."""
    need = t.nbytes_needed()
    if ws.nbytes is not None and offset + need > ws.nbytes:
        raise BadParamError(f"{t.label}: {need} bytes at workspace offset {offset} pass its end "
                            f"({ws.nbytes} bytes)", S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    return ws.sub(offset, need, t.dtype, t.dims, t.strides)


def sub_bytes(ws, offset, nbytes):
    """A uint8 DeviceView of ``nbytes`` bytes at ``offset`` of ``ws`` (None when nbytes is 0)."""
    if not nbytes:
        return None
    return ws.sub(offset, nbytes, _U8, (nbytes,), (1,))


def stream_handle(stream):
    """The raw CUstream handle (int) of ``stream``: int, numba / torch / CuPy / cuda-core stream, None."""
    if stream is None or type(stream) is int:
        return stream or 0
    from ..handle import stream_handle as _raw

    return _raw(stream)


_numba_streams = {}


def numba_stream(stream):
    """What a numba kernel launch takes for ``stream`` (0 for the default stream and in the simulator)."""
    if stream is None or simulator_enabled():
        return 0
    if hasattr(stream, "auto_synchronize"):  # already a numba stream
        return stream
    h = stream_handle(stream)
    if h == 0:
        return 0
    s = _numba_streams.get(h)
    if s is None:
        from numba import cuda

        s = _numba_streams[h] = cuda.external_stream(h)
    return s
