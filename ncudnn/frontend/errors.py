"""The exceptions the frontend raises. Each is a :class:`ncudnn.CudnnError` of the status' category
(``.status`` carries the exact cudnnStatus_t) and also the builtin the real frontend raises
(cudnn-frontend raises ``cudnnGraphNotSupportedError`` for unsupported graphs and RuntimeError /
ValueError for the rest), so ``except RuntimeError`` written for real cuDNN keeps working."""
from ..errors import (CudnnError, BadParamError, ExecutionFailedError, InternalError, NotInitializedError,
                      NotSupportedError, CUDNN_STATUS_CATEGORY, peek_last_error, set_last_error)
from ..types import cudnnStatus_t

S = cudnnStatus_t


class cudnnGraphNotSupportedError(NotSupportedError, RuntimeError):
    """No engine can run the graph (or one of its nodes): the message names the node and why."""


class cudnnGraphBadParamError(BadParamError, ValueError):
    """A tensor or attribute of the graph is invalid (shape, stride, data type, missing input)."""


class cudnnGraphInternalError(InternalError, RuntimeError):
    """An unexpected failure inside ncudnn."""


class cudnnGraphExecutionFailedError(ExecutionFailedError, RuntimeError):
    """A kernel launch or a device operation failed during execute."""


class cudnnGraphNotInitializedError(NotInitializedError, RuntimeError):
    """No usable device (or a destroyed handle)."""


_BY_CATEGORY = {
    1000: cudnnGraphNotInitializedError,
    2000: cudnnGraphBadParamError,
    3000: cudnnGraphNotSupportedError,
    4000: cudnnGraphInternalError,
    5000: cudnnGraphExecutionFailedError,
}


def graph_error(status, message):
    """The frontend exception for ``status`` carrying ``message``, which also becomes this thread's
    last-error string (``cudnn.get_last_error_string()``), as a failing cuDNN call leaves its reason
    there (a message that already is the last error, re-raised from a C-style call, is kept as it is)."""
    cls = _BY_CATEGORY.get(CUDNN_STATUS_CATEGORY(status), cudnnGraphInternalError)
    if message and message != peek_last_error():
        set_last_error(status, message)
    return cls(message, status)


def reraise(err, context=""):
    """Turn any :class:`CudnnError` (from the IR or the engines) into the frontend's class, same status."""
    if isinstance(err, tuple(_BY_CATEGORY.values())) and not context:
        return err
    msg = err.message if isinstance(err, CudnnError) else str(err)
    status = err.status if isinstance(err, CudnnError) else S.CUDNN_STATUS_INTERNAL_ERROR
    return graph_error(status, f"{context}: {msg}" if context else msg)
