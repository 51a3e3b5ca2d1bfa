"""Descriptors and attributes the library fills in, typed from the schema: :func:`make_filled` (a finalized
knob info, layout info, engine, engine config, ...) and :func:`set_readonly` (a read-only attribute a
finalize sets). Both the finalize checks (``checks/``) and the generic machinery use them, so they sit below
both."""
from ..types import cudnnBackendAttributeName_t as A
from .descriptor import BackendDescriptor
from .schema import SCHEMA


def make_filled(dtype, attrs):
    """A finalized library-filled descriptor (knob info, layout info, engine config, ...)."""
    d = BackendDescriptor(dtype)
    schema = SCHEMA[d.type]
    for name, vals in attrs.items():
        vals = vals if isinstance(vals, (list, str)) else [vals]
        d.attrs[A(name)] = (schema.attrs[A(name)].types[0], vals)
    d.finalized = True
    return d


def set_readonly(d, name, values):
    """Set the read-only attribute ``name`` of ``d`` to ``values``, typed as the schema says."""
    d.attrs[name] = (SCHEMA[d.type].attrs[name].types[0], list(values))
