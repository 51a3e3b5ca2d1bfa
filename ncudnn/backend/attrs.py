"""The vocabulary of the attribute schema: one :class:`Attr` row per (descriptor type, attribute).

A row says which ``cudnnBackendAttributeType_t`` values the attribute accepts, how many elements it
takes (``count``: ``(min, max)``, ``max`` None for unbounded), whether the user must set it
(REQUIRED), may set it (OPTIONAL), may only read it (READONLY) or whether it is a documented
placeholder (PLACEHOLDER: "currently not supported"), its default, and for descriptor-typed
attributes which descriptor types the elements may be.

The schema modules (``schema_*.py``) are data built from the helpers below; ``machinery.py`` is the
only code that interprets them.
"""
from dataclasses import dataclass, field

from ..types import MACROS
from ..types import cudnnBackendAttributeType_t as T
from ..types import cudnnBackendDescriptorType_t as D

REQUIRED = "required"
OPTIONAL = "optional"
READONLY = "read-only"
PLACEHOLDER = "placeholder"

MAX_DIMS = MACROS["CUDNN_DIM_MAX"]  # CUDNN_MAX_DIMS

ONE = (1, 1)
ANY = (0, None)
ONE_OR_MORE = (1, None)
UP_TO_MAX_DIMS = (1, MAX_DIMS)
UP_TO_SPATIAL = (1, MAX_DIMS - 2)

FLOATS = (T.CUDNN_TYPE_FLOAT, T.CUDNN_TYPE_DOUBLE)
INT_OR_FRACTION = (T.CUDNN_TYPE_INT64, T.CUDNN_TYPE_FRACTION)

#: Every operation-node descriptor type (what CUDNN_ATTR_OPERATIONGRAPH_OPS accepts).
OPERATION_TYPES = tuple(d for d in D if d.name.startswith("CUDNN_BACKEND_OPERATION_"))


@dataclass(frozen=True)
class Attr:
    """One attribute of one descriptor type."""

    types: tuple
    count: tuple = ONE
    kind: str = REQUIRED
    default: object = None  # a list of values, or None for "unset"
    desc_types: tuple = ()  # for CUDNN_TYPE_BACKEND_DESCRIPTOR elements
    doc: str = ""

    @property
    def settable(self):
        return self.kind in (REQUIRED, OPTIONAL)


@dataclass
class DescSchema:
    """All attributes of one descriptor type (its finalize check is ``checks.FINALIZERS[dtype]``).

    ``user_finalizable`` is False for the read-only descriptor types the library fills in
    (knob info, layout info, intermediate info): Finalize on them is NOT_SUPPORTED.
    """

    dtype: D
    attrs: dict
    user_finalizable: bool = True
    prefix: str = ""
    extra: dict = field(default_factory=dict)


def req(types, count=ONE, **kw):
    return Attr(_types(types), count, REQUIRED, **kw)


def opt(types, count=ONE, default=None, **kw):
    if default is not None and not isinstance(default, list):
        default = [default]
    return Attr(_types(types), count, OPTIONAL, default, **kw)


def ro(types, count=ONE, **kw):
    return Attr(_types(types), count, READONLY, **kw)


def placeholder(types, count=ANY, **kw):
    return Attr(_types(types), count, PLACEHOLDER, **kw)


def tensor(required=True, count=ONE):
    """A tensor-descriptor-valued attribute."""
    kind = REQUIRED if required else OPTIONAL
    return Attr((T.CUDNN_TYPE_BACKEND_DESCRIPTOR,), count, kind,
                desc_types=(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR,))


def desc(dtypes, required=True, count=ONE, readonly=False):
    """A descriptor-valued attribute whose elements are of ``dtypes``."""
    kind = READONLY if readonly else (REQUIRED if required else OPTIONAL)
    return Attr((T.CUDNN_TYPE_BACKEND_DESCRIPTOR,), count, kind, desc_types=_types(dtypes))


def _types(t):
    return tuple(t) if isinstance(t, (tuple, list)) else (t,)
