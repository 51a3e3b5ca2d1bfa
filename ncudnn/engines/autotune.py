"""Autotuning: time engine configs on the user's buffers and remember the winner on disk. This module
holds the clocks, the measurement and the store; :func:`ncudnn.engines.api.autotune` runs the loop over
the configs (support check, plan build, :func:`measure`, :func:`record`).

Each supported config is measured the way ``bench/timing.py`` measures (so the autotuner's pick is the
bench's pick):

1. built and run once (JIT compile and binding, excluded), then ``warmup`` untimed runs (default 1);
2. every timed rep is: an L2 flush (a memset of :func:`flush_bytes` = max(256 MB, 4 x the device's L2)
   into a buffer this module owns, allocated once a process and reused), a start event, one
   ``execute``, a stop event -- all enqueued on the plan's stream without host syncs between reps, so
   the events bracket the run's device time on a cold L2 and the host's launch overhead hides
   behind the flush (:class:`EventClock`);
3. the number of reps: ``runs`` when given, else as many as fit the config's time budget
   (``CONFIG_BUDGET_S``, or ``budget_s`` split evenly over the configs), sized by one flushed timed
   run: ``budget / (run + flush)`` clamped to [``MIN_REPS``, ``MAX_REPS``] (:func:`reps_for`; a run
   longer than the budget still gets ``MIN_REPS``);
4. the config's time is the **median** of the reps (all of them kept in ``TuneResult.times_ms``).

Outputs whose memory overlaps an input (in-place graphs) are redirected to scratch copies so repeated
runs do not feed on their own results. Under the simulator the clock is the host's wall clock
(:class:`WallClock`: no L2, its ``flush`` does nothing but is called at the same points), 3 reps by
default, and results say so (``clock``).

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
from ..version import __version__
from . import buffers as B
from . import heuristics
from .base import context
from .plancache import graph_key

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
    import numba  # imported here: numba loads with the first kernel, not with ncudnn

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
    ctx = context(ctx)
    _, s = _store(ctx.device)
    entry = s["graphs"].get(graph_key(graph))
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


#: bytes of the L2 flush written before every timed rep (at least 4x the device's L2; 256 MB like bench/)
FLUSH_MIN_BYTES = 256 << 20
#: timed seconds a config gets by default; reps = budget / (run + flush), within [MIN_REPS, MAX_REPS]
CONFIG_BUDGET_S = 0.1
MIN_REPS, MAX_REPS = 3, 100
_flush_bufs = {}   # (device slug, bytes) -> the flush buffer, allocated once a process


def flush_bytes(device):
    """Bytes written by the L2 flush on ``device``: max(256 MB, 4 x L2)."""
    return max(FLUSH_MIN_BYTES, 4 * int(device.l2_bytes))


def reps_for(run_ms, flush_ms, budget_s, lo=MIN_REPS, hi=MAX_REPS):
    """Timed reps that fit ``budget_s`` seconds of (run + flush), clamped to [lo, hi]."""
    per = max(run_ms + flush_ms, 1e-6) * 1e-3
    return int(min(hi, max(lo, budget_s // per)))


class EventClock:
    """CUDA events on ``stream`` (a numba Stream) around one run each, an L2 flush enqueued before every
    rep on the same stream (a memset of :func:`flush_bytes` into a buffer owned here, allocated once
    a process): start event, run, stop event, with no host sync between reps, so the host's launch
    overhead hides behind the flush and the events bracket the run's device time only."""

    name = "cuda_events"

    def __init__(self, stream, device):
        import numpy as np
        from numba import cuda
        from numba.cuda.cudadrv import driver

        self.cuda, self.stream = cuda, stream
        self.nbytes = flush_bytes(device)
        key = (device.slug, self.nbytes)
        with _lock:
            if key not in _flush_bufs:
                _flush_bufs[key] = cuda.device_array(self.nbytes, dtype=np.uint8)
            buf = _flush_bufs[key]
        self._memset = lambda: driver.device_memset(buf, 0, self.nbytes, stream=stream)
        self._pairs = []

    def flush(self):
        self._memset()

    def start(self):
        pair = (self.cuda.event(), self.cuda.event())
        pair[0].record(self.stream)
        self._pairs.append(pair)

    def stop(self):
        self._pairs[-1][1].record(self.stream)

    def collect(self):
        """Milliseconds of the reps since the last collect (waits for the last stop event)."""
        pairs, self._pairs = self._pairs, []
        if not pairs:
            return []
        pairs[-1][1].synchronize()
        return [self.cuda.event_elapsed_time(e0, e1) for e0, e1 in pairs]


class WallClock:
    """The simulator's clock: host wall time of each run, run synchronously; ``flush`` does nothing
    (no L2 to flush) but is called at the same points as on a GPU."""

    name = "wall_clock"
    nbytes = 0

    def __init__(self, stream=None, device=None):
        self._t0, self._times = 0.0, []

    def flush(self):
        pass

    def start(self):
        self._t0 = time.perf_counter()

    def stop(self):
        self._times.append((time.perf_counter() - self._t0) * 1e3)

    def collect(self):
        out, self._times = self._times, []
        return out


def make_clock(stream_obj, device):
    """:class:`EventClock` on a GPU (``stream_obj`` 0: the default stream), :class:`WallClock` in the simulator."""
    if simulator_enabled():
        return WallClock()
    from numba import cuda

    return EventClock(stream_obj if stream_obj else cuda.default_stream(), device)


def time_reps(clock, fn, reps):
    """``reps`` times: flush, start, ``fn()``, stop; the list of milliseconds."""
    for _ in range(reps):
        clock.flush()
        clock.start()
        fn()
        clock.stop()
    return clock.collect()


def measure(clock, fn, warmup=1, runs=None, budget_s=CONFIG_BUDGET_S):
    """Times (ms) of ``fn``: ``warmup`` untimed runs, one flushed timed run that sizes the sample
    (:func:`reps_for` over ``budget_s``; ``runs`` fixes the count instead), then the timed reps."""
    for _ in range(warmup):
        fn()
    if runs is not None:
        return time_reps(clock, fn, runs)
    first = time_reps(clock, fn, 1)
    flush_ms = clock.nbytes / 3e12 * 1e3          # a memset at ~3 TB/s
    n = reps_for(first[0], flush_ms, max(budget_s - (first[0] + flush_ms) * 1e-3, 0.0))
    return time_reps(clock, fn, n)


# ------------------------------------------------------------------------ one tuning run

def reused(graph, configs, ctx):
    """The stored results, fastest first, when every config of ``configs`` was timed for this graph on
    this device (``TuneResult.reused``); else None."""
    rows = stored_results(graph, ctx) or []
    by_ident = {json.dumps(r["config"], sort_keys=True): r for r in rows}
    hit = [by_ident.get(json.dumps(c.to_json(), sort_keys=True)) for c in configs]
    if rows and all(hit):
        res = [TuneResult(c, r["median_ms"], r["clock"], reused=True) for c, r in zip(configs, hit)]
        return sorted(res, key=lambda r: r[1])
    return None


class Bench:
    """What one tuning run times with: the variant pack with in-place outputs redirected to scratch copies,
    the workspace's size, the stream, the clock (:func:`make_clock`), the per-config budget (``budget_s``
    split over ``n_configs``, default ``CONFIG_BUDGET_S`` each) and the progress bar. ``runs`` defaults to 3
    in the simulator (else sized by the budget), ``warmup`` to 1."""

    def __init__(self, graph, variant_pack, workspace, ctx, n_configs, runs=None, warmup=None, budget_s=None):
        sim = simulator_enabled()
        self.runs = runs if runs is not None else (3 if sim else None)
        self.warmup = 1 if warmup is None else warmup
        self.workspace, self.ws_bytes = workspace, B.nbytes_of(workspace)
        self.pack, self._keep = _scratch_outputs(graph, variant_pack)
        self.stream = ctx.handle.launch_stream() if ctx.handle is not None and not sim else 0
        self.clock = make_clock(self.stream, ctx.device)
        self.per_config = CONFIG_BUDGET_S if budget_s is None else budget_s / max(n_configs, 1)
        self.bar = _Progress(n_configs)

    def time(self, ec, plan):
        """The TuneResult of ``plan`` (built for ``ec``), or None when its workspace does not fit or its
        first run (compile and bind, not timed) fails with a CudnnError."""
        if plan.workspace_size and self.ws_bytes is not None and self.ws_bytes < plan.workspace_size:
            return None
        run = lambda: plan.execute(self.pack, self.workspace, self.stream)  # noqa: E731
        try:
            run()  # compile + bind (buffers checked), excluded
        except CudnnError:
            return None
        times = measure(self.clock, run, self.warmup, self.runs, self.per_config)
        return TuneResult(ec, statistics.median(times), self.clock.name, times)

    def update(self, i, label):
        self.bar.update(i, label)

    def close(self):
        self.bar.close()


def record(ctx, key, results):
    """Store ``results`` (fastest first) for graph ``key`` on this device: the mode-B correction table gets
    each measured / predicted ratio, the store the rows."""
    table = heuristics.table(ctx.device)
    for r in results:
        ec = r[0]
        table.record(ec.engine.name, ec.predicted_time, r[1] * 1e-3, key, ec.config)
    heuristics.save_local(ctx.device, provenance(ctx.device))
    _save(ctx.device, key, [{"config": r[0].to_json(), "median_ms": r[1], "clock": r.clock} for r in results])
