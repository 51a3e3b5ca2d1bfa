"""CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION: an execution plan as JSON, and back.

The JSON holds the whole descriptor tree under the engine config (operation graph, operations,
tensors, operator descriptors, engine, knob choices), each descriptor as its type and the
attributes the user set, descriptors referenced by index. Loading replays those Set calls and
finalizes bottom-up, so a deserialized plan passes every check a hand-built one does.
"""
import json
from fractions import Fraction

from ..types import cudnnBackendAttributeName_t as A
from ..types import cudnnBackendAttributeType_t as T
from ..types import cudnnBackendDescriptorType_t as D
from ..types import cudnnStatus_t as S
from .report import fail

FORMAT = "ncudnn-execution-plan"
VERSION = 1
_SKIP_TYPES = (T.CUDNN_TYPE_HANDLE, T.CUDNN_TYPE_VOID_PTR)


def dump_plan(cfg_desc):
    from .schema import SCHEMA
    from .attrs import READONLY
    order, index = [], {}

    def visit(d):
        if id(d) in index:
            return index[id(d)]
        attrs = {}
        for name, (atype, vals) in d.attrs.items():
            if SCHEMA[d.type].attrs[name].kind == READONLY or atype in _SKIP_TYPES:
                continue
            if atype == T.CUDNN_TYPE_BACKEND_DESCRIPTOR:
                vals = [visit(v) for v in vals]
            elif atype == T.CUDNN_TYPE_FRACTION:
                vals = [[v.numerator, v.denominator] for v in vals]
            elif atype != T.CUDNN_TYPE_CHAR:
                vals = [v if isinstance(v, (bool, float)) else int(v) for v in vals]
            attrs[name.name] = [atype.name, vals]
        index[id(d)] = len(order)
        order.append({"type": d.type.name, "attrs": attrs})
        return index[id(d)]

    root = visit(cfg_desc)
    st = cfg_desc.state
    return json.dumps({"format": FORMAT, "version": VERSION, "engine": st["engine"].name,
                       "engine_global_index": st["engine"].global_index, "config": st["config"].to_json(),
                       "descriptors": order, "root": root}, sort_keys=True)


def load_plan(plan_desc, text, handle):
    """The finalized ENGINECFG descriptor rebuilt from ``text`` (BAD_PARAM when it is not ours)."""
    from . import machinery
    name = A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION
    try:
        data = json.loads(text)
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            fail(S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH, plan_desc, name,
                 f"not an {FORMAT} v{VERSION} document")
        built = []
        for entry in data["descriptors"]:
            d = machinery.create(D[entry["type"]])
            for aname, (atype, vals) in entry["attrs"].items():
                atype = T[atype]
                if atype == T.CUDNN_TYPE_BACKEND_DESCRIPTOR:
                    vals = [built[i] for i in vals]
                elif atype == T.CUDNN_TYPE_FRACTION:
                    vals = [Fraction(n, m) for n, m in vals]
                count = len(vals) if not isinstance(vals, str) else len(vals)
                machinery.set_attribute(d, A[aname], atype, count, vals)
            if d.type == D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
                machinery.set_attribute(d, A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE, T.CUDNN_TYPE_HANDLE, 1, handle)
            machinery.finalize(d)
            built.append(d)
        return built[data["root"]]
    except (KeyError, ValueError, TypeError, IndexError) as e:
        fail(S.CUDNN_STATUS_BAD_PARAM, plan_desc, name, f"malformed plan JSON ({type(e).__name__}: {e})")
