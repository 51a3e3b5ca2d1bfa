"""Run one fuzz case: generate the graph, plan it under every heuristic mode, run every built plan on
fresh input draws, and compare each execution with the float64 oracle.

One case is one generated graph (``family:seed:case``); its counted executions are (plan, draw)
pairs: every plan ``build_plans(ALL)`` yields over the heuristics of modes A, B and FALLBACK (the
first plan of each mode among them) runs each draw. The oracle runs once per draw, the buffers are
allocated once per graph. Draws go in blocks (:func:`_block`): the block's input images and oracle
outputs are made first, then each plan is selected once and executed on every draw of the block
(pygraph ``select_plan`` + ``execute``), its inputs uploaded again wherever a check found them changed
or another draw's.

An output the oracle leaves undefined for the graph (BN finalize's saved statistics in inference
mode) is checked only for writes outside its view.

Outcomes of a case: ``ok`` (every execution matched), ``wrong`` (an execution's output differs from
the oracle, an element outside an output view or any element of an input changed), ``error`` (a bare
Python exception anywhere, a plan that check_support accepted failing to build or execute),
``refused`` (no engine supports the graph: every engine said why, which is the contract) and
``invalid`` (the graph front end rejected the generated graph with a CudnnError: a generator bug or
an over-strict validation, reported apart).
"""
import re
import time
import traceback

import numpy as np
from numba import cuda

import ncudnn as cudnn
from ..errors import CudnnError
from ..memory import allocate, numpy_dtype
from ..reference.ops import run_node
from .backend_graph import BackendGraph, translatable
from .bind import Buffer, draw_values
from .check import compare, tolerance
from .families import generate
from .spec import draw_rng

MODES = (("A", cudnn.heur_mode.A), ("B", cudnn.heur_mode.B), ("FALLBACK", cudnn.heur_mode.FALLBACK))


class ContextLost(RuntimeError):
    """The CUDA context failed (a kernel faulted): the worker process must restart."""


def repro(family, seed, case, draw=None, engine=None):
    line = f"python -m ncudnn.fuzz --repro {family}:{seed}:{case}"
    if draw is not None:
        line += f" --draw {draw}"
    if engine is not None:
        line += f" --engine {engine}"
    return line


def _plans(g):
    """{index: (name, engine, notes, first-of-modes)} of every plan build_plans(ALL) built, and the
    build failures of plans check_support accepted."""
    firsts = {}
    for label, mode in MODES:
        try:
            g.create_execution_plans([mode])
        except CudnnError:
            continue
        if g.get_execution_plan_count():
            firsts.setdefault(g.get_plan_name_at_index(0), []).append(label)
    g.create_execution_plans([m for _, m in MODES])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    out = {}
    for i in sorted(g._built):
        name = g.get_plan_name_at_index(i)
        out[i] = (name, name.split("(")[0], tuple(g.get_numerical_notes_for_plan_at_index(i)),
                  firsts.get(name, []))
    return out, dict(g._build_errors)


def _oracle(g, spec, bufs, views, by_value, rng_draw):
    """A fresh draw: ({input uid: host image}, {output uid: the oracle's float64 values})."""
    images, vals = {}, {}
    for uid, b in bufs.items():
        if not b.output:
            lo, hi = spec.ranges.get(b.name, (-1.0, 1.0))
            images[uid], vals[uid] = b.image_of(draw_values(rng_draw, b.dims, b.dtype, lo, hi))
    for uid, (src_uid, dims, strides, offset) in views.items():
        vals[uid] = bufs[src_uid].view_of(dims, strides, offset, images[src_uid])
    vals.update(by_value)
    mags = {}
    for node in g.ir.nodes:
        ins = {p: vals[t.uid] if t.uid in vals else np.asarray(t.value, np.float64) for p, t in node.inputs.items()}
        outs = run_node(node, ins)
        for port, t in node.outputs.items():
            if port in outs:
                vals[t.uid] = outs[port]
        if _sums(node):
            for port, m in run_node(node, {p: np.abs(v) for p, v in ins.items()}).items():
                mags[node.outputs[port].uid] = m
    return images, {uid: vals[uid] for uid, b in bufs.items() if b.output and uid in vals}, mags


def _sums(node):
    """True for a reduction that adds (ADD, AVG): its float rounding error is bounded by the sum of the
    magnitudes, not by the result, which cancellation can make arbitrarily small."""
    mode = getattr(node, "mode", None)
    return node.OP == "reduction" and getattr(mode, "name", "") in ("CUDNN_REDUCE_TENSOR_ADD", "CUDNN_REDUCE_TENSOR_AVG")


#: failures of one plan described in a case's result (the plan's wrong / error counts keep counting)
FAILURES_PER_PLAN = 3
#: draws per block at most, and the host bytes a block's images and oracle outputs may take
BLOCK_DRAWS, BLOCK_BYTES = 32, 64 << 20


def _block(bufs, draws):
    """Draws per block: at most BLOCK_DRAWS, and as many as fit BLOCK_BYTES of images and float64
    oracle outputs."""
    per_draw = sum(b.base.nbytes if not b.output else 8 * int(np.prod(b.dims)) for b in bufs.values())
    return max(1, min(draws, BLOCK_DRAWS, BLOCK_BYTES // max(per_draw, 1)))


def _bind(g, spec):
    """Buffers of every non-virtual tensor, the views bound through their source, the by-value scalars
    (uid -> value as the tensor's type holds it) and the variant pack. A by-value scalar goes in the
    pack as the Python number to pygraph and as a one-element host array of the tensor's type to the
    backend API (its data pointers are addresses, as in C)."""
    produced = {t.uid for n in g.ir.nodes for t in n.outputs.values()}
    view_uids = {v._desc.uid: (src._desc.uid, off) for v, (src, off) in (g._views or {}).items()}
    bufs, views, by_value, pack = {}, {}, {}, {}
    for src, _ in (g._views or {}).values():  # a sliced / transposed input the IR reads only through its view
        d = src._desc
        bufs[d.uid] = Buffer(d, False)
        pack[d.uid] = bufs[d.uid].arg
    for uid, d in g.ir.tensors().items():
        if d.is_virtual or uid in bufs:
            continue
        if d.is_by_value:
            name = d.name
            v = spec.scalars.get(name, d.value)
            if name in spec.scalars:
                pack[uid] = np.full(1, v, numpy_dtype(d.dtype)) if isinstance(g, BackendGraph) else v
            by_value[uid] = np.asarray(np.asarray(v).astype(numpy_dtype(d.dtype)), np.float64)
            continue
        if uid in view_uids:
            src, off = view_uids[uid]
            views[uid] = (src, d.dims, d.strides, off)
            continue
        b = Buffer(d, uid in produced)
        bufs[uid] = b
        pack[uid] = b.arg
    return bufs, views, by_value, pack


def _execute(g, pack, ws):
    """Run the selected plan; None, or the error as text (a CudnnError or a bare exception). Raises
    ContextLost when the CUDA context did not survive."""
    try:
        g.execute(pack, ws)
        cuda.synchronize()
    except CudnnError as e:
        return f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - any bare exception is a finding
        msg = f"{type(e).__name__}: {e}"
        try:
            cuda.synchronize()
        except Exception:  # noqa: BLE001
            raise ContextLost(msg) from e
        return msg
    return None


def parts(name):
    """The engines a composite plan runs its parts on, from its name
    (``composite()[reduction(...); pointwise_fused(...); ...]``); () for any other plan."""
    if not name.startswith("composite") or "[" not in name:
        return ()
    inner = name[name.index("[") + 1:]
    return tuple(dict.fromkeys(m.group(1) for m in re.finditer(r"(?:^|; )([a-z0-9_]+)\(", inner)))


def _sample(plans, max_plans, rng):
    """The plans to run: all, or (``max_plans`` given) the first plan of each mode and a seeded sample of
    the rest up to ``max_plans`` (the simulator tier; across cases every plan gets its turn)."""
    if max_plans is None or len(plans) <= max_plans:
        return plans
    keep = [i for i, p in plans.items() if p[3]]
    rest = [i for i in plans if i not in keep]
    extra = max(0, max_plans - len(keep))
    keep += [rest[j] for j in sorted(rng.choice(len(rest), size=min(extra, len(rest)), replace=False))]
    return {i: plans[i] for i in sorted(keep)}


def run_case(family, seed, case, draws=2, engine=None, only_draw=None, verbose=False, max_plans=None, deadline=None):
    """Run case ``family:seed:case``; returns a result dict (see the module docstring). ``engine``
    limits the executions to that engine's plans (composite plans with a part on it included) and
    ``only_draw`` to one draw (repro runs); ``max_plans`` runs a sample of the built plans (see
    :func:`_sample`). Past ``deadline`` (epoch seconds) no further block of draws starts (the first
    always runs); ``cut`` then gives the draws that ran."""
    t0 = time.perf_counter()
    res = {"family": family, "seed": seed, "case": case, "outcome": "ok", "plans": [], "desc": "",
           "executions": 0, "failures": []}

    def fail(kind, what, draw=None, eng=None, row=None):
        if row is None or row["wrong"] + row["errors"] <= FAILURES_PER_PLAN:
            res["failures"].append({"kind": kind, "what": what, "repro": repro(family, seed, case, draw, eng)})
        if kind == "error" or res["outcome"] == "ok":
            res["outcome"] = kind

    try:
        spec = generate(family, seed, case)
        res["desc"], res["front_end"] = spec.desc, spec.front_end
        g = spec.graph
        try:
            g.validate()
        except CudnnError as e:
            res["outcome"], res["why"] = "invalid", f"{type(e).__name__}: {e}"[:300]
            return res
        if spec.front_end == "backend" and translatable(g):
            try:
                g = BackendGraph(g)
            except CudnnError as e:  # a descriptor the backend refused to finalize: the generator's bug
                res["outcome"], res["why"] = "invalid", f"backend API: {type(e).__name__}: {e}"[:300]
                return res
        else:
            res["front_end"] = "pygraph"
        try:
            plans, build_errors = g.backend_plans(MODES) if isinstance(g, BackendGraph) else _plans(g)
        except CudnnError as e:
            why = e.message.replace(f"graph '{g.name}': no engine config from the heuristics. ", "") \
                if hasattr(g, "name") else e.message
            res["outcome"], res["why"] = "refused", f"{e.status.name}: {why}"[:600]
            return res
        for i, why in build_errors.items():
            name = g.get_plan_name_at_index(i) if isinstance(i, int) else f"backend config {i}"
            fail("error", f"plan {name} passed check_support but did not build: {why}", eng=name.split("(")[0])
        res["plans_built"] = len(plans)
        if engine is not None:
            plans = {i: p for i, p in plans.items() if engine == p[1] or engine in parts(p[0])}
        plans = _sample(plans, max_plans, draw_rng(family, seed, case, -1 & 0xFFFF))
        bufs, views, by_value, pack = _bind(g, spec)
        dtypes = [d.dtype for d in g.ir.tensors().values() if not d.is_virtual]
        sizes = [g.get_workspace_size_plan_at_index(i) for i in plans]
        ws = allocate(max(sizes)) if sizes and max(sizes) else None
        res["build_s"] = time.perf_counter() - t0
        rows = {i: {"name": p[0], "engine": p[1], "parts": parts(p[0]), "first_of": p[3], "executions": 0, "wrong": 0,
                    "errors": 0, "tol": tolerance(dtypes, p[2])} for i, p in plans.items()}
        res["plans"] = list(rows.values())
        res["first_draw_s"] = 0.0      # each plan's first execution (its kernels compile at first launch)
        todo = [d for d in range(draws) if only_draw is None or d == only_draw]
        step = _block(bufs, len(todo))
        for start in range(0, len(todo), step):
            if start and deadline is not None and time.time() >= deadline:
                res["cut"] = start
                break
            block = [(d,) + _oracle(g, spec, bufs, views, by_value, draw_rng(family, seed, case, d))
                     for d in todo[start:start + step]]
            for i, row in rows.items():
                g.select_plan(i)
                for d, images, want, mags in block:
                    t1 = time.perf_counter()
                    for uid, b in bufs.items():
                        b.upload(images.get(uid))
                    err = _execute(g, pack, ws)
                    row["executions"] += 1
                    res["executions"] += 1
                    if err is not None:
                        for b in bufs.values():
                            b.clean = False
                        row["errors"] += 1
                        fail("error", f"{row['name']}: execute raised {err}"[:400], d, row["engine"], row)
                        continue
                    bad = _check(bufs, want, row["tol"][1] * spec.tol_scale, mags)
                    if row["executions"] == 1:
                        res["first_draw_s"] += time.perf_counter() - t1
                    if bad:
                        row["wrong"] += 1
                        fail("wrong", f"{row['name']} (tol {row['tol'][0]}): " + "; ".join(bad), d, row["engine"], row)
                    if verbose:
                        print(f"draw {d} {row['name']}: {'; '.join(bad) if bad else 'ok'}")
    except ContextLost:
        raise
    except Exception as e:  # noqa: BLE001 - a bare exception from the library is a finding
        tb = traceback.format_exc(limit=-3).replace("\n", " | ")
        fail("error", f"{type(e).__name__}: {e} [{tb}]"[:600])
    finally:
        res["seconds"] = time.perf_counter() - t0
        res["run_s"] = res["seconds"] - res.get("build_s", res["seconds"])
    return res


def _check(bufs, vals, tol, mags=None):
    bad = []
    for uid, b in bufs.items():
        if not b.output:
            if not b.unchanged():
                bad.append(f"input {b.name} changed")
            continue
        got, same = b.read()
        why = compare(got, vals[uid], b.dtype, tol, (mags or {}).get(uid)) if uid in vals else None
        if why:
            bad.append(f"{b.name}: {why}")
        if not same:
            bad.append(f"{b.name}: elements outside the view changed")
    return bad
