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
    """(impls, truth_fn, compare, keep) for one case; ``keep`` holds the buffers alive."""
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


def _skipped(case, why):
    return {"case": case.id, "suite": case.suite, "op": case.op, "impl": "ncudnn", "kind": "ncudnn",
            "status": "skipped", "reason": why, "flops": case.flops, "bytes": case.bytes}


def run(cases, env, quick=False, tune=False, max_minutes=None, log=print):
    mode = mode_of(quick, env.simulator)
    clock = make_clock(env.torch_ok, env.simulator)
    budget = (BUDGET_S[mode], WARMUP[mode], *REPS[mode])
    deadline = time.perf_counter() + 60 * (max_minutes if max_minutes else {"full": 18, "quick": 4.5, "sim": 10}[mode])
    rows, lost = [], None
    for i, case in enumerate(cases):
        if lost:
            rows.append(_skipped(case, f"CUDA context lost earlier ({lost})"))
            continue
        if time.perf_counter() > deadline:
            rows.append(_skipped(case, "suite time budget exhausted"))
            continue
        if log:
            log(f"[{i + 1}/{len(cases)}] {case.id}  ({case.flops / 1e9:.2f} GFLOP, {case.bytes / 1e6:.1f} MB)")
        try:
            impls, truth_fn, compare, keep = case_setup(case, env, tune)
            rows += run_case(case, impls, truth_fn, compare, clock, budget, log)
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
    return rows, clock


def _free(env):
    if env.torch_ok:
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()
