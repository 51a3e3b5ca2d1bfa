"""``cudnn.kernel_cache``: the dynamic-shape kernel cache of cudnn-frontend, persisted across processes.

In cuDNN a kernel cache, given to ``pygraph(kernel_cache=...)``, keeps the kernels plans were built with,
so a graph of the same structure at other shapes builds a plan without compiling again; ``serialize()``
writes it as a JSON string and ``deserialize()`` reads that string into a fresh cache (one already used
or already loaded refuses, BAD_PARAM). As in cudnn-frontend, a graph given a kernel cache has dynamic
shapes turned on.

Here compiled kernels are kept by the engine layer's own kernel cache (in memory, and on a GPU as cubins
under ``$NCUDNN_CACHE_DIR``, keyed by the kernel's specification, so any process that builds the same engine
config finds them). What this object adds is the choice: per graph structure (the IR's key with dims and
strides left out) the engine configs the graph's plans were built with, most recent first. A graph built
with the cache puts the recorded config first among its candidates when the heuristics offer that engine
and the config supports the new shapes, so the plan reuses the kernels the recorded one compiled wherever
they do not specialize on the shapes (a pointwise kernel, for one, specializes on the vector width the
element count allows); otherwise the heuristics' order stands. The serialized form holds those records
(engine names and knob values), not code: a record this ncudnn cannot rebuild (an engine renamed, a knob
gone) is skipped, never an error.
"""
import json
import threading
from collections import OrderedDict

from ..types import cudnnStatus_t
from .errors import graph_error

S = cudnnStatus_t
SCHEMA, VERSION = "ncudnn.frontend.kernel_cache", 1
#: configs kept per graph structure (the most recent ones)
KEPT_PER_GRAPH = 8


class kernel_cache:
    """A kernel cache from :func:`ncudnn.create_kernel_cache` (cudnn-frontend's ``cudnn.kernel_cache``)."""

    def __init__(self):
        self._entries = OrderedDict()   # structure key -> [engine-config dicts], most recent first
        self._initialized = False       # used by a graph or loaded: deserialize refuses, as cuDNN's does
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the frontend's two methods
    def serialize(self):
        """The cache as a JSON string (the format cudnn-frontend's ``serialize`` returns: text)."""
        with self._lock:
            rows = [{"graph": k, "configs": list(v)} for k, v in self._entries.items()]
        return json.dumps({"schema": SCHEMA, "version": VERSION, "entries": rows}, sort_keys=True)

    def deserialize(self, text):
        """Load ``serialize()`` output into this cache, which must be fresh: one a graph has used or one
        already loaded raises BAD_PARAM; text that is not a cache of this schema raises BAD_PARAM (another
        schema version: SERIALIZATION_VERSION_MISMATCH)."""
        entries = _parse(text)
        with self._lock:
            if self._initialized:
                raise graph_error(S.CUDNN_STATUS_BAD_PARAM, "kernel_cache.deserialize: the kernel cache is "
                                  "already initialized (used by a graph or loaded before); deserialize into "
                                  "a fresh create_kernel_cache()")
            self._entries = entries
            self._initialized = True

    # ------------------------------------------------------------------ what pygraph calls
    def _attach(self):
        """A graph uses the cache (its build_operation_graph): from now on deserialize refuses."""
        self._initialized = True

    def _record(self, ir, engine_config):
        """Remember that a plan of ``ir``'s structure was built with ``engine_config``."""
        key, d = ir.key(dynamic=True), engine_config.to_json()
        with self._lock:
            self._initialized = True
            rows = [r for r in self._entries.pop(key, []) if r != d]
            self._entries[key] = ([d] + rows)[:KEPT_PER_GRAPH]

    def _configs(self, ir):
        """The engine-config dicts recorded for ``ir``'s structure, most recent first."""
        with self._lock:
            return list(self._entries.get(ir.key(dynamic=True), ()))

    # ------------------------------------------------------------------ inspection
    def __len__(self):
        with self._lock:
            return sum(len(v) for v in self._entries.values())

    def __repr__(self):
        return f"<kernel_cache: {len(self._entries)} graph structure(s), {len(self)} engine config(s)>"


def _parse(text):
    """{structure key: [config dicts]} of serialized text, checked field by field."""
    def bad(why):
        return graph_error(S.CUDNN_STATUS_BAD_PARAM, f"kernel_cache.deserialize: {why}")

    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode()
        except UnicodeDecodeError:
            raise bad("the data is not UTF-8 text") from None
    if not isinstance(text, str):
        raise bad(f"expected the string serialize() returned, got {type(text).__name__}")
    try:
        d = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise bad(f"not JSON ({type(e).__name__}: {str(e)[:120]})") from None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise bad(f"not a serialized kernel cache (schema {d.get('schema') if isinstance(d, dict) else None!r:.60})")
    if d.get("version") != VERSION:
        raise graph_error(S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH,
                          f"kernel_cache.deserialize: the cache is {SCHEMA} v{d.get('version')!r:.20}, this "
                          f"ncudnn reads v{VERSION}")
    rows = d.get("entries")
    if not isinstance(rows, list):
        raise bad("'entries' is not a list")
    out = OrderedDict()
    for i, r in enumerate(rows):
        if not (isinstance(r, dict) and isinstance(r.get("graph"), str) and isinstance(r.get("configs"), list)
                and all(isinstance(c, dict) and isinstance(c.get("engine"), str) for c in r["configs"])):
            raise bad(f"entry {i} is not {{'graph': str, 'configs': [{{'engine': str, ...}}]}}")
        out[r["graph"]] = list(r["configs"])[:KEPT_PER_GRAPH]
    return out
