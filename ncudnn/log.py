"""Logging as cuDNN does it.

Environment (read at import; :func:`reload_from_env` reads it again):
  * ``CUDNN_LOGLEVEL_DBG``: 0 off, 1 errors, 2 + warnings, 3 + info (the cudnnSeverity_t values).
    The older per-level switches CUDNN_LOGERR_DBG / CUDNN_LOGWARN_DBG / CUDNN_LOGINFO_DBG = 1 also work.
  * ``CUDNN_LOGDEST_DBG``: ``stdout``, ``stderr`` or a file path. As in cuDNN, the built-in callback
    writes nothing unless a destination is set; a user callback receives every enabled message.

C-style: ``cudnnSetCallback(mask, udata, fptr) -> (status,)`` and
``cudnnGetCallback() -> (status, mask, udata, fptr)``; ``fptr(severity, udata, dbg, msg)`` gets a
:class:`cudnnDebug_t` and the message text (lines separated by newlines); ``fptr=None`` selects the
built-in callback. Mask bits are the CUDNN_SEV_*_EN values; FATAL is always on.

Other layers call :func:`log` (cheap when the severity is off: check :func:`enabled` before building
an expensive message); errors.set_last_error reports through :func:`on_error` (installed as its hook here).
"""
import datetime
import os
import sys
import threading
import time

from . import errors as _errors
from .errors import BadParamError, c_api
from .types import cudnnSeverity_t, cudnnStatus_t
from .version import CUDNN_VERSION

SEV = cudnnSeverity_t
CUDNN_SEV_ERROR_EN = 1 << SEV.CUDNN_SEV_ERROR      # 0b0010
CUDNN_SEV_WARNING_EN = 1 << SEV.CUDNN_SEV_WARNING  # 0b0100
CUDNN_SEV_INFO_EN = 1 << SEV.CUDNN_SEV_INFO        # 0b1000
_LETTER = {SEV.CUDNN_SEV_FATAL: "F", SEV.CUDNN_SEV_ERROR: "E", SEV.CUDNN_SEV_WARNING: "W",
           SEV.CUDNN_SEV_INFO: "I"}

_START = time.time()
_lock = threading.RLock()
_tls = threading.local()


class cudnnDebug_t:
    """The metadata a callback receives, with the C struct's field names."""

    __slots__ = ("cudnn_version", "cudnnStatus", "time_sec", "time_usec", "time_delta", "handle", "stream",
                 "pid", "tid", "cudaDeviceId", "reserved")

    def __init__(self, cudnn_version=0, cudnnStatus=cudnnStatus_t.CUDNN_STATUS_SUCCESS, time_sec=0,
                 time_usec=0, time_delta=0, handle=None, stream=None, pid=0, tid=0, cudaDeviceId=-1,
                 reserved=None):
        self.cudnn_version = cudnn_version
        self.cudnnStatus = cudnnStatus
        self.time_sec = time_sec
        self.time_usec = time_usec
        self.time_delta = time_delta
        self.handle = handle
        self.stream = stream
        self.pid = pid
        self.tid = tid
        self.cudaDeviceId = cudaDeviceId
        self.reserved = [0] * 15 if reserved is None else reserved

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__ if k != "reserved")
        return f"cudnnDebug_t({fields})"


class _State:
    mask = 0
    udata = None
    fptr = None           # None: the built-in callback
    dest_name = None      # CUDNN_LOGDEST_DBG as given
    _stream = None        # open file object of the destination
    _owns_stream = False


_state = _State()


def _env_mask(env):
    try:
        level = int(env.get("CUDNN_LOGLEVEL_DBG", "0") or 0)
    except ValueError:
        level = 0
    mask = 0
    if level >= SEV.CUDNN_SEV_ERROR or env.get("CUDNN_LOGERR_DBG") == "1":
        mask |= CUDNN_SEV_ERROR_EN
    if level >= SEV.CUDNN_SEV_WARNING or env.get("CUDNN_LOGWARN_DBG") == "1":
        mask |= CUDNN_SEV_WARNING_EN
    if level >= SEV.CUDNN_SEV_INFO or env.get("CUDNN_LOGINFO_DBG") == "1":
        mask |= CUDNN_SEV_INFO_EN
    return mask


def reload_from_env(env=None):
    """Read CUDNN_LOGLEVEL_DBG / CUDNN_LOGDEST_DBG again; resets the mask and the built-in callback."""
    env = os.environ if env is None else env
    with _lock:
        _close_dest()
        _state.mask = _env_mask(env)
        _state.udata = None
        _state.fptr = None
        _state.dest_name = env.get("CUDNN_LOGDEST_DBG") or None


def _close_dest():
    if _state._stream is not None and _state._owns_stream:
        try:
            _state._stream.close()
        except OSError:
            pass
    _state._stream = None
    _state._owns_stream = False


def _dest_stream():
    """The open destination of the built-in callback (None when CUDNN_LOGDEST_DBG is unset)."""
    name = _state.dest_name
    if name is None:
        return None
    if name == "stdout":
        return sys.stdout
    if name == "stderr":
        return sys.stderr
    if _state._stream is None:
        try:
            _state._stream = open(name, "a", buffering=1, encoding="utf-8")
            _state._owns_stream = True
        except OSError:
            _state.dest_name = None  # unusable destination: logging goes quiet, as in cuDNN
            return None
    return _state._stream


def enabled(severity):
    """True when a message of ``severity`` would reach a callback (FATAL always does)."""
    sev = int(severity)
    return sev == SEV.CUDNN_SEV_FATAL or bool(_state.mask & (1 << sev))


def _debug_record(status, handle):
    now = time.time()
    return cudnnDebug_t(
        cudnn_version=CUDNN_VERSION, cudnnStatus=cudnnStatus_t(int(status)), time_sec=int(now),
        time_usec=int((now % 1) * 1e6), time_delta=int(now - _START), handle=handle,
        stream=getattr(handle, "stream", None), pid=os.getpid(), tid=threading.get_native_id(),
        cudaDeviceId=getattr(handle, "device_id", -1))


def format_message(severity, message, dbg):
    """The built-in callback's text: cuDNN's "E! CuDNN (v…) …" block, one prefixed line per line."""
    big = _LETTER[SEV(int(severity))]
    small = big.lower()
    lines = str(message).splitlines() or [""]
    out = [f"{big}! CuDNN (v{dbg.cudnn_version}) {lines[0]}"]
    out += [f"{small}!     {line}" for line in lines[1:]]
    since = int(dbg.time_delta)
    stamp = datetime.datetime.fromtimestamp(dbg.time_sec + dbg.time_usec / 1e6).isoformat(timespec="microseconds")
    out.append(f"{small}! Time: {stamp} ({since // 86400}d+{since % 86400 // 3600}h+"
               f"{since % 3600 // 60}m+{since % 60}s since start)")
    handle = "NULL" if dbg.handle is None else f"0x{id(dbg.handle):x}"
    stream = "NULL" if dbg.stream is None else str(dbg.stream)
    gpu = "NULL" if dbg.cudaDeviceId is None or dbg.cudaDeviceId < 0 else str(dbg.cudaDeviceId)
    out.append(f"{small}! Process={dbg.pid}; Thread={dbg.tid}; GPU={gpu}; Handle={handle}; "
               f"StreamId={stream}.")
    return "\n".join(out) + "\n"


def log(severity, message, handle=None, status=cudnnStatus_t.CUDNN_STATUS_SUCCESS):
    """Send ``message`` at ``severity`` (cudnnSeverity_t) to the callback; returns True when sent.

    Never raises: a failing user callback or destination is ignored.
    """
    if not enabled(severity):
        return False
    if getattr(_tls, "busy", False):  # a callback that logs (or fails a call) must not recurse
        return False
    sev = SEV(int(severity))
    dbg = _debug_record(status, handle)
    _tls.busy = True
    try:
        return _dispatch(sev, message, dbg)
    finally:
        _tls.busy = False


def _dispatch(sev, message, dbg):
    with _lock:
        fptr, udata = _state.fptr, _state.udata
        if fptr is not None:
            try:
                fptr(sev, udata, dbg, str(message))
            except Exception:
                return False
            return True
        out = _dest_stream()
        if out is None:
            return False
        try:
            out.write(format_message(sev, message, dbg))
            out.flush()
        except (OSError, ValueError):
            return False
    return True


def on_error(status, message):
    """Hook for errors.set_last_error (installed below): every recorded failure is logged at ERROR."""
    if not enabled(SEV.CUDNN_SEV_ERROR):
        return
    try:
        name = cudnnStatus_t(int(status)).name
    except ValueError:
        name = str(status)
    log(SEV.CUDNN_SEV_ERROR, f"Error: {name}; Reason: {message}", status=status)


def api_call(name, params, handle=None):
    """Log a C-style call at INFO the way cuDNN does ("function X() called:" and one line per parameter)."""
    if not enabled(SEV.CUDNN_SEV_INFO):
        return
    lines = [f"function {name}() called:"] + [f"    {k}: {v!r}" for k, v in params.items()]
    log(SEV.CUDNN_SEV_INFO, "\n".join(lines), handle=handle)


@c_api(0)
def cudnnSetCallback(mask, udata, fptr):
    """(status,): set the severity mask, the user pointer and the callback (None: the built-in one)."""
    if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0 or mask > 0xFFFFFFFF:
        raise BadParamError(f"mask must be an unsigned 32-bit int, got {mask!r}")
    if fptr is not None and not callable(fptr):
        raise BadParamError(f"fptr must be callable or None, got {type(fptr).__name__}")
    with _lock:
        _state.mask = int(mask)
        _state.udata = udata
        _state.fptr = fptr


@c_api(3)
def cudnnGetCallback():
    """(status, mask, udata, fptr): fptr is None while the built-in callback is in use."""
    with _lock:
        return _state.mask, _state.udata, _state.fptr


reload_from_env()
_errors.set_error_hook(on_error)
