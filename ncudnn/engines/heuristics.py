"""The analytic cost model engines use in ``Engine.cost`` (heuristic mode A), and the mode-B
correction table (the model scaled by timings autotuning recorded on this device).

Model of one kernel launch::

    t = LAUNCH_OVERHEAD + max(flops / (peak * eff), bytes / bandwidth)
    eff = tile quantization * wave quantization * occupancy factor

* tile quantization: useful fraction of the padded tile grid (M*N over ceil-tiled M*N);
* waves: tiles run in waves of (SM count x resident blocks per SM); a partial last wave idles SMs;
* occupancy: resident blocks per SM from threads, registers and shared memory; below a few warps
  per scheduler latency is not hidden (a linear penalty up to ``FULL_OCCUPANCY_WARPS``).

:func:`gemm_time` applies it to tiled GEMMs (and implicit-GEMM convolutions): operand re-reads through
L2, split-K partials and the reduce launch.

Mode-B tables live in ``ncudnn/engines/tuned/*.json`` (shipped, generated on a GPU) and in
``$NCUDNN_CACHE_DIR/tuned/<device>.json`` (written by :mod:`.autotune`); each starts with a provenance
header (GPU, date, ncudnn / numba versions, command) and holds per-engine correction factors
(measured / predicted, geometric mean) and per-(graph key, config) measured times.
"""
import json
import math
import os
import threading
from pathlib import Path

from ..types import cudnnBackendNumericalNote_t

_WINOGRAD = cudnnBackendNumericalNote_t.CUDNN_NUMERICAL_NOTE_WINOGRAD

#: host + driver cost of one kernel launch on the device timeline, seconds
LAUNCH_OVERHEAD = 3e-6
#: resident warps per SM from which latency is considered hidden
FULL_OCCUPANCY_WARPS = 16
TUNED_DIR = Path(__file__).with_name("tuned")
#: DRAM latency the bytes in flight must cover (Little's law), seconds
DRAM_LATENCY = 6e-7


# ----------------------------------------------------------------------------- the model

def tile_efficiency(m, n, tile_m, tile_n):
    """Useful fraction of a ceil-tiled M x N grid (1.0 when the tiles divide the problem)."""
    tm, tn = math.ceil(m / tile_m), math.ceil(n / tile_n)
    return (m * n) / (tm * tile_m * tn * tile_n) if m and n else 1.0


_PER_SM = {}


def blocks_per_sm(device, threads, regs_per_thread=32, smem_bytes=0):
    """Resident blocks per SM limited by threads, registers and shared memory (at least 0); remembered
    per (threads, registers, shared memory, the SM's limits)."""
    key = (threads, regs_per_thread, smem_bytes, device.max_threads_per_sm, device.regs_per_sm, device.smem_per_sm)
    hit = _PER_SM.get(key)
    if hit is None:
        if len(_PER_SM) > 4096:
            _PER_SM.clear()
        hit = _PER_SM[key] = _blocks_per_sm(device, threads, regs_per_thread, smem_bytes)
    return hit


def _blocks_per_sm(device, threads, regs_per_thread, smem_bytes):
    threads = max(int(threads), 1)
    by_threads = device.max_threads_per_sm // threads
    regs = max(int(regs_per_thread), 1) * (math.ceil(threads / 32) * 32)
    by_regs = device.regs_per_sm // regs
    by_smem = device.smem_per_sm // smem_bytes if smem_bytes else 32
    return max(0, min(by_threads, by_regs, by_smem, 32))


def wave_efficiency(blocks, device, per_sm):
    """Useful fraction of the last wave: blocks / (waves * slots)."""
    slots = max(device.sm_count * max(per_sm, 1), 1)
    waves = math.ceil(max(blocks, 1) / slots)
    return max(blocks, 1) / (waves * slots) if blocks < slots * waves else 1.0


def occupancy_factor(per_sm, threads):
    """1.0 at or above FULL_OCCUPANCY_WARPS resident warps, linear below."""
    warps = per_sm * math.ceil(threads / 32)
    return min(1.0, max(warps, 1) / FULL_OCCUPANCY_WARPS)


def kernel_time(device, flops=0.0, nbytes=0.0, peak="fp32", blocks=None, threads=256, regs=32,
                smem=0, tile=None, problem=None, launches=1, bytes_in_flight=None, per_sm=None):
    """Predicted seconds for ``launches`` kernels doing ``flops`` and moving ``nbytes`` in total.

    ``blocks``: grid size (None: enough to fill the device); ``tile`` / ``problem``: (tile_m, tile_n)
    and (m, n) for the tile quantization of a GEMM-like output; ``bytes_in_flight``: outstanding
    memory requests the kernel sustains (Little's law: a small grid cannot reach peak bandwidth).
    ``per_sm``: resident blocks per SM when the caller already has it. Returns +inf when a block
    cannot fit on an SM.
    """
    if per_sm is None:
        per_sm = blocks_per_sm(device, threads, regs, smem)
    if per_sm == 0:
        return math.inf
    # occupancy_factor, wave_efficiency and tile_efficiency, written out (called for every config);
    # ``b if b > a else a`` is max(a, b) and ``b if b < a else a`` min(a, b), NaN included
    w = per_sm * -(-threads // 32)
    eff = (1 if 1 > w else w) / FULL_OCCUPANCY_WARPS
    eff = eff if eff < 1.0 else 1.0
    if blocks is not None:
        slots = device.sm_count * (1 if 1 > per_sm else per_sm)
        slots = 1 if 1 > slots else slots
        nb = 1 if 1 > blocks else blocks
        waves = -(-nb // slots)
        if blocks < slots * waves:
            eff *= nb / (waves * slots)
    if tile is not None and problem is not None:
        m, n = problem
        if m and n:
            eff *= (m * n) / (-(-m // tile[0]) * tile[0] * -(-n // tile[1]) * tile[1])
    compute = flops / (device.peak(peak) * (1e-6 if 1e-6 > eff else eff)) if flops else 0.0
    memory = nbytes / device.mem_bandwidth if nbytes else 0.0
    if nbytes and bytes_in_flight is not None:
        inflight = nbytes if nbytes < bytes_in_flight else bytes_in_flight
        lat = DRAM_LATENCY * nbytes / (1 if 1 > inflight else inflight)
        memory = lat if lat > memory else memory
    return launches * LAUNCH_OVERHEAD + (memory if memory > compute else compute)


def gemm_time(device, m, n, k, batch=1, tile=(128, 128), threads=256, regs=64, smem=0, in_bytes=4,
              out_bytes=4, peak="fp32", split_k=1, extra_bytes=0, compute_eff=1.0, per_sm=None):
    """Predicted seconds of a tiled GEMM ``C[b, m, n] = A[b, m, k] @ B[b, k, n]`` (implicit-GEMM conv:
    m = N*P*Q, n = K, k = C*R*S / groups).

    One block per (tile_m x tile_n) output tile, per batch, per K split. Operand traffic: each block
    streams its A row panel and B column panel; when the operands fit in half the L2 the re-reads are
    L2 hits and DRAM sees each operand once, otherwise the tiles of one wave share their panels.
    Split-K adds the fp32 partials (written, read back) and a reduce launch. ``compute_eff``: the
    fraction of ``peak`` the engine's main loop reaches at full occupancy (a SIMT kernel is far below
    the tensor-core or even the FMA peak); ``extra_bytes``: epilogue tensors (bias, residual);
    ``per_sm``: resident blocks per SM when the caller has it.

    The same arithmetic as :func:`kernel_time` with the tile, wave and occupancy factors, written out
    so that one call costs one occupancy look-up (the heuristics call it for every config).
    """
    if per_sm is None:
        per_sm = blocks_per_sm(device, threads, regs, smem)
    if per_sm == 0:
        return math.inf
    tm, tn = tile
    tiles_m, tiles_n = -(-m // tm), -(-n // tn)
    split_k = max(1, int(split_k))
    blocks = tiles_m * tiles_n * batch * split_k
    flops = 2.0 * m * n * k * batch / max(compute_eff, 1e-6)
    a_bytes, b_bytes = m * k * batch * in_bytes, k * n * batch * in_bytes
    unique = a_bytes + b_bytes
    if unique > device.l2_bytes / 2:
        # a wave of W resident tiles (grouped tile order: about sqrt(W) x sqrt(W) of them) shares its
        # panels in L2, so DRAM sees the streamed bytes once per sqrt(W) tiles
        streamed = tiles_n * a_bytes + tiles_m * b_bytes
        wave = max(device.sm_count * per_sm, 1)
        unique = max(unique, streamed / math.sqrt(wave))
    dram = unique + m * n * batch * out_bytes + extra_bytes
    if split_k > 1:
        dram += 2 * split_k * m * n * batch * 4
    # kernel_time: occupancy x wave x tile quantization
    eff = min(1.0, max(per_sm * -(-threads // 32), 1) / FULL_OCCUPANCY_WARPS)
    slots = max(device.sm_count * max(per_sm, 1), 1)
    nb = max(blocks, 1)
    waves = -(-nb // slots)
    eff *= nb / (waves * slots) if blocks < slots * waves else 1.0
    if m and n:
        eff *= (m * n) / (tiles_m * tm * tiles_n * tn)
    compute = flops / (device.peak(peak) * max(eff, 1e-6)) if flops else 0.0
    memory = dram / device.mem_bandwidth if dram else 0.0
    return (1 + (split_k > 1)) * LAUNCH_OVERHEAD + max(compute, memory)


#: Winograd F(m x m, 3 x 3) pays for its transform passes only when the channel GEMMs are wide (the
#: transforms' traffic per output is fixed, the multiplies they save grow with C x K): below this many
#: input or output channels per group the heuristics rank the Winograd engines after the others
WINOGRAD_MIN_CHANNELS = 64


def demotion(engine, sub):
    """Why every config of ``engine`` on ``sub`` ranks after the undemoted ones ("" when not): a rule the
    analytic model does not capture on its own. Mode B's measured times are never demoted.

    * Winograd (engines noted CUDNN_NUMERICAL_NOTE_WINOGRAD) on fewer than ``WINOGRAD_MIN_CHANNELS``
      input or output channels per group: implicit GEMM first. Winograd beats the implicit GEMM on
      FP32 3x3 layers with C, K >= 64 (docs/heuristics.md); for fewer channels the rule stands in for
      a measurement (an autotune record of the problem overrides it in mode B).
    """
    if _WINOGRAD not in engine.numerical_notes:
        return ""
    node = getattr(sub, "anchor", None)
    w = node.inputs.get("W") if node is not None else None
    if w is None or not w.dims or len(w.dims) < 2:
        return ""
    k, c = w.dims[0], w.dims[1]
    if min(k, c) < WINOGRAD_MIN_CHANNELS:
        return f"Winograd on {c} input / {k} output channels per group (< {WINOGRAD_MIN_CHANNELS})"
    return ""


def memory_parallelism(device, bytes_in_flight):
    """Fraction of peak bandwidth reachable with ``bytes_in_flight`` outstanding (Little's law)."""
    need = device.mem_bandwidth * DRAM_LATENCY
    return min(1.0, max(bytes_in_flight, 1) / need)


def explain(device, flops, nbytes, peak="fp32"):
    """One line for the debug log: which ceiling bounds the problem."""
    c = flops / device.peak(peak) if flops else 0.0
    m = nbytes / device.mem_bandwidth if nbytes else 0.0
    bound = "compute" if c > m else "memory"
    return f"{flops:.3g} FLOP, {nbytes:.3g} B: {bound}-bound ({c * 1e6:.2f} us compute, {m * 1e6:.2f} us memory)"


# ------------------------------------------------------------------------ mode B table

class TunedTable:
    """Correction factors and measured times for one device, merged from shipped and local tables."""

    def __init__(self):
        self.factors = {}    # engine name -> (log-sum of measured/predicted ratios, count)
        self.measured = {}   # (graph key, config str) -> median seconds
        self.provenance = []
        self.local = None    # the TunedTable of this device's own records (what save_local writes)

    def factor(self, engine):
        s, n = self.factors.get(engine, (0.0, 0))
        return math.exp(s / n) if n else 1.0

    def correct(self, engine, predicted, graph_key=None, config=None):
        """Mode-B estimate: a measured time for this exact problem, else the model times the factor."""
        if graph_key is not None:
            t = self.measured.get((graph_key, str(config)))
            if t is not None:
                return t, "measured"
        f = self.factor(engine)
        return predicted * f, (f"model x {f:.3g}" if f != 1.0 else "model")

    def record(self, engine, predicted, measured, graph_key=None, config=None):
        bump()
        if predicted > 0 and measured > 0:
            s, n = self.factors.get(engine, (0.0, 0))
            self.factors[engine] = (s + math.log(measured / predicted), n + 1)
        if graph_key is not None:
            self.measured[(graph_key, str(config))] = measured
        if self.local is not None:
            self.local.record(engine, predicted, measured, graph_key, config)

    def merge(self, data):
        self.provenance.append(data.get("provenance", {}))
        for eng, (s, n) in data.get("factors", {}).items():
            s0, n0 = self.factors.get(eng, (0.0, 0))
            self.factors[eng] = (s0 + float(s), n0 + int(n))
        for row in data.get("measured", []):
            self.measured[(row["graph"], row["config"])] = float(row["seconds"])

    def to_json(self, provenance):
        return {"provenance": provenance,
                "factors": {k: list(v) for k, v in sorted(self.factors.items())},
                "measured": [{"graph": g, "config": c, "seconds": t} for (g, c), t in sorted(self.measured.items())]}


_tables = {}
_lock = threading.Lock()
#: bumped whenever recorded timings change (keys of cached rankings include it)
generation = 0


def bump():
    global generation
    generation += 1


def cache_dir():
    """$NCUDNN_CACHE_DIR, else ~/.cache/ncudnn."""
    d = os.environ.get("NCUDNN_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "ncudnn"


def local_table_path(device):
    return cache_dir() / "tuned" / f"{device.slug}.json"


def table(device):
    """The mode-B table of ``device`` (loaded lazily: shipped tables for its name, then the local one)."""
    with _lock:
        t = _tables.get(device.slug)
        if t is not None:
            return t
        t = TunedTable()
        t.local = TunedTable()
        local = local_table_path(device)
        for path in sorted(TUNED_DIR.glob("*.json")) + [local]:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            prov = data.get("provenance", {})
            if path != local and prov.get("device_slug") not in (None, device.slug):
                continue
            t.merge(data)
            if path == local:
                t.local.merge(data)
        _tables[device.slug] = t
        return t


def save_local(device, provenance):
    """Write the local table of ``device`` (atomically) with a provenance header."""
    t = table(device)
    path = local_table_path(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(t.local.to_json(provenance), indent=1))
    os.replace(tmp, path)
    return path


def forget_tables():
    """Drop the loaded tables (tests; after the cache dir changes)."""
    with _lock:
        _tables.clear()
    bump()
