"""heuristics.kernel_time (max / min written out as conditional expressions) returns exactly what the
formula with the builtins returns (kept here as the reference) on fresh random arguments: ints and
floats, zeros, tiny grids, huge byte counts, bytes in flight below / above the bytes, inf and NaN."""
import math

import numpy as np

from ncudnn.engines import device as dev_mod
from ncudnn.engines import heuristics as H


def _reference(device, flops=0.0, nbytes=0.0, peak="fp32", blocks=None, threads=256, regs=32, smem=0,
               tile=None, problem=None, launches=1, bytes_in_flight=None, per_sm=None):
    if per_sm is None:
        per_sm = H.blocks_per_sm(device, threads, regs, smem)
    if per_sm == 0:
        return math.inf
    eff = min(1.0, max(per_sm * -(-threads // 32), 1) / H.FULL_OCCUPANCY_WARPS)
    if blocks is not None:
        slots = max(device.sm_count * max(per_sm, 1), 1)
        nb = max(blocks, 1)
        waves = -(-nb // slots)
        if blocks < slots * waves:
            eff *= nb / (waves * slots)
    if tile is not None and problem is not None:
        m, n = problem
        if m and n:
            eff *= (m * n) / (-(-m // tile[0]) * tile[0] * -(-n // tile[1]) * tile[1])
    compute = flops / (device.peak(peak) * max(eff, 1e-6)) if flops else 0.0
    memory = nbytes / device.mem_bandwidth if nbytes else 0.0
    if nbytes and bytes_in_flight is not None:
        memory = max(memory, H.DRAM_LATENCY * nbytes / max(min(bytes_in_flight, nbytes), 1))
    return launches * H.LAUNCH_OVERHEAD + max(compute, memory)


def _same(a, b):
    return repr(a) == repr(b) and type(a) is type(b)


def _draw(rng):
    pick = lambda *xs: xs[int(rng.integers(0, len(xs)))]  # noqa: E731
    kw = {}
    kw["flops"] = pick(0, 0.0, float(rng.uniform(0, 1e13)), int(rng.integers(1, 10 ** 9)), math.inf, math.nan)
    kw["nbytes"] = pick(0, 0.0, float(rng.uniform(0, 1e10)), int(rng.integers(1, 10 ** 6)), 1, math.inf)
    kw["peak"] = pick("fp32", "fp64")
    kw["blocks"] = pick(None, 0, 1, int(rng.integers(1, 100000)))
    kw["threads"] = pick(32, 64, 128, 256, 1024, int(rng.integers(1, 1025)))
    kw["regs"] = pick(16, 32, 64, 128, 255)
    kw["smem"] = pick(0, 1024, 48 * 1024, 100 * 1024, 300 * 1024)
    if rng.integers(0, 2):
        kw["tile"] = (pick(16, 32, 64, 128), pick(16, 32, 64, 128))
        kw["problem"] = (int(rng.integers(0, 5000)), int(rng.integers(0, 5000)))
    kw["launches"] = pick(1, 2, 3)
    kw["bytes_in_flight"] = pick(None, 0, 1, int(rng.integers(1, 10 ** 7)), float(rng.uniform(0, 1e7)))
    kw["per_sm"] = pick(None, None, 0, 1, int(rng.integers(1, 33)))
    return kw


def test_kernel_time_equals_the_builtin_formula(rng):
    nominal = dev_mod.current()
    small = dev_mod.DeviceProps(**{**{f: getattr(nominal, f) for f in nominal.__dataclass_fields__}, "sm_count": 8})
    n = 0
    for _ in range(3000):
        kw = _draw(rng)
        for d in (nominal, small):
            assert _same(H.kernel_time(d, **kw), _reference(d, **kw)), kw
            n += 1
    assert n == 6000
    assert math.isnan(_reference(nominal, flops=math.nan, per_sm=4)) and math.isnan(
        H.kernel_time(nominal, flops=math.nan, per_sm=4))
    assert np.isfinite(H.kernel_time(nominal, flops=1e9, nbytes=1e6, bytes_in_flight=10))
