"""Shared checking helpers for tests, benchmarks and `verify` (llm.c's validate_result habit).

* :func:`rel_err`: ||out - ref|| / ||ref|| in float64 (NaN anywhere -> inf, never passes).
* :func:`assert_close`: that, against a per-dtype tolerance, printing the first mismatches.
* :func:`poison_value`: what to fill outputs with before a run so unwritten elements show.
* :data:`TOL`: relative-norm tolerances fitting each compute precision.
* :data:`SIM` / :func:`size`: one switch for tiny (simulator) versus real (GPU) shapes.
"""
import os

import numpy as np

from .platform import simulator_enabled

#: True when kernels run in numba's CUDA simulator (CI); tests then use tiny shapes.
SIM = simulator_enabled()

#: Relative-norm tolerances by the precision the inputs are rounded to.
TOL = {
    "float64": 1e-12,
    "float32": 1e-5,
    "tf32": 3e-3,
    "float16": 3e-3,
    "bfloat16": 1.5e-2,
    "fp8": 8e-2,
}


def size(sim, gpu):
    """``sim`` under the simulator, ``gpu`` on a real device (override with NCUDNN_SHAPES=sim|gpu)."""
    forced = os.environ.get("NCUDNN_SHAPES")
    if forced == "sim":
        return sim
    if forced == "gpu":
        return gpu
    return sim if SIM else gpu


def to_f64(a):
    a = np.asarray(a)
    if a.dtype.kind == "V" or a.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return a.astype(np.float32).astype(np.float64)
    return a.astype(np.float64)


def rel_err(out, ref):
    """||out - ref||_2 / ||ref||_2 in float64; inf when out has NaN/inf where ref is finite."""
    o, r = to_f64(out), to_f64(ref)
    if o.shape != r.shape:
        raise AssertionError(f"shape {o.shape} != reference shape {r.shape}")
    finite = np.isfinite(r)
    if not np.array_equal(np.isfinite(o), finite) or not np.array_equal(np.isnan(o), np.isnan(r)):
        return float("inf")
    o, r = o[finite], r[finite]
    denom = np.linalg.norm(r)
    num = np.linalg.norm(o - r)
    if denom == 0.0:
        return float(num)
    return float(num / denom)


def assert_close(out, ref, tol, name="output", show=5):
    """Fail with the first mismatching elements when rel_err(out, ref) > tol."""
    if isinstance(tol, str):
        tol = TOL[tol]
    err = rel_err(out, ref)
    if err <= tol:
        return err
    o, r = to_f64(out), to_f64(ref)
    scale = np.max(np.abs(r[np.isfinite(r)])) if np.isfinite(r).any() else 1.0
    bad = np.argwhere(~(np.abs(o - r) <= tol * scale + 1e-30) | (np.isnan(o) != np.isnan(r)))
    lines = [f"{name}: rel_err {err:.3e} > tol {tol:.1e}; {len(bad)} of {r.size} elements off, first:"]
    for idx in bad[:show]:
        t = tuple(int(i) for i in idx)
        lines.append(f"  at {t}: got {o[t]!r}, expected {r[t]!r}")
    raise AssertionError("\n".join(lines))


def poison_value(dtype):
    """A value no correct kernel writes by accident: NaN for floats, a sentinel for integers."""
    dt = np.dtype(dtype)
    if dt.kind == "f" or dt.name in ("bfloat16",):
        return np.nan
    if dt.kind == "b":
        return True
    return np.iinfo(dt).min if dt.kind == "i" else np.iinfo(dt).max


def random(rng, shape, dtype=np.float32, low=-1.0, high=1.0):
    """Fresh uniform random data in [low, high) cast to ``dtype`` (never zeros)."""
    return rng.uniform(low, high, size=shape).astype(dtype)
