"""Finalize of CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, and :func:`device_context`, how ENGINE, ENGINEHEUR
and EXECUTION_PLAN descriptors use one.

A DEVICEPROP holds the properties of one device, which the engine layer's cost model and support checks
read (``BuildContext.device``): the SM count, compute capability, shared memory, bandwidth and peaks.
Finalize takes them from JSON_REPRESENTATION when that is set (the properties of a device that need not be
present: deviceless, ahead-of-time planning), else reads the device of HANDLE (or the current device,
DEVICE_ID) and fills JSON_REPRESENTATION with them, so Get returns a document a later DEVICEPROP can be
made from. Only the current device can be read: another DEVICE_ID is NOT_SUPPORTED (serialize that
device's properties on it instead), a negative one BAD_PARAM.
"""
import dataclasses
import json

from ...errors import CudnnError
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendAttributeType_t as T
from ...types import cudnnBackendDescriptorType_t as D
from .. import engine_bridge as bridge
from ..report import bad, unsupported
from ..values import to_handle

JSON_ATTR = A.CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION


def _current_device_id(handle):
    if handle is not None:
        return int(getattr(handle, "device_id", 0))
    from ...handle import device_info
    try:
        return int(device_info()["device_id"])
    except CudnnError:
        return 0


def _from_json(d, text, base):
    """The properties a JSON document describes (every field of ``base``'s type), or BAD_PARAM."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        bad(d, JSON_ATTR, f"not valid JSON: {e}")
    if not isinstance(doc, dict):
        bad(d, JSON_ATTR, "a JSON object of device properties is expected")
    fields = {f.name: f for f in dataclasses.fields(base)}
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        bad(d, JSON_ATTR, f"unknown device properties {unknown}")
    missing = sorted(n for n in fields if n not in doc and n != "nominal")
    if missing:
        bad(d, JSON_ATTR, f"missing device properties {missing}")
    values = {}
    for name, v in doc.items():
        ref = getattr(base, name)
        if name == "cc":
            ok = isinstance(v, list) and len(v) == 2 and all(isinstance(c, int) and c >= 0 for c in v)
            v = tuple(v) if ok else v
        elif isinstance(ref, bool):
            ok = isinstance(v, bool)
        elif isinstance(ref, str):
            ok = isinstance(v, str)
        else:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
            v = type(ref)(v) if ok else v
        if not ok:
            bad(d, JSON_ATTR, f"{name}: {v!r} is not a valid value (like {ref!r})")
        values[name] = v
    return dataclasses.replace(base, **values)


def to_json(props):
    doc = dataclasses.asdict(props)
    doc["cc"] = list(props.cc)
    return json.dumps(doc, sort_keys=True)


def finalize_deviceprop(d):
    handle = d.value(A.CUDNN_ATTR_DEVICEPROP_HANDLE)
    if handle is not None:
        try:
            to_handle(handle)
        except CudnnError as e:
            bad(d, A.CUDNN_ATTR_DEVICEPROP_HANDLE, f"not a valid cuDNN handle: {e.message}")
    base = bridge.context(handle).device
    text = d.value(JSON_ATTR)
    if text:
        props = _from_json(d, text, base)
    else:
        dev = int(d.value(A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID))
        if dev < 0:
            bad(d, A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID, f"{dev} is not a device ordinal")
        here = _current_device_id(handle)
        if d.is_set(A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID) and dev != here:
            unsupported(d, A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID,
                        f"only the current device ({here}) can be read; set JSON_REPRESENTATION for another")
        props = base
        d.attrs[JSON_ATTR] = (T.CUDNN_TYPE_CHAR, to_json(props))
    d.state["props"] = props


def device_context(d, name, ctx):
    """``ctx`` with the device of the DEVICEPROP set as attribute ``name`` of ``d`` (unchanged if unset)."""
    prop = d.value(name)
    if prop is None:
        return ctx
    return dataclasses.replace(ctx, device=prop.state["props"])


FINALIZERS = {D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR: finalize_deviceprop}
