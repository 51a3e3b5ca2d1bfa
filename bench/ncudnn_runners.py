"""How ncudnn runs a case: the pygraph front end (``import ncudnn as cudnn``), as a user would.

The graph comes from :func:`bench.graphs.build` (the one cuDNN's frontend gets too). Two
implementations:

* ``ncudnn``: ``graph.build([heur_mode.A])`` -- the heuristic's first pick, the plan a user gets;
* ``ncudnn-tuned``: the heuristic's first :data:`TUNE_TOP` candidates timed by the engine layer's autotuner
  (``pygraph.autotune`` -> :func:`ncudnn.engines.api.autotune`, results not stored), one at a time in
  the heuristic's order within a per-case time budget (:data:`bench.suite.TUNE_BUDGET_S`), and the
  fastest selected; only when asked (``--tune``).

Buffers are the harness's torch tensors (execute on torch's current stream through the handle) or,
without torch, flat numba device buffers at the case's strides. A graph no engine runs yet is
"not supported" with the engines' reasons.
"""
import time

import numpy as np

from . import data
from .graphs import Unsupported, build
from .harness import Impl, Prepared

TUNE_TOP = 8  # autotune the heuristic's first few configs (each may JIT-compile a kernel)


def _cudnn():
    import ncudnn

    return ncudnn


def missing_engines(g):
    """Subgraph kinds of ``g`` (validated) that no registered engine accepts, or None if unknown."""
    try:
        from ncudnn.engines import registry
        from ncudnn.ir.partition import partition

        kinds = dict.fromkeys(s.kind for s in partition(g.ir)[0])
        have = {k for e in registry.engines() for k in getattr(e, "kinds", ())}
        return [k for k in kinds if k not in have]
    except Exception:
        return None


def _unsupported(e, g=None):
    """A NOT_SUPPORTED CudnnError -> Unsupported (the subgraph kinds without an engine first, then the
    library's message); any other status is an error of ncudnn and propagates (the row says "error")."""
    st = getattr(e, "status", None)
    name = getattr(st, "name", None) or type(e).__name__
    if not name.startswith("CUDNN_STATUS_NOT_SUPPORTED"):
        return e
    miss = missing_engines(g) if g is not None else None
    head = f"no engine for {', '.join(miss)} yet; " if miss else ""
    return Unsupported(f"{head}{name}: {getattr(e, 'message', None) or e}"[:500])


def _math(g, case):
    try:
        notes = g.get_numerical_notes_for_plan_at_index(g.get_selected_plan_index())
    except Exception:
        notes = []
    tc = any("TENSOR_CORE" in str(n) for n in notes)
    return "tf32" if tc and case.dtype == "float32" else case.dtype


def _prepare(case, inputs, torch_ok, tuned):
    def prepare():
        cudnn = _cudnn()
        from ncudnn.errors import CudnnError

        handle = _handle(torch_ok)
        t0 = time.perf_counter()
        g = None
        try:
            g, T, scalars = build(cudnn, case, handle)
            g.build([cudnn.heur_mode.A])
        except CudnnError as e:
            raise _unsupported(e, g) from None
        build_ms = (time.perf_counter() - t0) * 1e3
        ins, outs = data.specs(case)
        if torch_ok:
            bufs = {r: data.torch_poisoned(s) for r, s in outs.items() if r in T}
            ws = _torch_ws(g.get_workspace_size())
            result = lambda: bufs  # noqa: E731
        else:
            bufs = {r: data.numba_poisoned(s) for r, s in outs.items() if r in T}
            ws = _numba_ws(g.get_workspace_size())
            result = lambda: {r: data.numba_read(b, outs[r]) for r, b in bufs.items()}  # noqa: E731
        pack = {T[r]: v for r, v in inputs.items()}
        pack.update({T[r]: v for r, v in bufs.items()})
        pack.update({T[r]: float(v) for r, v in scalars.items()})
        detail = g.get_plan_name_at_index(g.get_selected_plan_index())
        if tuned:
            detail = tune(g, pack, ws, handle, detail, None if tuned is True else float(tuned))
        fn = lambda: g.execute(pack, ws, handle=handle)  # noqa: E731
        return Prepared(fn, result, _math(g, case), detail, build_ms)
    return prepare


def tune(g, pack, ws, handle, detail, budget_s=None, top=TUNE_TOP):
    """Autotune ``g`` over its first ``top`` plans, one plan per engine-layer autotune call, in the
    heuristic's order, until ``budget_s`` seconds are spent (the first plan is always timed; None: no
    budget); selects the fastest and returns the row's detail text (which plan, how many timed)."""
    from ncudnn.errors import CudnnError

    n = min(g.get_execution_plan_count(), top)
    t0, timed, err = time.perf_counter(), [], None
    for i in range(n):
        if timed and budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
        try:
            timed += g.autotune(pack, ws, handle=handle, store=False, indices={i})
        except CudnnError as e:
            err = e
    if not timed:
        if err is not None:
            raise _unsupported(err) from None
        return detail
    best = min(timed, key=lambda r: r[2])
    g.select_plan(best[0])
    spent = time.perf_counter() - t0
    cut = f", budget {budget_s:.0f} s spent" if len(timed) < n and budget_s is not None else ""
    return f"{best[1]} (fastest of {len(timed)} timed of {n}; {spent:.1f} s{cut})"


_HANDLES = {}


def _handle(torch_ok):
    """One ncudnn handle per process (on torch's current stream when torch runs the references)."""
    if torch_ok not in _HANDLES:
        cudnn = _cudnn()
        h = cudnn.create_handle()
        if torch_ok:
            import torch

            cudnn.set_stream(h, torch.cuda.current_stream().cuda_stream)
        _HANDLES[torch_ok] = h
    return _HANDLES[torch_ok]


def _torch_ws(n):
    import torch

    return torch.empty(max(n, 1), device="cuda", dtype=torch.uint8) if n else None


def _numba_ws(n):
    from numba import cuda

    return cuda.device_array(n, dtype=np.uint8) if n else None


def impls(case, inputs, torch_ok, tune=False):
    """``ncudnn`` (and ``ncudnn-tuned`` when ``tune``: True, or the tuning budget in seconds)."""
    out = [Impl("ncudnn", "ncudnn", _prepare(case, inputs, torch_ok, False))]
    if tune:
        out.append(Impl("ncudnn-tuned", "ncudnn", _prepare(case, inputs, torch_ok, tune)))
    return out


# ------------------------------------------------------------------------------ float64 oracle (no torch)

ORACLE_MAX_FLOPS = 5e9  # the NumPy oracle is the truth without torch; past this it takes too long


def oracle(case, host):
    """role -> float64 NumPy array from ncudnn's reference (NumPy) over the case's graph."""
    if case.flops > ORACLE_MAX_FLOPS:
        raise Unsupported(f"no torch for a reference, and the NumPy oracle is too slow at {case.flops:.2e} FLOP")
    cudnn = _cudnn()
    from ncudnn.reference.ops import run_graph

    g, T, scalars = build(cudnn, case, None)
    g.validate()
    tens = g.ir.tensors()
    for r, v in scalars.items():
        tens[T[r].get_uid()].value = np.float32(v)
    values = {T[r].get_uid(): np.asarray(a, dtype=np.float64) for r, a in host.items()}
    env = run_graph(g.ir, values)
    _, outs = data.specs(case)
    return {r: env[T[r].get_uid()] for r in outs if r in T and T[r].get_uid() in env}
