"""The opaque ``cudnnBackendDescriptor_t``: a typed bag of attributes with a finalized flag.

``attrs`` maps ``cudnnBackendAttributeName_t`` -> ``(cudnnBackendAttributeType_t, [values])`` as set
by the user (or, for read-only attributes, by finalize). ``state`` holds what finalize derived
(tensor geometry, the lowered IR graph, the engine, the built plan, ...). Only ``machinery.py`` and
the finalize checks touch either.
"""
import itertools

from ..types import cudnnBackendDescriptorType_t as D

_ids = itertools.count(1)

#: descriptor type -> {attribute: default values}; filled by schema.py from the schema tables.
DEFAULTS = {}


class BackendDescriptor:
    """One backend descriptor (what ``cudnnBackendCreateDescriptor`` hands out)."""

    __slots__ = ("type", "attrs", "state", "finalized", "destroyed", "id")

    def __init__(self, dtype):
        self.type = D(dtype)
        self.attrs = {}
        self.state = {}
        self.finalized = False
        self.destroyed = False
        self.id = next(_ids)

    def reset(self, dtype=None):
        if dtype is not None:
            self.type = D(dtype)
        self.attrs = {}
        self.state = {}
        self.finalized = False
        self.destroyed = False

    def copy_from(self, other):
        """Make this descriptor a finalized copy of ``other`` (how Get fills caller descriptors)."""
        self.type = other.type
        self.attrs = {k: (t, list(v) if isinstance(v, list) else v) for k, (t, v) in other.attrs.items()}
        self.state = dict(other.state)
        self.finalized = other.finalized
        self.destroyed = False

    # Read helpers for finalize checks (attributes are validated by then).
    def values(self, name, default=None):
        """The values set for ``name``, else the schema default, else ``default``."""
        entry = self.attrs.get(name)
        if entry is not None:
            return entry[1] if isinstance(entry[1], str) else list(entry[1])
        schema_default = DEFAULTS.get(self.type, {}).get(name)
        return list(schema_default) if schema_default is not None else default

    def value(self, name, default=None):
        vals = self.values(name)
        if isinstance(vals, str):  # CUDNN_TYPE_CHAR: the string is the value
            return vals
        return vals[0] if vals else default

    def is_set(self, name):
        return name in self.attrs

    @property
    def short(self):
        return self.type.name.replace("CUDNN_BACKEND_", "").replace("_DESCRIPTOR", "")

    def __repr__(self):
        flag = "finalized" if self.finalized else "not finalized"
        return f"<{self.type.name} #{self.id} {flag}>"
