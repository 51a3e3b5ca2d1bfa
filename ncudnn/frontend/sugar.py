"""The conveniences users write around pygraph: the ``graph(handle, ...)`` context manager, the
``@jit(heur_modes=...)`` and ``@graph_cache(key_fn)`` decorators, and the :class:`Graph` wrapper, which
takes arrays (torch, CuPy, numba, ...) directly as op arguments, builds when its ``with`` block ends and
runs as a function: ``graph(x, w)`` after ``set_io_tuples`` or ``graph({"conv::image": x, ...})``.
"""
import functools
from collections import OrderedDict
from contextlib import contextmanager

from ..types import cudnnStatus_t
from .enums import data_type, heur_mode
from .errors import graph_error
from .core import pygraph
from .tensor import tensor

S = cudnnStatus_t


@contextmanager
def graph(handle, name="cudnn_graph", io_data_type=data_type.HALF, intermediate_data_type=data_type.FLOAT,
          compute_data_type=data_type.FLOAT, **graph_kwargs):
    """``with graph(handle) as (g, uids): ...``: a pygraph with the usual HALF / FLOAT / FLOAT types."""
    g = pygraph(handle=handle, name=name, io_data_type=io_data_type, intermediate_data_type=intermediate_data_type,
                compute_data_type=compute_data_type, **graph_kwargs)
    yield g, []


def jit(heur_modes=heur_mode.A, **build_kwargs):
    """Decorate a function returning ``(graph, [tensors])``: build the graph (unless already planned) and
    return ``(graph, [uids])``. Combine with :func:`graph_cache` to build once per key."""
    modes = heur_modes if isinstance(heur_modes, (list, tuple)) else [heur_modes]

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            g, tensors = fn(*args, **kwargs)
            if g.get_execution_plan_count() <= 0:
                g.build(list(modes))
            return g, [t.get_uid() for t in tensors]
        return wrapper
    return deco


def graph_cache(key_fn, maxsize=256):
    """Memoize a graph-making function by ``key_fn(*args, **kwargs)`` (oldest entry evicted first)."""
    def deco(fn):
        cache = OrderedDict()

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            key = key_fn(*args, **kwargs)
            if key in cache:
                return cache[key]
            out = fn(*args, **kwargs)
            if len(cache) >= maxsize:
                cache.popitem(last=False)
            cache[key] = out
            return out
        wrapper.cache = cache
        return wrapper
    return deco


def _alloc_like(t, like=None):
    """A device array for graph tensor ``t``: torch.empty_strided when the inputs are torch, else numba."""
    if like is not None and type(like).__module__.startswith("torch"):
        import torch

        from .enums import data_type as fe_dt

        name = {fe_dt.HALF: "float16", fe_dt.FLOAT: "float32", fe_dt.BFLOAT16: "bfloat16", fe_dt.DOUBLE: "float64",
                fe_dt.INT32: "int32", fe_dt.INT64: "int64", fe_dt.INT8: "int8", fe_dt.UINT8: "uint8",
                fe_dt.BOOLEAN: "bool"}[t.get_data_type()]
        return torch.empty_strided(t.get_dim(), t.get_stride(), dtype=getattr(torch, name), device=like.device)
    from ..ir import numpy_dtype
    from ..memory import allocate, as_view, kernel_dtype, span_bytes, to_numba

    dt = numpy_dtype(t.desc.dtype)
    view = allocate(span_bytes(t.get_dim(), t.get_stride(), dt.itemsize))
    return to_numba(as_view(view, dims=t.get_dim(), strides=t.get_stride(), dtype=dt),
                    dtype=kernel_dtype(dt))


class Graph:
    """``with Graph(io_data_type=...) as g: y = g.conv_fprop(image=x, weight=w, ...); y.set_output(True)``
    then ``g.set_io_tuples(["conv_fprop.0::image", "conv_fprop.0::weight"], [y])`` and ``out = g(x, w)``.

    Arrays passed to op methods become graph tensors (``tensor_like``) bound to those arrays; the graph is
    validated and built (heuristics [A, FALLBACK] unless ``heuristics=``) when the block exits, and its
    workspace allocated. Called with a dict, it fills missing outputs and returns the dict."""

    def __init__(self, *, handle=None, inputs=None, outputs=None, heuristics=None, workspace_alloc=True, **kwargs):
        self._kwargs = kwargs
        self._handle = handle
        self._heuristics = list(heuristics or [heur_mode.A, heur_mode.FALLBACK])
        self._workspace_alloc = workspace_alloc
        self._workspace = None
        self._g = None
        self._ins = OrderedDict()   # "<node>::<arg>" -> graph tensor read by a node
        self._outs = OrderedDict()  # output name -> graph tensor
        self._arrays = {}           # id(array) -> (array, graph tensor)
        self._io = (inputs, outputs)
        self._in_order = self._out_order = None

    @property
    def graph(self):
        return self._g

    def __enter__(self):
        if self._g is not None:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, "Graph already created")
        self._g = pygraph(handle=self._handle, **self._kwargs)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._g = None
            return False
        self._g.build(self._heuristics)
        if self._workspace_alloc:
            from ..memory import allocate

            n = self._g.get_workspace_size()
            self._workspace = allocate(n) if n else None
        if self._io[0] or self._io[1]:
            self.set_io_tuples(self._io[0] or [], self._io[1] or [])
        return False

    def __getattr__(self, name):
        if name.startswith("_") or self._g is None:
            raise AttributeError(name)
        attr = getattr(self._g, name)
        if not callable(attr) or name in ("tensor", "tensor_like", "tensor_scalar") or name.startswith("get_"):
            return attr
        if not hasattr(type(self._g), name) or name in _PIPELINE:
            return attr

        def op(*args, **kwargs):
            node = kwargs.get("name") or self._g._get_name(name, "")
            kwargs["name"] = node
            args = [self._capture(a) for a in args]
            kwargs = {k: self._capture(v) for k, v in kwargs.items()}
            for k, v in list(enumerate(args)) + list(kwargs.items()):
                for i, x in enumerate(v if isinstance(v, (list, tuple)) else [v]):
                    if isinstance(x, tensor):
                        self._ins[f"{node}::{k}" + (f"::{i}" if isinstance(v, (list, tuple)) else "")] = x
            out = attr(*args, **kwargs)
            for o in (out if isinstance(out, list) else [out]):
                if o is not None:
                    self._outs[o.get_name()] = o
            return out
        return op

    def _capture(self, v):
        if isinstance(v, tuple):
            return tuple(self._capture(x) for x in v)
        if isinstance(v, list):
            return [self._capture(x) for x in v]
        if v is None or isinstance(v, (tensor, str, bool, int, float)) or not (
                hasattr(v, "__cuda_array_interface__") or hasattr(v, "__dlpack__")):
            return v
        hit = self._arrays.get(id(v))
        if hit is None:
            t = self._g.tensor_like(v)
            hit = self._arrays[id(v)] = (v, t)
        return hit[1]

    def _find(self, key, table):
        if isinstance(key, tensor):
            return key
        if isinstance(key, str):
            if key in table:
                return table[key]
            hit = self._g.find_tensor(key)
            if hit is not None:
                return hit
        elif id(key) in self._arrays:
            return self._arrays[id(key)][1]
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"{key!r} is not a tensor of this graph")

    def set_io_tuples(self, inputs, outputs):
        """The order of the positional arguments and of the returned outputs of ``graph(...)``."""
        ins = [self._find(k, self._ins) for k in inputs]
        outs = [self._find(k, self._outs) for k in outputs]
        for t in ins:
            if t.get_is_virtual():
                raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"input '{t.get_name()}' is virtual")
        self._in_order, self._out_order = ins, outs

    def _exec(self, pack, kwargs):
        ws = kwargs.pop("workspace", self._workspace)
        if not self._workspace_alloc and "workspace" not in kwargs and ws is None and \
                self._g.get_workspace_size():
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, "workspace_alloc=False: pass workspace=")
        self._g.execute(pack, ws, **kwargs)

    def __call__(self, *args, **kwargs):
        if self._g is None or self._g.get_selected_plan_index() is None:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, "the graph is built when its `with` block exits")
        like = next((a for a in (args[0].values() if args and isinstance(args[0], dict) else args)), None)
        if len(args) == 1 and isinstance(args[0], dict):
            d = args[0]
            pack = {t: a for a, t in self._arrays.values() if not t.get_is_virtual()}
            pack.update({self._find(k, {**self._ins, **self._outs}): v for k, v in d.items()})
            for name, t in self._outs.items():
                if not t.get_is_virtual() and t not in pack:
                    pack[t] = d[name] = _alloc_like(t, like)
            self._exec(pack, kwargs)
            return d
        if self._in_order is None:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, "call set_io_tuples() before calling with positional "
                              "arguments")
        if len(args) != len(self._in_order):
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"{len(args)} arguments for {len(self._in_order)} inputs")
        pack = {t: a for a, t in self._arrays.values() if not t.get_is_virtual()}
        pack.update(zip(self._in_order, args))
        outs = [_alloc_like(t, like) for t in self._out_order]
        pack.update(zip(self._out_order, outs))
        self._exec(pack, kwargs)
        return outs[0] if len(outs) == 1 else tuple(outs)


_PIPELINE = {"validate", "build_operation_graph", "create_execution_plans", "check_support", "build_plans", "build",
             "execute", "execute_plan_at_index", "serialize", "deserialize", "autotune", "key", "select_plan",
             "build_plan_at_index", "create_execution_plan", "deselect_engines", "deselect_numeric_notes",
             "deselect_behavior_notes", "select_numeric_notes", "select_behavior_notes",
             "deselect_workspace_greater_than", "query_tensor_attributes_of_uid", "find_tensor", "lower", "to_dict",
             "to_json", "populate_cuda_graph", "update_cuda_graph"}
