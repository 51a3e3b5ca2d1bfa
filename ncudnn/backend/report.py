"""Raising a backend failure with a message naming the descriptor, the attribute and what was wrong."""
from ..errors import error_for
from ..types import cudnnBackendDescriptorType_t as D
from ..types import cudnnStatus_t as S


def _name(x):
    if x is None:
        return ""
    if isinstance(x, D):
        return x.name
    t = getattr(x, "type", None)
    if isinstance(t, D):
        return t.name
    return getattr(x, "name", str(x))


def fail(status, desc, attr, message):
    """Raise the CudnnError for ``status``: "<DESCRIPTOR>: <ATTRIBUTE>: <message>"."""
    parts = [p for p in (_name(desc), _name(attr)) if p]
    raise error_for(status, ": ".join(parts + [message]))


def bad(desc, attr, message):
    fail(S.CUDNN_STATUS_BAD_PARAM, desc, attr, message)


def unsupported(desc, attr, message):
    fail(S.CUDNN_STATUS_NOT_SUPPORTED, desc, attr, message)
