"""Statuses, the last-error string, and the exception hierarchy of the Pythonic layers.

Two conventions live here (see ARCHITECTURE.md):
  * C-style functions return ``(status, *outs)`` and never raise: wrap them with :func:`c_api`.
  * Pythonic layers raise :class:`CudnnError` subclasses carrying the status.
"""
import functools
import threading

from .types import cudnnStatus_t

S = cudnnStatus_t
_tls = threading.local()


def CUDNN_STATUS_CATEGORY(full_error_code):
    """Category of a status code: CATEGORY(BAD_PARAM_NULL_POINTER) == BAD_PARAM."""
    return (int(full_error_code) // 1000) * 1000


def CUDNN_STATUS_SPECIFIC_ERROR(full_error_code):
    """The specific part of a status code, with the category removed."""
    return int(full_error_code) % 1000


def CUDNN_STATUS_FULL_ERROR_CODE(category, specific_err):
    """Recombine: FULL(CATEGORY(e), SPECIFIC(e)) == e for every valid status."""
    return int(category) + int(specific_err)


def cudnnGetErrorString(status):
    """Name of a status, as cuDNN prints it (``"CUDNN_STATUS_BAD_PARAM"``)."""
    try:
        return S(int(status)).name
    except (ValueError, TypeError, OverflowError):
        return "CUDNN_STATUS_UNKNOWN"


#: called as ``hook(status, message)`` for every failure :func:`set_last_error` records; :mod:`ncudnn.log`
#: installs its ``on_error`` when it is imported (``import ncudnn`` does), so errors imports nothing above it
_error_hook = None


def set_error_hook(hook):
    """Install ``hook(status, message)``, called for every recorded failure (None: none)."""
    global _error_hook
    _error_hook = hook


def set_last_error(status, message):
    _tls.last = f"{cudnnGetErrorString(status)}: {message}" if message else ""
    if _error_hook is not None:
        _error_hook(status, message)


def clear_last_error():
    _tls.last = ""


def cudnnGetLastErrorString():
    """Message of the last failure on this thread (empty when none). Reading it clears it, as in cuDNN."""
    msg = getattr(_tls, "last", "")
    _tls.last = ""
    return msg


def peek_last_error():
    """The last-error message without clearing it (for tests and logging)."""
    return getattr(_tls, "last", "")


class CudnnError(Exception):
    """A cuDNN failure: ``.status`` is the ``cudnnStatus_t``; ``str()`` names what was wrong."""

    default_status = S.CUDNN_STATUS_INTERNAL_ERROR

    def __init__(self, message="", status=None):
        self.status = S(int(status)) if status is not None else self.default_status
        self.message = message
        super().__init__(f"{self.status.name}: {message}" if message else self.status.name)


class BadParamError(CudnnError):
    default_status = S.CUDNN_STATUS_BAD_PARAM


class NotSupportedError(CudnnError):
    default_status = S.CUDNN_STATUS_NOT_SUPPORTED


class NotInitializedError(CudnnError):
    default_status = S.CUDNN_STATUS_NOT_INITIALIZED


class InternalError(CudnnError):
    default_status = S.CUDNN_STATUS_INTERNAL_ERROR


class ExecutionFailedError(CudnnError):
    default_status = S.CUDNN_STATUS_EXECUTION_FAILED


_BY_CATEGORY = {
    1000: NotInitializedError,
    2000: BadParamError,
    3000: NotSupportedError,
    4000: InternalError,
    5000: ExecutionFailedError,
}


def error_for(status, message=""):
    """The exception class of a status' category, instantiated with that exact status."""
    cls = _BY_CATEGORY.get(CUDNN_STATUS_CATEGORY(status), CudnnError)
    return cls(message, status)


def check(status, message=""):
    """Raise the matching :class:`CudnnError` unless ``status`` is SUCCESS."""
    if int(status) != 0:
        raise error_for(status, message or peek_last_error())


def c_api(n_outs=0):
    """Decorator: make a function follow the C-style convention with ``n_outs`` out-parameters.

    The wrapped function returns its out-parameters (a tuple, one value, or None) and raises
    ``CudnnError`` on misuse. The wrapper returns ``(SUCCESS, *outs)``, or on failure
    ``(status,) + (None,) * n_outs`` so that ``err, desc = f(...)`` always unpacks. It records the
    message for :func:`cudnnGetLastErrorString` and never lets an exception out: an unexpected one
    becomes INTERNAL_ERROR with its text.
    """

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                outs = fn(*args, **kwargs)
            except CudnnError as e:
                set_last_error(e.status, f"{fn.__name__}: {e.message}")
                return _pad(e.status, n_outs)
            except Exception as e:  # never a traceback from the C-style API
                status, why = _unexpected(fn, e, args, kwargs)
                set_last_error(status, f"{fn.__name__}: {why}")
                return _pad(status, n_outs)
            if outs is None:
                outs = ()
            elif not isinstance(outs, tuple):
                outs = (outs,)
            return (S.CUDNN_STATUS_SUCCESS,) + outs

        wrapper.n_outs = n_outs
        return wrapper

    return deco


def _unexpected(fn, exc, args, kwargs):
    """(status, message) of an exception that is not a CudnnError: arguments the signature cannot take
    (a wrong count, an unknown keyword) are the caller's BAD_PARAM, as is a number no C type holds
    (an OverflowError from converting inf or 10**400); anything else is INTERNAL_ERROR with its text."""
    import inspect

    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        return S.CUDNN_STATUS_BAD_PARAM, f"wrong arguments: {e}"
    except ValueError:  # no signature to check against
        pass
    if isinstance(exc, OverflowError):
        return S.CUDNN_STATUS_BAD_PARAM, f"an argument is out of range ({exc})"
    return S.CUDNN_STATUS_INTERNAL_ERROR, f"unexpected {type(exc).__name__}: {exc}"


def _pad(status, n_outs):
    return (status,) + (None,) * n_outs
