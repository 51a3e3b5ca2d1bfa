"""Run a list of cases: inputs, implementations, truth, check, time -- the loop behind ``ncudnn bench``
and the pytest-benchmark suite.

:class:`Env` finds out what this machine has (GPU or simulator, torch, cudnn-frontend) and says what is
missing. :func:`run` goes case by case within a wall-clock deadline (cases past it are recorded as
"skipped: suite time budget"), freeing each case's buffers before the next.
"""
import time
from dataclasses import dataclass, field
from typing import List

from . import data, ncudnn_runners, ref_runners
from .harness import run_case
from .timing import BUDGET_S, REPS, WARMUP, make_clock


@dataclass
class Env:
    simulator: bool
    torch_ok: bool
    fe_ok: bool
    missing: List[str] = field(default_factory=list)

    @property
    def gpu(self):
        return not self.simulator


def detect():
    import ncudnn  # noqa: F401  (decides GPU or simulator before numba loads)
    from ncudnn.platform import simulator_enabled

    sim = simulator_enabled()
    missing = []
    torch_ok = False
    if sim:
        missing.append("a GPU (kernels would run in numba's CUDA simulator)")
    try:
        import torch

        torch_ok = bool(torch.cuda.is_available()) and not sim
        if not torch_ok and not sim:
            missing.append("torch with CUDA (torch is installed but sees no GPU)")
    except ImportError:
        missing.append("torch (the references cuDNN-via-torch and cuBLAS, and the float64 truth on the GPU)")
    fe, why = ref_runners.cudnn_fe_available() if torch_ok else (None, "needs torch")
    if fe is None:
        missing.append(f"nvidia-cudnn-frontend ({why})")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        missing.append("matplotlib (PNG charts; `ncudnn bench --report DIR` draws them later)")
    return Env(sim, torch_ok, fe is not None, missing)


def mode_of(quick, sim):
    return "sim" if sim else ("quick" if quick else "full")


def _torch_rel_err(out, ref):
    import torch

    o = out.double()
    if o.shape != ref.shape:
        o = o.reshape(ref.shape)
    fin = torch.isfinite(ref)
    if not torch.equal(torch.isfinite(o), fin):
        return float("inf")
    den = ref[fin].norm().item()
    num = (o - ref)[fin].norm().item()
    return num / den if den else num


def _np_rel_err(out, ref):
    from ncudnn.testing import rel_err

    import numpy as np

    ref = np.asarray(ref)
    out = np.asarray(out)
    return rel_err(out.reshape(ref.shape) if out.shape != ref.shape else out, ref)


def impl_names(case, tune=False):
    """Every implementation name a case can have (what is missing on a machine is skipped there)."""
    names = ["ncudnn"] + (["ncudnn-tuned"] if tune else [])
    if case.suite == "conv":
        names += ["torch-nchw", "torch-nchw-tf32", "torch-nhwc", "torch-nhwc-tf32"]
    elif case.suite == "gemm":
        names += ["cublas"] + (["cublas-tf32"] if case.dtype == "float32" else [])
    elif case.suite == "attention":
        names += ["torch-sdpa-cudnn", "torch-sdpa-flash"]
    else:
        names += ["torch"]
    names += ["cudnn-fe"] + (["cudnn-fe-fp32"] if case.dtype == "float32" and case.suite in ("conv", "gemm") else [])
    return names


def case_setup(case, env, tune=False, references=True):
    """(impls, truth_fn, compare, keep) for one case; ``keep`` holds the buffers alive. ``tune``: False,
    True, or the autotuning budget in seconds for ``ncudnn-tuned``."""
    if env.torch_ok:
        inputs = data.torch_inputs(case)
        impls = ncudnn_runners.impls(case, inputs, True, tune)
        if references:
            impls += ref_runners.torch_impls(case, inputs)
            if env.fe_ok:
                impls += ref_runners.fe_impls(case, inputs)
        return impls, lambda: ref_runners.truth(case, inputs), _torch_rel_err, inputs
    host = data.host_inputs(case)
    ins, _ = data.specs(case)
    inputs = {r: data.numba_strided(a, ins[r]) for r, a in host.items()}
    impls = ncudnn_runners.impls(case, inputs, False, tune)
    return impls, lambda: ncudnn_runners.oracle(case, host), _np_rel_err, inputs


#: error texts after which the CUDA context is unusable: the rest of the run is recorded as skipped
STICKY = ("illegal memory access", "ILLEGAL_ADDRESS", "unspecified launch failure", "LAUNCH_FAILED",
          "ILLEGAL_INSTRUCTION", "misaligned address", "MISALIGNED_ADDRESS", "device-side assert")


def skipped_row(case, why):
    return {"case": case.id, "suite": case.suite, "op": case.op, "impl": "ncudnn", "kind": "ncudnn",
            "status": "skipped", "reason": why, "flops": case.flops, "bytes": case.bytes}


#: seconds of autotuning per case for ``ncudnn-tuned`` (configs are timed in the heuristic's order until the
#: budget is spent; the first is always timed): bounds a case's wall time whatever the JIT costs
TUNE_BUDGET_S = {"full": 30.0, "quick": 15.0, "sim": 120.0}
#: default wall-clock budget of a run (minutes) by mode
MAX_MINUTES = {"full": 18, "quick": 4.5, "sim": 10}


def run(cases, env, quick=False, tune=False, max_minutes=None, log=print, on_case=None, tune_budget_s=None):
    """Rows of every case (in order) and the clock. Stops cleanly between cases once ``max_minutes`` have
    passed (the rest recorded as skipped, "suite time budget exhausted"), or on SIGINT / SIGTERM (turned
    into KeyboardInterrupt by the caller): the interrupted case and the rest are recorded as skipped.
    ``on_case(rows, done)`` is called after every case (the CLI rewrites results.json there, so a kill
    loses at most the case under way)."""
    mode = mode_of(quick, env.simulator)
    clock = make_clock(env.torch_ok, env.simulator)
    budget = (BUDGET_S[mode], WARMUP[mode], *REPS[mode])
    tune_s = (tune_budget_s or TUNE_BUDGET_S[mode]) if tune else None
    minutes = MAX_MINUTES[mode] if max_minutes is None else max_minutes
    deadline = time.perf_counter() + 60 * minutes
    rows, lost, stop = [], None, None
    for i, case in enumerate(cases):
        if lost:
            rows.append(skipped_row(case, f"CUDA context lost earlier ({lost})"))
            continue
        if stop is None and time.perf_counter() > deadline:
            stop = "suite time budget exhausted"
            if log:
                log(f"time budget ({minutes} min) spent after {i} of {len(cases)} cases: "
                    f"the remaining {len(cases) - i} are recorded as skipped")
        if stop:
            rows.append(skipped_row(case, stop))
            continue
        if log:
            log(f"[{i + 1}/{len(cases)}] {case.id}  ({case.flops / 1e9:.2f} GFLOP, {case.bytes / 1e6:.1f} MB)")
        t_case = time.perf_counter()
        impls = truth_fn = keep = None
        try:
            # the tuning budget never runs past the run's deadline (at least 1 s: the first plan is always timed)
            tune_case = min(tune_s, max(1.0, deadline - time.perf_counter())) if tune_s else False
            impls, truth_fn, compare, keep = case_setup(case, env, tune_case)
            rows += run_case(case, impls, truth_fn, compare, clock, budget, log)
        except KeyboardInterrupt:
            rows = [r for r in rows if r["case"] != case.id]
            rows.append(skipped_row(case, "interrupted (SIGINT / SIGTERM) while this case ran"))
            stop = "interrupted (SIGINT / SIGTERM) before this case"
            if log:
                log(f"interrupted during case {i + 1} of {len(cases)}: it and the remaining "
                    f"{len(cases) - i - 1} are recorded as skipped")
            continue
        except Exception as e:  # allocation failure and the like: record and go on
            rows.append({"case": case.id, "suite": case.suite, "op": case.op, "impl": "ncudnn", "kind": "ncudnn",
                         "status": "error", "reason": f"setup: {type(e).__name__}: {e}"[:400],
                         "flops": case.flops, "bytes": case.bytes})
        finally:
            keep = impls = truth_fn = None  # noqa: F841
            bad = [r for r in rows if r["case"] == case.id and r["status"] == "error"
                   and any(s in r["reason"] for s in STICKY)]
            if bad:
                lost = f"{case.id} {bad[0]['impl']}: {bad[0]['reason'][:120]}"
                if log:
                    log(f"CUDA context lost: {lost}; the remaining cases are recorded as skipped")
            else:
                _free(env)
        for r in rows:
            if r["case"] == case.id:
                r.setdefault("case_wall_s", time.perf_counter() - t_case)
        if on_case is not None:
            on_case(rows, i + 1)
    return rows, clock


def stop_summary(rows, cases):
    """One line: how many cases ran, were skipped (and why), and the slowest cases by wall time."""
    by = {}
    for r in rows:
        by.setdefault(r["case"], []).append(r)
    skipped = {}
    for c in cases:
        rs = by.get(c.id, [])
        if len(rs) == 1 and rs[0]["status"] == "skipped":
            skipped[rs[0]["reason"]] = skipped.get(rs[0]["reason"], 0) + 1
    ran = len(cases) - sum(skipped.values())
    walls = sorted(((rs[0].get("case_wall_s") or 0, cid) for cid, rs in by.items()), reverse=True)[:3]
    total = sum(rs[0].get("case_wall_s") or 0 for rs in by.values())
    return (f"{ran} of {len(cases)} cases ran ({total:.0f} s of case wall time)"
            + "".join(f"; {n} skipped: {why}" for why, n in skipped.items())
            + ("; slowest: " + ", ".join(f"{cid} {w:.1f} s" for w, cid in walls if w) if walls else ""))


def _free(env):
    if env.torch_ok:
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()
