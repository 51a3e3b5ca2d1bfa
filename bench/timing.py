"""What a benchmark time is: CUDA-event time of one run on a cold L2, median and quantiles.

For each case and implementation :func:`measure`

1. runs ``fn`` ``warmup`` times (JIT compilation, plan binding, cuDNN's own lazy init: excluded);
2. times one run to size the sample: ``reps = budget / (run + flush)``, clamped to [min_reps, max_reps];
   then runs the timed loop's body (flush + ``fn``) untimed for :data:`WARMUP_S` seconds of device time
   (``NCUDNN_BENCH_WARMUP_S`` overrides), so every implementation is timed on a GPU that has been busy
   with this same loop, whatever ran (or compiled, with the GPU idle) before it: the first implementation
   of a case otherwise started right after a plan build or the float64 reference;
3. per rep, enqueues an L2 flush (a write of :data:`FLUSH_BYTES`, at least 4x the L2, so no operand is
   still cached), then a start event, ``fn``, a stop event -- all on one stream, without host syncs, so
   host launch overhead shorter than the flush is hidden (the GPU is still flushing while the host
   prepares the launch) and the events bracket only the device time of ``fn``;
4. reports the median, p20 and p80 (and min) of the event times, in milliseconds.

Clocks: :class:`TorchClock` (``torch.cuda.Event`` on torch's current stream: what torch, cudnn-frontend
and ncudnn -- its handle set to that stream -- run on), :class:`NumbaClock` (numba events, default
stream; no torch) and :class:`WallClock` (the CUDA simulator: host wall time, no flush; numbers only
show the harness works).

Throughput formulas (in code, used by the report): ``TFLOP/s = case.flops / (median_ms * 1e-3) / 1e12``
and ``GB/s = case.bytes / (median_ms * 1e-3) / 1e9``; see :mod:`bench.cases` for flops and bytes.
"""
import math
import os
import time
from dataclasses import dataclass, field
from typing import List

FLUSH_BYTES = 256 << 20
BUDGET_S = {"full": 0.12, "quick": 0.06, "sim": 0.0}   # timed seconds per (case, implementation)
REPS = {"full": (5, 200), "quick": (5, 100), "sim": (1, 2)}
WARMUP = {"full": 3, "quick": 2, "sim": 1}
#: seconds of untimed flush + run iterations before the timed ones (the same for every implementation)
WARMUP_S = float(os.environ.get("NCUDNN_BENCH_WARMUP_S", "0.03"))


def tflops(flops, ms):
    """TFLOP/s of ``flops`` done in ``ms`` milliseconds."""
    return flops / (ms * 1e-3) / 1e12 if ms and ms > 0 else 0.0


def gbps(nbytes, ms):
    """GB/s (1e9 bytes per second) of ``nbytes`` moved in ``ms`` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9 if ms and ms > 0 else 0.0


def quantile(xs, q):
    """Linear-interpolated quantile ``q`` in [0, 1] of ``xs``."""
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Timing:
    times_ms: List[float]
    clock: str
    flush_bytes: int
    warmup: int
    wall_s: float = 0.0
    median_ms: float = field(init=False)
    p20_ms: float = field(init=False)
    p80_ms: float = field(init=False)
    min_ms: float = field(init=False)

    def __post_init__(self):
        self.median_ms = quantile(self.times_ms, 0.5)
        self.p20_ms = quantile(self.times_ms, 0.2)
        self.p80_ms = quantile(self.times_ms, 0.8)
        self.min_ms = min(self.times_ms) if self.times_ms else float("nan")

    def to_json(self):
        return {"median_ms": self.median_ms, "p20_ms": self.p20_ms, "p80_ms": self.p80_ms, "min_ms": self.min_ms,
                "reps": len(self.times_ms), "clock": self.clock, "flush_bytes": self.flush_bytes,
                "warmup": self.warmup, "wall_s": self.wall_s}


class TorchClock:
    name = "cuda_events(torch)"

    def __init__(self, flush_bytes=None):
        import torch

        self.torch = torch
        l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 0
        self.flush_bytes = max(flush_bytes or FLUSH_BYTES, 4 * l2)
        self.buf = torch.empty(self.flush_bytes, dtype=torch.uint8, device="cuda")

    def flush(self):
        self.buf.zero_()

    def pair(self):
        E = self.torch.cuda.Event
        return E(enable_timing=True), E(enable_timing=True)

    def start(self, p):
        p[0].record()

    def stop(self, p):
        p[1].record()

    def sync(self):
        self.torch.cuda.synchronize()

    def elapsed_ms(self, p):
        return p[0].elapsed_time(p[1])

    def stream(self):
        return self.torch.cuda.current_stream().cuda_stream


class NumbaClock:
    name = "cuda_events(numba)"

    def __init__(self, flush_bytes=None):
        import numpy as np
        from numba import cuda

        self.cuda = cuda
        self.flush_bytes = flush_bytes or FLUSH_BYTES
        self.buf = cuda.device_array(self.flush_bytes, dtype=np.uint8)
        from numba.cuda.cudadrv import driver

        stream = cuda.default_stream()  # a Stream object: the memset is asynchronous, as a kernel would be
        self._memset = lambda: driver.device_memset(self.buf, 0, self.flush_bytes, stream=stream)

    def flush(self):
        self._memset()

    def pair(self):
        return self.cuda.event(), self.cuda.event()

    def start(self, p):
        p[0].record()

    def stop(self, p):
        p[1].record()

    def sync(self):
        self.cuda.synchronize()

    def elapsed_ms(self, p):
        return self.cuda.event_elapsed_time(p[0], p[1])

    def stream(self):
        return 0


class WallClock:
    """The simulator's clock: host wall time around a synchronous run; no L2 to flush."""
    name = "wall_clock(simulator)"
    flush_bytes = 0

    def flush(self):
        pass

    def pair(self):
        return [0.0, 0.0]

    def start(self, p):
        p[0] = time.perf_counter()

    def stop(self, p):
        p[1] = time.perf_counter()

    def sync(self):
        pass

    def elapsed_ms(self, p):
        return (p[1] - p[0]) * 1e3

    def stream(self):
        return 0


def make_clock(torch_ok, simulator):
    if simulator:
        return WallClock()
    return TorchClock() if torch_ok else NumbaClock()


def measure(fn, clock, budget_s, warmup=3, min_reps=5, max_reps=200, warmup_s=None):
    """Time ``fn`` (see the module docstring); returns a :class:`Timing`. ``warmup_s``: seconds of untimed
    flush + ``fn`` before the timed loop (default :data:`WARMUP_S`; 0 with a zero ``budget_s``)."""
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        fn()
    clock.sync()
    p = clock.pair()
    clock.flush()
    clock.start(p)
    fn()
    clock.stop(p)
    clock.sync()
    first = clock.elapsed_ms(p)
    flush_ms = clock.flush_bytes / 3e12 * 1e3  # ~3 TB/s write: only sizes the sample
    reps = int(budget_s * 1e3 / max(first + flush_ms, 1e-3)) if budget_s > 0 else min_reps
    reps = max(min_reps, min(max_reps, reps))
    warm_s = (WARMUP_S if warmup_s is None else warmup_s) if budget_s > 0 else 0.0
    for _ in range(min(int(warm_s * 1e3 / max(first + flush_ms, 1e-3)), 10 * max_reps)):
        clock.flush()
        fn()
    pairs = [clock.pair() for _ in range(reps)]
    for q in pairs:
        clock.flush()
        clock.start(q)
        fn()
        clock.stop(q)
    clock.sync()
    times = [clock.elapsed_ms(q) for q in pairs]
    return Timing(times, clock.name, clock.flush_bytes, max(warmup, 1), time.perf_counter() - t0)
