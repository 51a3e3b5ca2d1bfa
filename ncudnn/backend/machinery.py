"""The generic Create / Set / Get / Finalize semantics, driven by the schema (``schema.SCHEMA``).

Everything here raises ``CudnnError`` subclasses; ``api.py`` turns them into ``(status, ...)``.
Statuses:
  * unknown attribute name, or one of another descriptor type ........ BAD_PARAM
  * an attribute of this descriptor that ncudnn does not implement .... NOT_SUPPORTED
  * attribute type not accepted by the attribute ...................... BAD_PARAM_ATTRIBUTE_TYPE
  * element count outside the attribute's rule, bad element value ...... BAD_PARAM
  * descriptor element of the wrong descriptor type ................... BAD_PARAM_DESCRIPTOR_TYPE
  * Set on a finalized descriptor ..................................... NOT_INITIALIZED (as documented)
  * Set of a read-only attribute ...................................... BAD_PARAM
  * "currently not supported" placeholder attribute ................... NOT_SUPPORTED
  * Get before finalize ............................................... BAD_PARAM_NOT_FINALIZED
  * Finalize with a required attribute unset, or a referenced
    descriptor not finalized .......................................... BAD_PARAM
  * Finalize of a library-filled descriptor (knob/layout/intermediate
    info) ............................................................. NOT_SUPPORTED
"""
import numpy as np

from ..errors import error_for
from ..types import cudnnBackendAttributeName_t as A
from ..types import cudnnBackendAttributeType_t as T
from ..types import cudnnBackendDescriptorType_t as D
from ..types import cudnnStatus_t as S
from . import values as V
from .attrs import PLACEHOLDER, READONLY, REQUIRED
from .checks import FINALIZERS
from .checks.kernel_cache import is_cached
from .descriptor import BackendDescriptor
from .report import bad, fail, unsupported
from .schema import SCHEMA, owner_prefixes

SET_AFTER_FINALIZE = S.CUDNN_STATUS_NOT_INITIALIZED
GET_BEFORE_FINALIZE = S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED


def descriptor_type(value):
    try:
        return D(int(value))
    except (ValueError, TypeError):
        raise error_for(S.CUDNN_STATUS_BAD_PARAM,
                        f"{value!r} is not a cudnnBackendDescriptorType_t") from None


def create(dtype):
    dtype = descriptor_type(dtype)
    if dtype not in SCHEMA:
        unsupported(dtype, None, "this descriptor type is not supported by ncudnn")
    return BackendDescriptor(dtype)


def check_descriptor(d, what="descriptor"):
    if d is None:
        fail(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, None, None, f"{what} is NULL")
    if not isinstance(d, BackendDescriptor):
        bad(None, None, f"{what} is a {type(d).__name__}, not a cudnnBackendDescriptor_t")
    if d.destroyed:
        bad(d, None, f"{what} was destroyed")
    return d


def lookup(d, name):
    """``(attribute name, Attr)`` of ``d``, or the documented failure."""
    try:
        name = A(int(name))
    except (ValueError, TypeError):
        bad(d, None, f"{name!r} is not a cudnnBackendAttributeName_t")
    schema = SCHEMA[d.type]
    attr = schema.attrs.get(name)
    if attr is not None:
        return name, attr
    owners = owner_prefixes(name)
    if owners[:1] == [d.type]:  # this descriptor's prefix, an attribute ncudnn does not implement
        unsupported(d, name, "this attribute is not supported by ncudnn")
    where = f" (it belongs to {owners[0].name})" if owners else ""
    bad(d, name, f"not an attribute of this descriptor{where}")


def attribute_type(d, name, attr, attr_type):
    try:
        attr_type = T(int(attr_type))
    except (ValueError, TypeError):
        fail(S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, d, name,
             f"{attr_type!r} is not a cudnnBackendAttributeType_t")
    if attr_type not in attr.types:
        expected = " or ".join(t.name for t in attr.types)
        fail(S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, d, name,
             f"attribute type {attr_type.name} given, expected {expected}")
    return attr_type


def _count(d, name, count, what="elementCount"):
    if not V._is_int(count) or int(count) < 0:
        bad(d, name, f"{what} {count!r} is not a non-negative integer")
    return int(count)


def _as_list(elements):
    if isinstance(elements, (list, tuple)):
        return list(elements)
    if isinstance(elements, np.ndarray):
        return elements.reshape(-1).tolist() if elements.dtype.kind != "O" else list(elements.reshape(-1))
    return [elements]


def _convert_descriptor(d, name, attr, v):
    if not isinstance(v, BackendDescriptor):
        bad(d, name, f"element {v!r} is not a cudnnBackendDescriptor_t")
    if v.destroyed:
        bad(d, name, f"element {v!r} was destroyed")
    if attr.desc_types and v.type not in attr.desc_types:
        expected = " or ".join(t.name for t in attr.desc_types[:3])
        more = " ..." if len(attr.desc_types) > 3 else ""
        fail(S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, d, name,
             f"element is a {v.type.name}, expected {expected}{more}")
    return v


def set_attribute(d, name, attr_type, count, elements):
    check_descriptor(d)
    name, attr = lookup(d, name)
    if d.finalized:
        fail(SET_AFTER_FINALIZE, d, name, "the descriptor is already finalized")
    if attr.kind == READONLY or not SCHEMA[d.type].user_finalizable:
        bad(d, name, "read-only attribute: it cannot be set")
    attr_type = attribute_type(d, name, attr, attr_type)
    count = _count(d, name, count)
    if attr.kind == PLACEHOLDER and count:
        unsupported(d, name, "currently not supported (a documented placeholder)")
    lo, hi = attr.count
    if count < lo or (hi is not None and count > hi):
        rule = f"exactly {lo}" if lo == hi else (f"{lo} to {hi}" if hi is not None else f"at least {lo}")
        bad(d, name, f"elementCount {count} given, the attribute takes {rule} element(s)")
    if attr_type == T.CUDNN_TYPE_CHAR:
        if not isinstance(elements, str) or count not in (len(elements), len(elements) + 1):
            bad(d, name, "CUDNN_TYPE_CHAR takes a str whose length (with or without the NUL) is elementCount")
        d.attrs[name] = (attr_type, elements)
        return
    if count == 0:
        d.attrs[name] = (attr_type, [])
        return
    if elements is None and attr_type != T.CUDNN_TYPE_VOID_PTR:  # None as a pointer value is NULL
        fail(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, d, name, "arrayOfElements is NULL")
    if attr_type == T.CUDNN_TYPE_FRACTION and count == 1 and isinstance(elements, tuple) and len(elements) == 2:
        items = [elements]  # one (numerator, denominator) pair
    else:
        items = _as_list(elements)
    if len(items) < count:
        bad(d, name, f"elementCount {count} but arrayOfElements holds {len(items)} element(s)")
    converted = []
    for v in items[:count]:
        if attr_type == T.CUDNN_TYPE_BACKEND_DESCRIPTOR:
            converted.append(_convert_descriptor(d, name, attr, v))
        else:
            try:
                converted.append(V.convert(attr_type, v))
            except Exception as e:  # noqa: BLE001 - re-raised with the descriptor and attribute named
                status = getattr(e, "status", S.CUDNN_STATUS_BAD_PARAM)
                fail(status, d, name, getattr(e, "message", str(e)))
    d.attrs[name] = (attr_type, converted)


def stored(d, name, attr):
    """``(attribute type, values)`` as set, else the default, else ``(first type, [])``."""
    if name in d.attrs:
        return d.attrs[name]
    default = attr.default
    return attr.types[0], list(default) if default is not None else []


def get_attribute(d, name, attr_type, requested, elements=None):
    check_descriptor(d)
    name, attr = lookup(d, name)
    attr_type = attribute_type(d, name, attr, attr_type)
    requested = _count(d, name, requested, "requestedElementCount")
    if attr.kind == PLACEHOLDER:
        unsupported(d, name, "currently not supported (a documented placeholder)")
    if not d.finalized:
        fail(GET_BEFORE_FINALIZE, d, name, "the descriptor is not finalized")
    special = SPECIAL_GETTERS.get(name)
    if special is not None:
        return special(d, name, requested, elements)
    stype, vals = stored(d, name, attr)
    if attr_type == T.CUDNN_TYPE_CHAR:
        text = vals if isinstance(vals, str) else ""
        return len(text) + 1, text[:requested]
    if stype != attr_type:
        if T.CUDNN_TYPE_BACKEND_DESCRIPTOR in (stype, attr_type):
            fail(S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, d, name, f"the attribute holds {stype.name}")
        try:
            vals = V.recast(vals, stype, attr_type)
        except Exception as e:  # noqa: BLE001
            bad(d, name, getattr(e, "message", str(e)))
    out = list(vals[:requested])
    if attr_type == T.CUDNN_TYPE_BACKEND_DESCRIPTOR:
        out = fill_descriptors(d, name, out, elements)
    return len(vals), out


def fill_descriptors(d, name, sources, elements):
    """Copy ``sources`` into the caller's descriptors (``elements``), or into new ones."""
    if elements is None:
        targets = [BackendDescriptor(s.type) for s in sources]
    else:
        targets = _as_list(elements)
        if len(targets) < len(sources):
            bad(d, name, f"arrayOfElements holds {len(targets)} descriptor(s), {len(sources)} needed")
        targets = targets[: len(sources)]
    for src, dst in zip(sources, targets):
        check_descriptor(dst, "arrayOfElements element")
        if dst.type != src.type:
            fail(S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, d, name,
                 f"arrayOfElements holds a {dst.type.name}, a {src.type.name} is needed")
        dst.copy_from(src)
    return targets


def finalize(d):
    check_descriptor(d)
    schema = SCHEMA[d.type]
    if not schema.user_finalizable:
        unsupported(d, None, "this descriptor is filled in by the library and cannot be finalized")
    if d.finalized:
        bad(d, None, "the descriptor is already finalized")
    missing = [n.name for n, a in schema.attrs.items() if a.kind == REQUIRED and n not in d.attrs]
    if missing:
        bad(d, None, "required attribute(s) not set: " + ", ".join(missing))
    _check_references(d, d, None, set())
    d.state = {}
    finalizer = FINALIZERS.get(d.type)
    if finalizer is not None:
        try:
            finalizer(d)
        except BaseException:
            d.state = {}
            raise
    d.finalized = True


def _check_references(root, d, via, seen):
    """Every descriptor reachable from ``d``'s attributes is alive and finalized (BAD_PARAM naming
    the attribute of ``root`` it hangs from): one re-initialized or destroyed deep below counts too."""
    for n, (t, vals) in d.attrs.items():
        if t != T.CUDNN_TYPE_BACKEND_DESCRIPTOR:
            continue
        for v in vals:
            if id(v) in seen:
                continue
            seen.add(id(v))
            where = n if via is None else via
            path = "" if via is None else f" (reached through {d.type.name})"
            if v.destroyed:
                bad(root, where, f"{v.type.name} #{v.id} was destroyed{path}")
            if not v.finalized:
                bad(root, where, f"{v.type.name} #{v.id} is not finalized{path}")
            _check_references(root, v, where, seen)


def _kernel_cache_query(d, name, requested, elements):
    """IS_ENGINECFG_KERNEL_CACHED: the engine config comes in through arrayOfElements."""
    items = [] if elements is None else _as_list(elements)
    if not items:
        fail(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, d, name,
             "pass the engine config to query through arrayOfElements")
    cfg = check_descriptor(items[0], "arrayOfElements[0]")
    if cfg.type != D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
        fail(S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, d, name, f"{cfg.type.name} given, an ENGINECFG is needed")
    if not cfg.finalized:
        fail(GET_BEFORE_FINALIZE, d, name, "the engine config is not finalized")
    return (1 if is_cached(d, cfg) else 0), [cfg]


SPECIAL_GETTERS = {A.CUDNN_ATTR_KERNEL_CACHE_IS_ENGINECFG_KERNEL_CACHED: _kernel_cache_query}
