"""The one attribute schema: every supported descriptor type -> :class:`DescSchema`.

Built from the data modules (``schema_core``, ``schema_ops``, ``schema_ops2``, ``schema_ops3``, ``schema_attention``,
``schema_engine``); the per-descriptor finalize checks (``checks/``, ``checks.FINALIZERS``) are looked up
by ``machinery.finalize``, not held here. Descriptor types missing here are refused by
``cudnnBackendCreateDescriptor`` with NOT_SUPPORTED.
"""
import os

from ..types import cudnnBackendAttributeName_t as A
from . import descriptor, schema_attention, schema_core, schema_engine, schema_ops, schema_ops2, schema_ops3
from .attrs import DescSchema


def _prefix(names):
    prefix = os.path.commonprefix([n.name for n in names])
    return prefix[: prefix.rfind("_") + 1]


def _build():
    table = {}
    for module in (schema_core, schema_ops, schema_ops2, schema_ops3, schema_attention, schema_engine):
        for dtype, attrs in module.SCHEMAS.items():
            table[dtype] = DescSchema(
                dtype=dtype, attrs=attrs,
                user_finalizable=dtype not in schema_engine.LIBRARY_FILLED, prefix=_prefix(attrs))
            descriptor.DEFAULTS[dtype] = {n: a.default for n, a in attrs.items() if a.default is not None}
    return table


SCHEMA = _build()


def owner_prefixes(name):
    """Descriptor types whose attribute prefix ``name`` carries (longest prefix first)."""
    hits = [(len(s.prefix), d) for d, s in SCHEMA.items() if A(name).name.startswith(s.prefix)]
    return [d for _, d in sorted(hits, reverse=True)]
