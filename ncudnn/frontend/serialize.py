"""``serialize()`` / ``deserialize()`` of a pygraph: the graph as the user built it (tensors, op calls
with their arguments) plus the selected plan's engine config, as JSON.

Deserializing replays the op calls through the same pygraph methods, restores names, uids and the
attributes the user set, validates, and builds the recorded engine config directly (no heuristics).
A different schema version raises SERIALIZATION_VERSION_MISMATCH; a blob that is not a well-formed
graph of this schema (bad UTF-8 or JSON, missing or mistyped fields, an op kind that is not one of
pygraph's op methods, nesting past the parser's depth) raises cudnnGraphBadParamError (BAD_PARAM).
"""
import json

from ..errors import CudnnError
from ..types import cudnnStatus_t
from .errors import graph_error
from .tensor import USER_DIMS, USER_DTYPE, USER_STRIDES, USER_UID

S = cudnnStatus_t
SCHEMA, VERSION = "ncudnn.frontend.pygraph", 1


def _tensor_row(t):
    d = t.desc
    return {"uid": d.uid, "name": d.name, "dims": list(d.dims) if d.meta.get(USER_DIMS) else None,
            "strides": list(d.strides) if d.meta.get(USER_STRIDES) else None,
            "dtype": int(d.dtype) if d.meta.get(USER_DTYPE) and d.dtype is not None else None,
            "virtual": d.is_virtual, "by_value": d.is_by_value,
            "value": d.value.item() if hasattr(d.value, "item") else d.value,
            "user_uid": bool(d.meta.get(USER_UID)), "hidden": bool(d.meta.get("hidden")),
            "scalar_type": d.meta.get("scalar_type"),
            "alignment": d.alignment, "vector": [d.vector_count, d.vectorized_dim]}


def _set_layout(t, r):
    """The row's byte alignment and vector layout on tensor ``t`` (blobs written before they were kept
    have neither: the defaults stay)."""
    if r.get("alignment") is not None:
        t.set_alignment(r["alignment"])
    if r.get("vector") is not None:
        t.set_vector_count_and_dimension(*r["vector"])


def _uids(v):
    if isinstance(v, list):
        return [x.get_uid() for x in v]
    return v.get_uid() if v is not None else None


def _param(v):
    if isinstance(v, slice):
        return {"slice": [v.start, v.stop, v.step]}
    if isinstance(v, (list, tuple)):
        return [_param(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (int, float, bool, str)):
        return v.item()
    return int(v) if hasattr(v, "__index__") and not isinstance(v, bool) else v


def _unparam(v):
    if isinstance(v, dict) and set(v) == {"slice"}:
        return slice(*v["slice"])
    if isinstance(v, list):
        return [_unparam(x) for x in v]
    return v


class SerializeMixin:
    def to_json(self):
        """The graph and its selected plan as a JSON-able dict."""
        c = self._context
        plan = None
        if self._selected is not None:
            plan = self._candidates[self._selected].to_json()
        return {
            "schema": SCHEMA, "version": VERSION, "name": self.name,
            "context": [None if x is None else int(x) for x in (c.io_data_type, c.intermediate_data_type,
                                                                c.compute_data_type)],
            "dynamic_shapes": self.is_dynamic_shape_enabled,
            "tensors": [_tensor_row(t) for t in self._tensors],
            "ops": [{"kind": r.kind, "name": r.name, "tensors": {p: _uids(v) for p, v in r.tensors.items()},
                     "params": {k: _param(v) for k, v in r.params.items()},
                     "compute": None if r.compute_data_type is None else int(r.compute_data_type),
                     "outputs": [_uids(t) for t in r.outputs]} for r in self._records],
            "plan": plan,
        }

    def serialize(self, as_bytes=False, include_kernels=True):
        """The graph and its built plan as bytes (a list of ints, as the frontend returns, unless
        ``as_bytes``). Kernels are not embedded: they are compiled again (or taken from the kernel cache)."""
        blob = json.dumps(self.to_json(), allow_nan=True).encode()
        return blob if as_bytes else list(blob)

    def deserialize(self, *args, **kwargs):
        """``deserialize([handle,] data)``: rebuild this graph from ``serialize()`` output and build its plan."""
        data = kwargs.pop("data", None)
        handle = kwargs.pop("handle", None)
        rest = list(args)
        if data is None:
            data = rest.pop()
        if rest:
            handle = rest[0]
        if handle is not None:
            self.handle = handle
        try:
            d = _parse(data)
            if d.get("schema") != SCHEMA or d.get("version") != VERSION:
                raise graph_error(S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH,
                                  f"serialized graph is {d.get('schema')!r:.60} v{d.get('version')!r:.20}, this "
                                  f"ncudnn reads {SCHEMA} v{VERSION}")
            if "plan" not in d:   # serialize() always writes it (null before a plan is built)
                raise KeyError("plan")
            self._replay(d)
            self.validate()
            self.build_operation_graph()
        except CudnnError:
            raise
        except Exception as e:   # a malformed blob, whatever the parser or the replay tripped on
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"deserialize: malformed graph blob "
                              f"({type(e).__name__}: {str(e)[:200]})") from None
        if d.get("plan") is not None:
            from ..engines import api

            try:
                if not isinstance(d["plan"], dict) or not {"engine", "config"} <= set(d["plan"]):
                    raise KeyError("the plan record needs 'engine' and 'config'")   # to_json writes both
                ec = api.engine_config_from_json(d["plan"], self._ir, self._ctx())
            except Exception as e:   # the blob's plan record is data: one this ncudnn cannot read is BAD_PARAM
                raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"deserialize: malformed plan "
                                  f"({type(e).__name__}: {str(e)[:200]})") from None
            self._reset_plans()
            self._op_graph_built = self._planned = True
            self._candidates = [ec]
            self.check_support()
            self.build_plans()

    def _replay(self, d):
        from ..types import cudnnDataType_t as DT

        kinds = _op_kinds(type(self))
        for op in d["ops"]:
            if op["kind"] not in kinds:
                raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"deserialize: op kind {op['kind']!r:.60} is not a "
                                  "pygraph op")

        ctx = d["context"]
        self.name = d["name"]
        self.is_dynamic_shape_enabled = bool(d.get("dynamic_shapes")) or self.kernel_cache is not None
        self._context.io_data_type, self._context.intermediate_data_type, self._context.compute_data_type = \
            [None if x is None else DT(x) for x in ctx]
        self._tensors, self._by_uid, self._records, self._bindings, self._views = [], {}, [], {}, {}
        self._node_count, self._next_uid = {}, 1
        rows = {r["uid"]: r for r in d["tensors"]}
        produced = {u for op in d["ops"] for u in op["outputs"] if u is not None}
        for r in d["tensors"]:
            if r["uid"] in produced or r["hidden"]:
                continue
            t = self._new_tensor(dims=r["dims"], strides=r["strides"], dtype=r["dtype"], is_virtual=r["virtual"],
                                 is_by_value=r["by_value"], name=r["name"], uid=r["uid"], value=r["value"])
            if r["value"] is not None and r["dtype"] is not None:
                from .values import np_scalar

                t.desc.value = np_scalar(r["value"], r["dtype"])
            t.desc.meta[USER_UID] = r["user_uid"]
            if r.get("scalar_type") is not None:
                t.desc.meta["scalar_type"] = r["scalar_type"]
            _set_layout(t, r)
        for op in d["ops"]:
            kw = {p: ([self._by_uid[u] for u in v] if isinstance(v, list) else
                      (self._by_uid[v] if v is not None else None)) for p, v in op["tensors"].items()}
            kw.update({k: _unparam(v) for k, v in op["params"].items()})
            if op["kind"] == "sdpa" or op["kind"] == "sdpa_backward":
                kw = _sdpa_kwargs(kw)
            out = getattr(self, op["kind"])(name=op["name"], compute_data_type=op["compute"], **kw)
            outs = out if isinstance(out, list) else [out]
            for t, uid in zip(outs, op["outputs"]):
                if t is None or uid is None:
                    continue
                r = rows[uid]
                self._reuid(t, uid)
                t.desc.meta[USER_UID] = r["user_uid"]
                t.desc.name = r["name"]
                t.desc.is_virtual = r["virtual"]
                if r["dims"] is not None:
                    t.set_dim(r["dims"])
                if r["strides"] is not None:
                    t.set_stride(r["strides"])
                if r["dtype"] is not None:
                    t.set_data_type(DT(r["dtype"]))
                _set_layout(t, r)


def _parse(data):
    """The blob's JSON object (bytes, a list of byte values, or text)."""
    if isinstance(data, (list, tuple)):
        data = bytes(data)
    d = json.loads(data.decode() if isinstance(data, (bytes, bytearray)) else data)
    if not isinstance(d, dict):
        raise TypeError(f"the blob holds a {type(d).__name__}, not a graph object")
    return d


_KINDS = {}


def _op_kinds(cls):
    """The op kinds a blob may name: pygraph's public op methods (those of its ``ops_*`` mixins), never
    any other attribute of the graph."""
    kinds = _KINDS.get(cls)
    if kinds is None:
        kinds = _KINDS[cls] = frozenset(n for c in cls.__mro__ if c.__module__.startswith("ncudnn.frontend.ops_")
                                        for n, v in vars(c).items() if callable(v) and not n.startswith("_"))
    return kinds


def _sdpa_kwargs(kw):
    """sdpa's recorded form back to call arguments (dropout was split into probability, seed, offset)."""
    if "dropout_probability" in kw:
        kw["dropout"] = (kw.pop("dropout_probability"), kw.pop("seed", None), kw.pop("offset", None))
    return kw
