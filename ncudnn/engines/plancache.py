"""Plan cache: built ExecutionPlans keyed by (graph, engine config), per handle or per process.

The key also holds the build context's flags (device, TF32 / tensor-core permission, determinism).
The graph part of the key is the full graph key (dims and strides included: a plan is built for
shapes) plus the tensor uids and by-value scalar values (the graph key numbers tensors by first use,
so two graphs with different uids share a key but not a plan).
"""
import threading
from collections import OrderedDict

#: plans kept per cache
CAPACITY = 256


class LRU:
    def __init__(self, capacity=CAPACITY):
        self.capacity = capacity
        self._d = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key):
        with self._lock:
            v = self._d.get(key)
            if v is None:
                self.misses += 1
                return None
            self._d.move_to_end(key)
            self.hits += 1
            return v

    def put(self, key, value):
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.capacity:
                self._d.popitem(last=False)

    def clear(self):
        with self._lock:
            self._d.clear()

    def __len__(self):
        return len(self._d)


_process_cache = LRU()


def cache_for(handle):
    """The plan LRU of ``handle`` (kept in ``handle.caches["plans"]``), or the process-wide one."""
    caches = getattr(handle, "caches", None)
    if caches is None:
        return _process_cache
    c = caches.get("plans")
    if c is None:
        c = caches["plans"] = LRU()
    return c


def graph_identity(graph):
    """The graph part of a plan key (cached on the finalized graph)."""
    info = graph.__dict__.get("_plan_identity")
    if info is None:
        tensors = graph.tensors()
        uids = tuple(t.uid for n in graph.nodes for table in (n.inputs, n.outputs)
                     for _, t in sorted(table.items()))
        scalars = tuple((u, _hashable(t.value)) for u, t in sorted(tensors.items()) if t.is_by_value)
        info = graph.__dict__["_plan_identity"] = (graph.key(dynamic=False), uids, scalars)
    return info


def graph_key(graph):
    """The graph's key without its uids and scalars (what autotuning records and serialized plans name)."""
    return graph_identity(graph)[0]


def _hashable(v):
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def plan_key(graph, engine_config, flags=None):
    """``flags``: the build context's math / determinism switches (engines may build differently)."""
    return graph_identity(graph) + (engine_config.ident(), flags)
