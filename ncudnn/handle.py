"""cuDNN handles: the device, the stream, a workspace pool and the caches every call goes through.

C-style (``(status, *outs)``, never raising): cudnnCreate() -> (status, handle), cudnnDestroy(handle),
cudnnSetStream(handle, stream), cudnnGetStream(handle) -> (status, stream),
cudnnQueryRuntimeError(handle, mode, tag) -> (status, rstatus). Other layers take a handle with
:func:`get_handle_or_raise` and launch on :meth:`Handle.launch_stream`.

Streams are taken from numba streams, cuda-core / cuda-python streams, torch streams and raw handles:
``__cuda_stream__`` (protocol), ``.cuda_stream`` (torch), ``.handle`` (numba, cuda-core), an int or
``__int__`` (cuda-python's CUstream / cudaStream_t), ctypes pointers; 0 or None is the default stream.

In the simulator a handle works: it poses as the sm_90 target (132 SMs) so that engine selection
matches the GPU; ``handle.simulator`` tells engines when kernels run on the CPU.
"""
import numpy as np

from . import log as _log
from .errors import BadParamError, CudnnError, NotInitializedError, c_api
from .memory import WorkspacePool, int_value
from .platform import gpu_present, simulator_enabled
from .types import cudnnErrQueryMode_t, cudnnSeverity_t, cudnnStatus_t

S = cudnnStatus_t
MIN_COMPUTE_CAPABILITY = (7, 5)  # the oldest SM that CUDA 13 still compiles for
SIMULATED_DEVICE = {"name": "CUDA simulator", "compute_capability": (9, 0), "sm_count": 132}


def device_info():
    """The current device as a dict: name, compute_capability, sm_count, device_id, simulator.

    Raises NotInitializedError (with the reason) when no usable device exists.
    """
    if simulator_enabled():
        return dict(SIMULATED_DEVICE, device_id=0, simulator=True)
    try:
        from numba import cuda

        dev = cuda.get_current_device()
        sm = dev.MULTIPROCESSOR_COUNT
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        return {"name": name, "compute_capability": tuple(dev.compute_capability), "sm_count": int(sm),
                "device_id": int(dev.id), "simulator": False}
    except Exception as e:
        why = "no CUDA driver or device was found" if not gpu_present() else "CUDA initialisation failed"
        detail = " ".join(str(e).split())
        raise NotInitializedError(f"{why} ({type(e).__name__}: {detail}); NUMBA_ENABLE_CUDASIM=1 runs "
                                  "ncudnn in the CUDA simulator") from None


class Handle:
    """One cuDNN context: device, stream, workspace pool, per-handle caches, runtime-error slot."""

    def __init__(self, info):
        self.device_id = info["device_id"]
        self.device_name = info["name"]
        self.compute_capability = info["compute_capability"]
        self.sm_count = info["sm_count"]
        self.simulator = info["simulator"]
        self.stream_obj = 0  # what cudnnSetStream was given
        self.stream = 0      # its raw cudaStream_t value
        self.workspace = WorkspacePool()
        #: per-handle caches for the engine layer (plans, kernels, heuristics), keyed by its own names
        self.caches = {}
        self.destroyed = False
        self._launch_stream = None
        self._rt_flag = None

    def __repr__(self):
        state = "destroyed" if self.destroyed else f"stream={self.stream}"
        return f"<cudnnHandle_t {self.device_name} sm_{self.compute_capability[0]}{self.compute_capability[1]} " \
               f"{state}>"

    def launch_stream(self):
        """The numba stream kernels launch on: kernel[grid, block, handle.launch_stream()](...)."""
        if self._launch_stream is None:
            from numba import cuda

            obj = self.stream_obj
            if _is_numba_stream(obj):
                self._launch_stream = obj
            elif self.simulator or self.stream == 0:
                self._launch_stream = cuda.default_stream()
            else:
                self._launch_stream = cuda.external_stream(self.stream)
        return self._launch_stream

    def workspace_view(self, nbytes):
        """A uint8 DeviceView of ``nbytes`` bytes from the handle's grow-only pool."""
        return self.workspace.get(nbytes)

    def runtime_error_flag(self):
        """int32[1] device array kernels write a cudnnStatus_t into (e.g. RUNTIME_FP_OVERFLOW).

        Zero-copy (mapped host memory) on a GPU, so cudnnQueryRuntimeError reads it without a copy.
        """
        if self._rt_flag is None:
            from numba import cuda

            self._rt_flag = cuda.mapped_array(1, dtype=np.int32)
            self._rt_flag[0] = 0
        return self._rt_flag

    def synchronize(self):
        self.launch_stream().synchronize()


def _is_numba_stream(obj):
    if obj is None or isinstance(obj, int):
        return False
    mod = type(obj).__module__ or ""
    return mod.startswith("numba.cuda") or mod.startswith("numba_cuda")


def _as_int(x):
    value = int_value(x)
    if value is None:
        raise TypeError(f"{type(x).__name__} has no integer value")
    return value


def stream_handle(stream):
    """The raw cudaStream_t value of any accepted stream object (0 = default stream)."""
    if stream is None:
        return 0
    if not isinstance(stream, np.integer) and (
            any(hasattr(stream, a) for a in ("__cuda_array_interface__", "__array_interface__", "__dlpack__"))
            or isinstance(stream, (np.ndarray, bool, float, str, bytes))):
        raise BadParamError(f"a {type(stream).__name__} is not a CUDA stream (a device array or a value)")
    try:
        if hasattr(stream, "__cuda_stream__"):
            proto = stream.__cuda_stream__
            ver, raw = proto() if callable(proto) else proto
            raw = _as_int(raw)
        elif hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
            raw = _as_int(stream.cuda_stream)
        elif hasattr(stream, "handle"):  # numba Stream, cuda-core Stream
            raw = _as_int(stream.handle)
        elif simulator_enabled() and _is_numba_stream(stream):  # simulated numba stream: no handle
            raw = id(stream)
        else:
            raw = _as_int(stream)
    except (TypeError, ValueError) as e:
        raise BadParamError(f"{type(stream).__name__} is not a CUDA stream ({e})") from None
    if not 0 <= raw < 2 ** 64:
        raise BadParamError(f"stream handle {raw:.6g} is not a 64-bit handle")
    return raw


def get_handle_or_raise(handle):
    """The live :class:`Handle`, or BadParamError saying what was passed instead."""
    if isinstance(handle, Handle):
        if handle.destroyed:
            raise BadParamError("handle was destroyed (cudnnDestroy)")
        return handle
    if handle is None or (isinstance(handle, int) and handle == 0):
        raise BadParamError("handle is NULL: create one with cudnnCreate()")
    raise BadParamError(f"{type(handle).__name__} is not a cudnnHandle_t from cudnnCreate()")


@c_api(1)
def cudnnCreate():
    """(status, handle): a context on the current device (NOT_INITIALIZED with the reason if none)."""
    info = device_info()
    cc = info["compute_capability"]
    if tuple(cc) < MIN_COMPUTE_CAPABILITY:
        raise CudnnError(f"{info['name']} is sm_{cc[0]}{cc[1]}; ncudnn needs sm_"
                         f"{MIN_COMPUTE_CAPABILITY[0]}{MIN_COMPUTE_CAPABILITY[1]} or newer",
                         S.CUDNN_STATUS_ARCH_MISMATCH)
    h = Handle(info)
    _log.api_call("cudnnCreate", {"device": info["name"], "simulator": info["simulator"]}, handle=h)
    return h


@c_api(0)
def cudnnDestroy(handle):
    """(status,): wait for the handle's stream, free its workspace and caches."""
    h = get_handle_or_raise(handle)
    _log.api_call("cudnnDestroy", {"handle": h}, handle=h)
    try:
        h.synchronize()
    finally:
        h.destroyed = True
        h.workspace.release()
        h.caches.clear()
        h._launch_stream = None
        h._rt_flag = None


@c_api(0)
def cudnnSetStream(handle, streamId):
    """(status,): kernels of this handle launch on ``streamId`` from now on."""
    h = get_handle_or_raise(handle)
    raw = stream_handle(streamId)
    _log.api_call("cudnnSetStream", {"handle": h, "streamId": raw}, handle=h)
    h.stream_obj = 0 if streamId is None else streamId
    h.stream = raw
    h._launch_stream = None


@c_api(1)
def cudnnGetStream(handle):
    """(status, streamId): the stream object last given to cudnnSetStream (0 for the default stream)."""
    return get_handle_or_raise(handle).stream_obj


def _stream_busy(h):
    if h.simulator:
        return False
    from cuda.bindings import driver

    (err,) = driver.cuStreamQuery(driver.CUstream(h.stream))
    if err == driver.CUresult.CUDA_ERROR_NOT_READY:
        return True
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudnnError(f"cuStreamQuery failed: {err}", S.CUDNN_STATUS_INTERNAL_ERROR)
    return False


@c_api(1)
def cudnnQueryRuntimeError(handle, mode, tag=None):
    """(status, rstatus): the error kernels reported through :meth:`Handle.runtime_error_flag`.

    RAWCODE reads the slot as it is; NONBLOCKING gives RUNTIME_IN_PROGRESS while the stream has work;
    BLOCKING waits for the stream. A reported error is cleared once read. ``tag`` must be None.
    """
    h = get_handle_or_raise(handle)
    try:
        mode = cudnnErrQueryMode_t(int(mode))
    except (TypeError, ValueError):
        raise BadParamError(f"mode {mode!r} is not a cudnnErrQueryMode_t") from None
    if tag is not None:
        raise BadParamError("tag must be NULL (None)")
    if mode == cudnnErrQueryMode_t.CUDNN_ERRQUERY_NONBLOCKING and _stream_busy(h):
        return S.CUDNN_STATUS_RUNTIME_IN_PROGRESS
    if mode == cudnnErrQueryMode_t.CUDNN_ERRQUERY_BLOCKING:
        h.synchronize()
    if h._rt_flag is None:
        return S.CUDNN_STATUS_SUCCESS
    code = int(h._rt_flag[0])
    h._rt_flag[0] = 0
    try:
        rstatus = S(code)
    except ValueError:
        rstatus = S.CUDNN_STATUS_INTERNAL_ERROR
    if rstatus != S.CUDNN_STATUS_SUCCESS:
        _log.log(cudnnSeverity_t.CUDNN_SEV_WARNING, f"runtime error reported by a kernel: {rstatus.name}",
                 handle=h, status=rstatus)
    return rstatus
