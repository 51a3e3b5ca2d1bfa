"""The op graph: nodes joined by tensors (by uid). ``finalize`` runs the checks of an
OPERATIONGRAPH finalize: topological order, dangling / unused tensors, and each node's lifecycle."""
import hashlib
import json
from collections import defaultdict

from ..errors import CudnnError
from ..types import cudnnStatus_t
from .node import GraphContext
from .tensor import overlap

S = cudnnStatus_t


class OpGraph:
    def __init__(self, nodes=(), io_dtype=None, intermediate_dtype=None, compute_dtype=None, name="",
                 dynamic_shapes=False):
        self.nodes = list(nodes)
        self.ctx = GraphContext(io_dtype, intermediate_dtype, compute_dtype)
        self.name = name
        self.dynamic_shapes = dynamic_shapes
        self.finalized = False

    def add(self, node):
        if self.finalized:
            raise CudnnError("graph is finalized: no nodes can be added", S.CUDNN_STATUS_BAD_PARAM)
        self.nodes.append(node)
        return node

    # ------------------------------------------------------------------ structure
    def tensors(self):
        """uid -> TensorDesc over all nodes; the same uid must be the same descriptor object."""
        out = {}
        for node in self.nodes:
            for t in node.tensors():
                prev = out.get(t.uid)
                if prev is not None and prev is not t and not _same_tensor(prev, t):
                    raise CudnnError(f"uid {t.uid} names two different tensors ({node.name!r})",
                                     S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
                out.setdefault(t.uid, t)
        return out

    def producers(self):
        prod = {}
        for node in self.nodes:
            for port, t in node.outputs.items():
                if t.uid in prod:
                    raise CudnnError(f"tensor uid {t.uid} is written by both '{prod[t.uid].name}' and "
                                     f"'{node.name}'", S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
                prod[t.uid] = node
        return prod

    def consumers(self):
        cons = defaultdict(list)
        for node in self.nodes:
            for t in node.inputs.values():
                cons[t.uid].append(node)
        return cons

    def topo_order(self):
        """Kahn's algorithm, ties broken by insertion order (stable keys); cycles -> BAD_PARAM."""
        prod = self.producers()
        index = {id(n): i for i, n in enumerate(self.nodes)}
        deps = {id(n): {id(prod[t.uid]) for t in n.inputs.values() if t.uid in prod} for n in self.nodes}
        done, order = set(), []
        while len(order) < len(self.nodes):
            ready = [n for n in self.nodes if id(n) not in done and deps[id(n)] <= done]
            if not ready:
                stuck = [n.name for n in self.nodes if id(n) not in done]
                raise CudnnError(f"the graph has a cycle through {stuck}", S.CUDNN_STATUS_BAD_PARAM)
            n = min(ready, key=lambda m: index[id(m)])
            done.add(id(n))
            order.append(n)
        return order

    # ------------------------------------------------------------------ finalize
    def finalize(self):
        if not self.nodes:
            raise CudnnError("operation graph has no operations", S.CUDNN_STATUS_BAD_PARAM)
        names = [n.name for n in self.nodes]
        dup = {x for x in names if names.count(x) > 1}
        for n in self.nodes:  # give repeated default names a suffix so messages stay unambiguous
            if n.name in dup:
                n.name = f"{n.name}#{self.nodes.index(n)}"
        self.tensors()
        order = self.topo_order()
        prod, cons = self.producers(), self.consumers()
        for node in order:
            for port, t in node.inputs.items():
                if t.is_virtual and t.uid not in prod:
                    raise CudnnError(f"node '{node.name}' ({node.OP}): {port}: virtual {t.label} is read "
                                     "but no operation writes it", S.CUDNN_STATUS_BAD_PARAM)
        for node in order:
            for port, t in node.outputs.items():
                if t.is_virtual and not cons.get(t.uid):
                    raise CudnnError(f"node '{node.name}' ({node.OP}): {port}: virtual {t.label} is written "
                                     "but never read (dangling)", S.CUDNN_STATUS_BAD_PARAM)
        for t in self.tensors().values():
            t.validate()
        for node in order:
            node.run_lifecycle(self.ctx)
        for node in order:
            for port, t in node.outputs.items():
                why = None if t.is_virtual or t.is_by_value or not t.dims or not t.strides else \
                    overlap(t.dims, t.strides)
                if why:
                    raise CudnnError(f"node '{node.name}' ({node.OP}): {port}: output {t.label} dims "
                                     f"{list(t.dims)} strides {list(t.strides)} overlap ({why}): two results "
                                     "would be written to one element", S.CUDNN_STATUS_BAD_PARAM)
        self.nodes = order
        self.finalized = True
        return self

    # ------------------------------------------------------------------ keys
    def key(self, dynamic=None):
        """A stable hash of the graph (ops, attributes, tensor signatures, wiring by relative uid).
        With dynamic shapes on, dims and strides are left out (rank and layout order stay)."""
        dynamic = self.dynamic_shapes if dynamic is None else dynamic
        uid_rank = {}
        parts = []
        for node in self.nodes:
            ports = []
            for kind, table in (("in", node.inputs), ("out", node.outputs)):
                for port in sorted(table):
                    t = table[port]
                    rid = uid_rank.setdefault(t.uid, len(uid_rank))
                    ports.append((kind, port, rid, t.signature(dynamic)))
            parts.append((node.OP, _jsonable(node.attributes()), ports))
        blob = json.dumps(parts, sort_keys=True, default=str)
        return hashlib.sha1(blob.encode()).hexdigest()

    def __repr__(self):
        return f"<OpGraph {self.name!r} {[n.name for n in self.nodes]}>"


def _same_tensor(a, b):
    return (a.dims, a.strides, a.dtype, a.is_virtual, a.is_by_value) == (b.dims, b.strides, b.dtype,
                                                                         b.is_virtual, b.is_by_value)


def _jsonable(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, float) and v != v:
            v = "nan"
        elif isinstance(v, float) and v in (float("inf"), float("-inf")):
            v = str(v)
        out[k] = v
    return out
