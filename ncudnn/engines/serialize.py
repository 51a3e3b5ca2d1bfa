"""Plans and graphs as JSON: engine names, knobs, and the graph itself (nodes, attributes, tensors),
under a schema version. Loading (:func:`read_plan`) rebuilds and finalizes the graph and checks its key;
``ncudnn.engines.api.plan_from_json`` then builds the plan with the recorded configs (no heuristics run).
A different schema -> SERIALIZATION_VERSION_MISMATCH.
"""
import json
import math

from ..errors import CudnnError
from ..ir import NODE_TYPES, OpGraph, TensorDesc
from ..types import cudnnStatus_t
from ..version import CUDNN_VERSION, __version__
from .plancache import graph_key

S = cudnnStatus_t
SCHEMA = "ncudnn.plan"
SCHEMA_VERSION = 1


# ------------------------------------------------------------------------------------ values

def _enc(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": repr(v)}
    if isinstance(v, (list, tuple)):
        return [_enc(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (int, float, bool, str)):  # NumPy scalar
        return _enc(v.item())
    if hasattr(v, "__index__") and not isinstance(v, bool):
        return int(v)
    return v


def _dec(v):
    if isinstance(v, dict) and set(v) == {"float"}:
        return float(v["float"])
    if isinstance(v, list):
        return tuple(_dec(x) for x in v)
    return v


# ------------------------------------------------------------------------------------ graphs

def tensor_to_json(t):
    return {"uid": t.uid, "name": t.name, "dims": t.dims and list(t.dims), "strides": t.strides and list(t.strides),
            "dtype": None if t.dtype is None else int(t.dtype), "alignment": t.alignment,
            "virtual": t.is_virtual, "by_value": t.is_by_value, "value": _enc(t.value),
            "vector_count": t.vector_count, "vectorized_dim": t.vectorized_dim, "reordering": int(t.reordering),
            "ragged_offset": None if t.ragged_offset is None else tensor_to_json(t.ragged_offset)}


def tensor_from_json(d):
    return TensorDesc(uid=d["uid"], name=d.get("name", ""), dims=d["dims"], strides=d["strides"], dtype=d["dtype"],
                      alignment=d["alignment"], is_virtual=d["virtual"], is_by_value=d["by_value"],
                      value=_dec(d["value"]), vector_count=d["vector_count"],
                      vectorized_dim=d["vectorized_dim"], reordering=d["reordering"],
                      ragged_offset=None if d["ragged_offset"] is None else tensor_from_json(d["ragged_offset"]))


def graph_to_json(graph):
    tensors = graph.tensors()
    nodes = []
    for n in graph.nodes:
        nodes.append({"op": n.OP, "name": n.name,
                      "compute_dtype": None if n.compute_dtype is None else int(n.compute_dtype),
                      "attrs": {k: _enc(v) for k, v in n.attributes().items()},
                      "inputs": {p: t.uid for p, t in n.inputs.items()},
                      "outputs": {p: t.uid for p, t in n.outputs.items()}})
    c = graph.ctx
    return {"name": graph.name, "dynamic_shapes": graph.dynamic_shapes,
            "io_dtype": None if c.io_dtype is None else int(c.io_dtype),
            "intermediate_dtype": None if c.intermediate_dtype is None else int(c.intermediate_dtype),
            "compute_dtype": None if c.compute_dtype is None else int(c.compute_dtype),
            "tensors": [tensor_to_json(t) for _, t in sorted(tensors.items())], "nodes": nodes}


def graph_from_json(d):
    """A finalized OpGraph from :func:`graph_to_json` output."""
    try:
        tensors = {t["uid"]: tensor_from_json(t) for t in d["tensors"]}
        nodes = []
        for nd in d["nodes"]:
            cls = NODE_TYPES[nd["op"]]
            attrs = {k: _dec(v) for k, v in nd["attrs"].items() if v is not None}
            nodes.append(cls(name=nd["name"], inputs={p: tensors[u] for p, u in nd["inputs"].items()},
                             outputs={p: tensors[u] for p, u in nd["outputs"].items()},
                             compute_dtype=nd.get("compute_dtype"), **attrs))
        g = OpGraph(nodes, io_dtype=d.get("io_dtype"), intermediate_dtype=d.get("intermediate_dtype"),
                    compute_dtype=d.get("compute_dtype"), name=d.get("name", ""),
                    dynamic_shapes=d.get("dynamic_shapes", False))
    except (KeyError, TypeError, ValueError) as e:
        raise CudnnError(f"malformed graph JSON: {type(e).__name__}: {e}", S.CUDNN_STATUS_BAD_PARAM) from None
    return g.finalize()


# ------------------------------------------------------------------------------------- plans

def plan_to_json(plan):
    """JSON text of a built plan: schema, versions, the graph, its key and the engine config."""
    ec = plan.engine_config
    if ec is None:
        raise CudnnError("plan was not built by build_plan: no engine config to serialize", S.CUDNN_STATUS_BAD_PARAM)
    return json.dumps({"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "ncudnn": __version__,
                       "cudnn_version": CUDNN_VERSION, "graph_key": graph_key(plan.graph),
                       "engine_config": ec.to_json(), "workspace_size": plan.workspace_size,
                       "graph": graph_to_json(plan.graph)}, sort_keys=True)


def read_plan(text):
    """(graph, document) of :func:`plan_to_json` text: the parsed JSON (``engine_config``, ``workspace_size``)
    and its graph rebuilt and finalized, the schema and the graph key checked (building the plan is
    ``ncudnn.engines.api.plan_from_json``)."""
    try:
        d = json.loads(text) if isinstance(text, (str, bytes, bytearray)) else dict(text)
    except ValueError as e:
        raise CudnnError(f"plan JSON does not parse: {e}", S.CUDNN_STATUS_BAD_PARAM) from None
    if d.get("schema") != SCHEMA or d.get("schema_version") != SCHEMA_VERSION:
        raise CudnnError(f"plan schema {d.get('schema')!r} version {d.get('schema_version')!r}; this ncudnn "
                         f"reads {SCHEMA!r} version {SCHEMA_VERSION}", S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    graph = graph_from_json(d["graph"])
    if d.get("graph_key") and graph_key(graph) != d["graph_key"]:
        raise CudnnError("the rebuilt graph's key differs from the recorded one (the IR changed meaning)",
                         S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    return graph, d
