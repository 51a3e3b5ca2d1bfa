"""Autotuning: time engine configs on the user's buffers and remember the winner on disk.

Each supported config is built, run once (JIT compile and binding, excluded), warmed up, then timed
``runs`` times with CUDA events around ``execute`` on one stream; the median counts. Outputs whose
memory overlaps an input (in-place graphs) are redirected to scratch copies so repeated runs do not
feed on their own results. Under the simulator the clock is the host's wall clock, and results say so.

Results persist per (device, graph key) in ``$NCUDNN_CACHE_DIR/autotune/<device>.json`` (default
``~/.cache/ncudnn``) with a provenance header; a later process gets them from :func:`stored_results`
(heuristic mode B puts the stored winner first) and ``autotune`` reuses them when every requested
config was already timed. Measured/predicted ratios also feed the mode-B correction table.
"""
import datetime
import json
import os
import statistics
import sys
import threading
import time

from .. import memory
from ..errors import CudnnError
from ..platform import simulator_enabled
from ..types import cudnnBackendHeurMode_t, cudnnStatus_t
from . import buffers as B
from . import heuristics

S = cudnnStatus_t
HM = cudnnBackendHeurMode_t
_lock = threading.Lock()
_stores = {}  # path -> {"provenance": ..., "graphs": {...}}


class TuneResult(tuple):
    """``(engine_config, median_ms)``, with ``.clock`` ("cuda_events" | "wall_clock"), ``.times_ms``
    and ``.reused`` (True when read back from the on-disk store)."""

    def __new__(cls, ec, median_ms, clock, times_ms=(), reused=False):
        self = tuple.__new__(cls, (ec, median_ms))
        self.clock, self.times_ms, self.reused = clock, tuple(times_ms), reused
        return self

    @property
    def engine_config(self):
        return self[0]

    @property
    def median_ms(self):
        return self[1]


# ----------------------------------------------------------------------------- the store

def provenance(device):
    import numba

    from ..version import __version__

    return {"device": device.name, "device_slug": device.slug, "cc": list(device.cc),
            "nominal_device": device.nominal, "simulator": simulator_enabled(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "ncudnn": __version__, "numba": numba.__version__, "command": " ".join(sys.argv)[:200]}


def _store_path(device):
    return heuristics.cache_dir() / "autotune" / f"{device.slug}.json"


def _store(device):
    path = _store_path(device)
    with _lock:
        s = _stores.get(path)
        if s is None:
            try:
                s = json.loads(path.read_text())
                s.setdefault("graphs", {})
            except (OSError, ValueError):
                s = {"graphs": {}}
            _stores[path] = s
        return path, s


def stored_results(graph, ctx):
    """Rows ``{"config": EngineConfig JSON, "median_ms", "clock"}`` stored for this graph on this
    device, winner first; None when the graph was never tuned here."""
    from .api import _graph_key, context

    ctx = context(ctx)
    _, s = _store(ctx.device)
    entry = s["graphs"].get(_graph_key(graph))
    return entry["results"] if entry else None


def _save(device, graph_key, rows):
    path, s = _store(device)
    with _lock:
        s["provenance"] = provenance(device)
        s["graphs"][graph_key] = {"date": s["provenance"]["date"], "results": rows}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(s, indent=1, sort_keys=True))
        os.replace(tmp, path)
    heuristics.bump()


def forget_stores():
    """Drop the loaded stores (tests; after NCUDNN_CACHE_DIR changes)."""
    with _lock:
        _stores.clear()
    heuristics.bump()


# ----------------------------------------------------------------------------- timing

class _Progress:
    """A one-line progress bar on a terminal once tuning has taken more than a second."""

    def __init__(self, total):
        self.total, self.t0, self.shown = total, time.perf_counter(), False
        self.tty = sys.stderr.isatty()

    def update(self, i, label):
        if not self.tty or time.perf_counter() - self.t0 < 1.0:
            return
        self.shown = True
        done = int(20 * i / max(self.total, 1))
        sys.stderr.write(f"\rncudnn autotune [{'#' * done}{'.' * (20 - done)}] {i}/{self.total} {label[:40]:40s}")
        sys.stderr.flush()

    def close(self):
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _scratch_outputs(graph, pack):
    """A copy of ``pack`` where outputs overlapping an input point to fresh scratch copies."""
    tensors = graph.tensors()
    written = {t.uid for n in graph.nodes for t in n.outputs.values() if not t.is_virtual}
    read = {t.uid for n in graph.nodes for t in n.inputs.values() if not t.is_virtual and not t.is_by_value}
    ranges = {}
    for uid in written | read:
        if uid in pack:
            v = B.tensor_view(pack[uid], tensors[uid])
            ranges[uid] = (v, v.ptr, v.ptr + max(v.span, 1))
    out, keep = dict(pack), []
    for o in written:
        if o not in ranges:
            continue
        v, lo, hi = ranges[o]
        if any(i != o and ranges[i][1] < hi and lo < ranges[i][2] for i in read if i in ranges):
            buf = memory.allocate(v.span)
            src = v.sub(0, v.span, buf.dtype, (v.span,), (1,))
            memory.to_numba(buf).copy_to_device(memory.to_numba(src))
            out[o] = buf.sub(0, v.span, v.dtype, v.shape, v.strides)
            keep.append(buf)
    return out, keep


def _timer(stream_obj):
    """``time(fn) -> ms`` with CUDA events on ``stream_obj`` (wall clock in the simulator)."""
    if simulator_enabled():
        def wall(fn):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        return wall, "wall_clock"
    from numba import cuda

    e0, e1 = cuda.event(), cuda.event()

    def events(fn):
        e0.record(stream_obj)
        fn()
        e1.record(stream_obj)
        e1.synchronize()
        return cuda.event_elapsed_time(e0, e1)
    return events, "cuda_events"


def autotune(graph, configs, variant_pack, workspace=None, ctx=None, runs=None, warmup=None, reuse=True,
             store=True):
    """Time each supported config of ``configs`` (EngineConfigs; None: every mode-A config) on
    ``variant_pack`` / ``workspace``. Returns ``[TuneResult(engine_config, median_ms), ...]``,
    fastest first; unsupported configs, and those whose workspace does not fit, are left out."""
    from .api import _as_engine_config, _graph_key, build_plan, check_support, context, get_heuristics

    ctx = context(ctx)
    sim = simulator_enabled()
    runs = runs or (3 if sim else 10)
    warmup = 1 if warmup is None and sim else (3 if warmup is None else warmup)
    if configs is None:
        configs = get_heuristics(graph, HM.CUDNN_HEUR_MODE_A, ctx)
    configs = [_as_engine_config(graph, c, ctx) for c in configs]
    key = _graph_key(graph)
    if reuse:
        rows = stored_results(graph, ctx) or []
        by_ident = {json.dumps(r["config"], sort_keys=True): r for r in rows}
        hit = [by_ident.get(json.dumps(c.to_json(), sort_keys=True)) for c in configs]
        if rows and all(hit):
            res = [TuneResult(c, r["median_ms"], r["clock"], reused=True) for c, r in zip(configs, hit)]
            return sorted(res, key=lambda r: r[1])
    ws_bytes = B.nbytes_of(workspace)
    pack, _keep = _scratch_outputs(graph, variant_pack)
    stream_obj = ctx.handle.launch_stream() if ctx.handle is not None and not sim else 0
    timer, clock = _timer(stream_obj)
    bar = _Progress(len(configs))
    results = []
    try:
        for i, ec in enumerate(configs):
            bar.update(i, str(ec))
            if check_support(graph, ec, ctx)[0] != S.CUDNN_STATUS_SUCCESS:
                continue
            try:
                plan = build_plan(graph, ec, ctx)
            except CudnnError:
                continue
            if plan.workspace_size and ws_bytes is not None and ws_bytes < plan.workspace_size:
                continue
            run = lambda: plan.execute(pack, workspace, stream_obj)  # noqa: E731
            try:
                run()  # compile + bind (buffers checked), excluded
            except CudnnError:
                continue
            for _ in range(warmup):
                run()
            times = [timer(run) for _ in range(runs)]
            results.append(TuneResult(ec, statistics.median(times), clock, times))
            bar.update(i + 1, str(ec))
    finally:
        bar.close()
    results.sort(key=lambda r: r[1])
    if store and results:
        table = heuristics.table(ctx.device)
        for r in results:
            ec = r[0]
            table.record(ec.engine.name, ec.predicted_time, r[1] * 1e-3, key, ec.config)
        heuristics.save_local(ctx.device, provenance(ctx.device))
        _save(ctx.device, key, [{"config": r[0].to_json(), "median_ms": r[1], "clock": r.clock} for r in results])
    return results
