"""Check, then time: one case against every implementation, each giving one result row.

An :class:`Impl` is a name, a kind ("ncudnn" or "reference") and a ``prepare()`` that builds what it
needs (graph, plan, layout copies, output buffers) and returns a :class:`Prepared`: ``fn()`` runs the
op once, ``result()`` returns its outputs by role. ``prepare`` raises :class:`~bench.graphs.Unsupported`
when the implementation cannot run the case; the row then says "not supported: <reason>".

Before timing, every implementation runs once on outputs poisoned with NaN and each output is compared
with the float64 truth by relative norm ``||out - ref|| / ||ref||`` against :data:`TOL` of the precision
it computes in; a wrong result is recorded and not timed.
"""
import time
import traceback
from dataclasses import dataclass
from typing import Callable

from .graphs import Unsupported
from .timing import measure, gbps, tflops

#: relative-norm tolerances by compute precision (FP32 is looser than ncudnn.testing's 1e-5: reductions
#: here run over up to 4e5 terms -- ResNet-50 wgrad at N=128 -- in any order the engine picks)
TOL = {"float32": 2e-4, "tf32": 5e-3, "float16": 5e-3, "bfloat16": 2e-2, "float64": 1e-10}


@dataclass
class Prepared:
    fn: Callable[[], object]
    result: Callable[[], dict]
    math: str
    detail: str = ""
    build_ms: float = 0.0


@dataclass
class Impl:
    name: str
    kind: str                       # "ncudnn" | "reference"
    prepare: Callable[[], Prepared]


def base_row(case, impl):
    return {"case": case.id, "suite": case.suite, "op": case.op, "impl": impl.name, "kind": impl.kind,
            "status": "ok", "reason": "", "flops": case.flops, "bytes": case.bytes}


def run_impl(case, impl, truth, compare, clock, budget):
    """One result row (dict) for ``impl`` on ``case``; ``truth()`` -> {role: ref}, ``compare(out, ref)`` ->
    relative error; ``budget`` = (seconds, warmup, min_reps, max_reps)."""
    row = base_row(case, impl)
    try:
        prep = impl.prepare()
    except Unsupported as e:
        row.update(status="not supported", reason=str(e))
        return row
    except Exception as e:  # a crash in one implementation must not stop the suite; it is reported
        row.update(status="error", reason=f"prepare: {type(e).__name__}: {e}"[:400],
                   traceback=traceback.format_exc(limit=4))
        return row
    row.update(math=prep.math, detail=prep.detail, build_ms=prep.build_ms)
    try:
        t0 = time.perf_counter()
        prep.fn()
        clock.sync()
        row["first_run_ms"] = (time.perf_counter() - t0) * 1e3  # JIT compilation and binding show here
        ref = truth()
        outs = prep.result()
        errs = {r: compare(o, ref[r]) for r, o in outs.items() if r in ref}
    except Unsupported as e:
        row.update(status="not checked", reason=str(e))
        errs = None
    except Exception as e:
        row.update(status="error", reason=f"first run: {type(e).__name__}: {e}"[:400],
                   traceback=traceback.format_exc(limit=4))
        return row
    tol = TOL.get(prep.math, TOL["float32"])
    if errs is not None:
        worst = max(errs, key=errs.get) if errs else None
        row.update(rel_err={r: float(e) for r, e in errs.items()}, tol=tol)
        if not errs:
            row.update(status="not checked", reason="no output with a reference")
        elif errs[worst] > tol:
            row.update(status="wrong", reason=f"output {worst}: rel err {errs[worst]:.3e} > tol {tol:.1e}")
            return row
    try:
        t = measure(prep.fn, clock, *budget)
    except Exception as e:
        row.update(status="error", reason=f"timing: {type(e).__name__}: {e}"[:400])
        return row
    row.update(t.to_json())
    row["tflops"] = tflops(case.flops, t.median_ms)
    row["gbps"] = gbps(case.bytes, t.median_ms)
    return row


def run_case(case, impls, truth_fn, compare, clock, budget, log=print):
    """Rows for every impl of ``case``; the float64 truth is computed once, on first need."""
    memo = {}

    def truth():
        if "v" not in memo:
            memo["v"] = truth_fn()
        return memo["v"]

    rows = []
    for impl in impls:
        t0 = time.perf_counter()
        row = run_impl(case, impl, truth, compare, clock, budget)
        row["wall_total_s"] = time.perf_counter() - t0
        rows.append(row)
        if log:
            log(format_row(row))
    return rows


def format_row(row):
    if row["status"] in ("ok", "not checked") and "median_ms" in row:
        rate = f"{row['tflops']:8.2f} TFLOP/s" if row["suite"] in ("conv", "gemm", "attention") \
            else f"{row['gbps']:8.1f} GB/s"
        return f"  {row['impl']:18s} {row['median_ms']:10.4f} ms  [{row['p20_ms']:.4f}, {row['p80_ms']:.4f}]  {rate}"
    return f"  {row['impl']:18s} {row['status']}: {row['reason'][:150]}"
