"""A graph-level execution plan: the subgraphs of a partitioned graph, each with its engine config
and built :class:`SubPlan`, run in order. Virtual tensors crossing subgraphs live in the workspace.

Workspace layout (every piece 256-byte aligned)::

    [ materialized intermediates ... | scratch shared by the sub-plans (the largest of theirs) ]

The hot path: :meth:`ExecutionPlan.execute` reads one key per external tensor of the variant pack
(the device address, with the dtype, shape and strides of a buffer that describes itself, so a new
view at a known address is checked again) and the workspace address; that tuple keys a small cache
of *bindings* — the
sub-plans' prepared ``run(stream)`` callables over checked views — so a repeated call with the same
buffers does no conversion, no descriptor check and no allocation. Bindings hold addresses, not the
buffers' owners: as in cuDNN, the caller keeps its memory alive while a plan may run on it.
"""
import copy
from collections import OrderedDict

from ..errors import BadParamError
from ..types import cudnnStatus_t
from . import buffers as B

S = cudnnStatus_t
ALIGN = 256
#: distinct buffer sets kept prepared per plan
BINDINGS_KEPT = 8


def _round_up(n, a=ALIGN):
    return (n + a - 1) // a * a


def layout(tensors, materialize, scratch_size):
    """(offsets of the materialized uids, scratch offset, total workspace bytes)."""
    offsets, off = {}, 0
    for uid in sorted(materialize):
        offsets[uid] = off
        off += _round_up(tensors[uid].nbytes_needed())
    total = off + _round_up(scratch_size) if (off or scratch_size) else 0
    return offsets, off, total


class ExecutionPlan:
    def __init__(self, graph, parts, materialize, engine_config=None):
        self.graph = graph
        self.parts = list(parts)          # SubPlan objects, in execution order
        self.materialize = sorted(materialize)
        self.engine_config = engine_config  # the api.EngineConfig it was built from (None: hand-made)
        tensors = graph.tensors()
        self.scratch_size = max([p.workspace_size for p in self.parts] + [0])
        self.offsets, self.scratch_offset, self.workspace_size = layout(tensors, self.materialize,
                                                                        self.scratch_size)
        self._tensors = tensors
        self.external_uids = tuple(sorted(uid for uid, t in tensors.items()
                                          if not t.is_virtual and not t.is_by_value))
        self.scalar_uids = tuple(sorted(uid for uid, t in tensors.items() if t.is_by_value))
        self._part_uids = [sorted({t.uid for n in p.sub.nodes for t in n.tensors()}) for p in self.parts]
        self._bindings = OrderedDict()
        self.graph_nodes = {}  # CUgraph handle -> (kernel nodes, launches) added by populate_cuda_graph

    def for_graph(self, graph):
        """This plan for ``graph``, an operation graph of the same plan key (structure and uids) that may
        name its tensors differently: a plan from the cache shares its compiled parts and bindings, but
        its buffer checks name the tensors as ``graph`` does."""
        if graph is self.graph:
            return self
        tensors = graph.tensors()
        if tensors.keys() != self._tensors.keys() or all(
                tensors[u].label == t.label for u, t in self._tensors.items()):
            return self
        plan = copy.copy(self)
        plan.graph, plan._tensors = graph, tensors
        return plan

    @property
    def engine_names(self):
        return [p.engine.name for p in self.parts]

    def describe(self):
        return "; ".join(f"{p.sub.describe()} on {p.config}" for p in self.parts)

    def check_workspace(self, workspace_nbytes):
        if self.workspace_size and workspace_nbytes < self.workspace_size:
            raise BadParamError(f"workspace of {workspace_nbytes} bytes, the plan needs {self.workspace_size}",
                                S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)

    # ------------------------------------------------------------------ hot path
    def execute(self, pack, workspace=None, stream=0):
        """Run on ``pack`` (uid -> device pointer int or array object; by-value uids -> scalars,
        defaulting to the descriptor's value) with ``workspace`` (pointer or array, or None when
        ``workspace_size`` is 0) on ``stream`` (int handle or a numba / torch / CuPy stream)."""
        keys = B.KEYS
        try:  # the hot path: one key per tensor (a raw pointer is its own key)
            key = tuple([o if type(o) is int else keys[type(o)](o)
                         for o in map(pack.__getitem__, self.external_uids)])
        except KeyError:
            key = self._slow_key(pack)
        if self.scalar_uids:
            key += tuple([pack.get(u) for u in self.scalar_uids])
        if self.workspace_size:
            key += (B.ptr_of(workspace), B.nbytes_of(workspace) if type(workspace) is not int else None)
        runs = self._bindings.get(key)
        if runs is None:
            runs = self._bind(pack, workspace, key)
        if len(runs) == 1:
            runs[0](stream)
        else:
            for run in runs:
                run(stream)

    def _slow_key(self, pack):
        missing = [u for u in self.external_uids if u not in pack]
        if missing:
            raise BadParamError(f"variant pack lacks device pointers for uids {missing}", S.CUDNN_STATUS_BAD_PARAM)
        return tuple([B.key_of(pack[u]) for u in self.external_uids])  # learns the keys of new types

    # ------------------------------------------------------------------ binding
    def views(self, pack, workspace):
        """uid -> checked DeviceView (scalars as values) for every tensor, and the scratch view."""
        views = {}
        for uid in self.external_uids:
            v = B.tensor_view(pack[uid], self._tensors[uid])
            v.owner = None  # a cached binding must not keep the caller's buffers alive
            views[uid] = v
        for uid in self.scalar_uids:
            v = pack.get(uid)
            views[uid] = self._tensors[uid].value if v is None else v
        ws = B.workspace_view(workspace, self.workspace_size)
        if ws is not None:
            ws.owner = None
        for uid in self.materialize:
            views[uid] = B.view_from_bytes(ws, self.offsets[uid], self._tensors[uid])
        scratch = B.sub_bytes(ws, self.scratch_offset, self.scratch_size) if ws is not None else None
        return views, scratch

    def _bind(self, pack, workspace, key):
        views, scratch = self.views(pack, workspace)
        runs = []
        for part, uids in zip(self.parts, self._part_uids):
            mine = {u: views[u] for u in uids if u in views}
            runs.append(part.prepare(mine, scratch if part.workspace_size else None))
        runs = tuple(runs)
        self._bindings[key] = runs
        while len(self._bindings) > BINDINGS_KEPT:
            self._bindings.popitem(last=False)
        return runs

    # ------------------------------------------------------------------ native CUDA graphs
    def launches(self, pack, workspace=None):
        """Every part's kernel launches (kernels.launch.PreparedLaunch) bound to ``pack``, in order;
        None when a part cannot give them."""
        views, scratch = self.views(pack, workspace)
        out = []
        for part, uids in zip(self.parts, self._part_uids):
            ls = part.launches({u: views[u] for u in uids if u in views}, scratch if part.workspace_size else None)
            if ls is None:
                return None
            out.extend(ls)
        return out

    def populate_cuda_graph(self, graph, pack, workspace=None, handle=None):
        """Add this plan's kernels to the CUDA graph ``graph`` (see :mod:`.cudagraph`)."""
        from . import cudagraph

        cudagraph.populate(self, graph, pack, workspace)

    def update_cuda_graph(self, graph, pack, workspace=None, handle=None):
        """Rebind the nodes :meth:`populate_cuda_graph` added to ``graph`` to a new pack."""
        from . import cudagraph

        cudagraph.update(self, graph, pack, workspace)

    def forget_bindings(self):
        """Drop prepared bindings (they keep the bound buffers' owners alive)."""
        self._bindings.clear()
