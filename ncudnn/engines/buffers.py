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
import ml_dtypes
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


#: type -> function(obj) -> the binding-cache key of a buffer: its address and, for a buffer that
#: describes itself, its dtype, shape and strides (a new view at the same address is checked again)
KEYS = {}


def _learn_key(obj):
    t = type(obj)
    if isinstance(obj, memory.DeviceView):
        return lambda o: (o.ptr, o.dtype, o.shape, o.strides)
    if callable(getattr(t, "data_ptr", None)) and callable(getattr(obj, "stride", None)):
        return lambda o: (o.data_ptr(), o.dtype, o.shape, o.stride())  # torch
    ptr = _learn(obj)
    if all(hasattr(obj, a) for a in ("dtype", "shape", "strides")):
        return lambda o: (ptr(o), o.dtype, o.shape, o.strides)  # numba, CuPy
    if hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__dlpack__"):
        def described(o):  # a generic producer: what it says of itself, read again each call
            r = memory.describe(o)
            return (r.ptr, str(r.dtype), r.shape, r.strides)
        return described
    return lambda o: (ptr(o), t)


def key_of(obj):
    """The binding-cache key of ``obj`` (see :data:`KEYS`); a raw int pointer is its own key."""
    t = type(obj)
    if t is int:
        return obj
    f = KEYS.get(t)
    if f is None:
        if obj is None:
            return 0
        f = KEYS[t] = _learn_key(obj)
    return f(obj)


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
    """``obj`` as a DeviceView with the descriptor's dims, strides, dtype and alignment.

    A buffer that describes itself (numba / torch / CuPy / DLPack / DeviceView) must also agree with
    the tensor (:func:`buffer_mismatch`); a raw integer pointer is taken as is, as cuDNN does.
    """
    if obj is None:
        raise BadParamError(f"{t.label}: no device pointer in the variant pack",
                            S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    try:
        raw = memory.describe(obj)
        why = buffer_mismatch(raw, t)
        if why is not None:
            small = raw.extent is not None and raw.extent < t.nbytes_needed()
            raise BadParamError(why, S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT if small
                                else S.CUDNN_STATUS_BAD_PARAM)
        return memory.as_view(raw, dims=t.dims, strides=t.strides, dtype=t.dtype,
                              alignment=min(t.alignment, t.itemsize) if t.itemsize else None)
    except BadParamError as e:
        msg = e.message if e.message.startswith(t.label) else f"{t.label}: {e.message}"
        raise BadParamError(msg, e.status) from None


# --------------------------------------------------------------- self-describing buffers
#
# A buffer that carries its dtype, shape and strides is accepted for a tensor when
#   * its dtype is the tensor's (bfloat16 may come as the uint16 bits numba arrays carry, FP8 as uint8
#     bits; a dtype the producer cannot name, e.g. '<V2', is not checked), and
#   * its geometry is the tensor's: the same dims and element strides once dims of extent 1 and
#     broadcast (stride-0) dims are left out; or a C-contiguous buffer of the same element count when
#     the tensor's strides are packed too (a reshape, e.g. an NHWC-shaped array for an NHWC
#     descriptor); or a contiguous 1-D buffer (flat storage, as an allocation is: it must hold the
#     span of the strides). Same dims with other strides (an NCHW tensor for an NHWC one) is a mismatch.
# A 1-D uint8 buffer is untyped storage (``memory.allocate``): only its size is checked. Descriptors a
# front end re-shaped for the graph (a legacy broadcast) keep the user's dims / strides in
# ``meta["declared"]``, which the buffer is checked against.

#: declared data type -> the other NumPy dtypes a buffer may carry its bits in
_BITS_OF = {np.dtype(ml_dtypes.bfloat16): (np.dtype(np.uint16),),
            np.dtype(ml_dtypes.float8_e4m3fn): (_U8,),
            np.dtype(ml_dtypes.float8_e5m2): (_U8,)}


def _dtype_name(dt):
    if dt is None:
        return "untyped"
    name = getattr(dt, "name", None)
    return name if isinstance(name, str) else str(dt)


def _squeezed(dims, strides):
    return [(int(d), int(s)) for d, s in zip(dims, strides) if int(d) != 1 and int(s) != 0]


def _is_packed(pairs):
    """True when (extent, stride) pairs cover their elements densely, in some dim order."""
    expect = 1
    for d, s in sorted(pairs, key=lambda p: (p[1], p[0])):
        if s != expect:
            return False
        expect *= d
    return True


def buffer_mismatch(raw, t):
    """Why a self-describing buffer (``memory.describe`` of it) disagrees with tensor ``t``, or None.

    None as well for raw pointers, untyped byte buffers and tensors whose layout the buffer cannot
    express (vectorized or sub-byte data types).
    """
    if raw.shape is None or t.dims is None or t.strides is None or t.vector_count != 1:
        return None
    want = memory.DTYPE_OF.get(t.dtype)
    if want is None:
        return None
    try:
        given = None if raw.dtype is None else memory.numpy_dtype(raw.dtype)
    except Exception:
        given = raw.dtype  # a type ncudnn has no buffer type for: a mismatch, named as the producer does
    shape, strides = tuple(raw.shape), tuple(raw.strides)
    if given == _U8 and len(shape) == 1:
        return None  # untyped storage
    dims, dstrides = t.meta.get("declared") or (t.dims, t.strides)
    ok_type = given is None or given == want or given in _BITS_OF.get(want, ())
    if ok_type and _geometry_ok(shape, strides, dims, dstrides):
        return None
    return (f"{t.label}: declared {t.dtype.name.replace('CUDNN_DATA_', '')} dims {list(dims)} strides "
            f"{list(dstrides)}, given {_dtype_name(given)} buffer shape {shape} strides {strides}")


def _geometry_ok(shape, strides, dims, dstrides):
    got, decl = _squeezed(shape, strides), _squeezed(dims, dstrides)
    if [d for d, _ in got] == [d for d, _ in decl]:
        return [s for _, s in got] == [s for _, s in decl]
    numel = int(np.prod([d for d, _ in decl], dtype=np.int64))
    if len(shape) == 1 and (shape[0] <= 1 or strides[0] == 1):
        return True  # flat storage: as_view checks that it holds the span
    got_numel = int(np.prod([d for d, _ in got], dtype=np.int64))
    return got_numel == numel and [s for _, s in got] == list(memory.packed_strides([d for d, _ in got])) \
        and _is_packed(decl)


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
