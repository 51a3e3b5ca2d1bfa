"""GPU probe: FP32 batch-norm training forward and backward (N32 C256 56x56, NHWC and NCHW) -- the
norm_batch engine's KERNEL_CFG / OCCUPANCY / ARRAY_SIZE_PER_THREAD variants beside torch and
cudnn-frontend, all in one process.

Run on the GPU machine (torch with CUDA, nvidia-cudnn-frontend for the cudnn-fe line; about a minute)::

    python3 experiments/probe_bn.py                     # every group
    python3 experiments/probe_bn.py nhwc_fwd nhwc_bwd   # only the groups named (see GROUPS)
    python3 experiments/probe_bn.py --dry               # build every plan, run nothing (simulator, no torch)
    python3 experiments/probe_bn.py --set tree nhwc_bwd nhwc_fwd   # the tree-combine / aligned-chunk variants
    python3 experiments/probe_bn.py --set persist nhwc_bwd         # the one-kernel (cooperative) backward variants

What it measures: the bench's case (bench.cases.norm_cases: same dims, strides, inputs from
bench.data.torch_inputs, float64 truth from bench.ref_runners.truth). Each ncudnn variant is an engine
config built through the engine API (``api.build_plan``) and run as a user runs it
(``ExecutionPlan.execute`` on torch tensors, torch's current stream); torch is F.batch_norm (training) /
native_batch_norm_backward on the case's layout (channels_last for NHWC); cudnn-fe is the bench's
cudnn-frontend graph (heuristics A then FALLBACK). Every implementation's outputs are first compared with the
float64 truth: max |err| / max |truth| over every output (y or dx, and the statistics / dscale, dbias;
"BAD" past 1e-4). Then timed: per rep an L2 flush (a 256 MB write), CUDA events around one run; median
of REPS reps (experiments/probe_timing.py). GB/s = the case's bytes (x read + y written; backward x, dy read +
dx written) / time; "vs fe" = cudnn-fe time / ours (> 1: faster than cuDNN). For the default and the
every variant the time of each kernel launch alone (flushed, median of 10) is printed under it.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import cases as bcases  # noqa: E402
from bench import data as bdata  # noqa: E402
from ncudnn.engines import api  # noqa: E402
from ncudnn.engines.norm.bn_steps import COLS_LABELS, PLANES_LABELS  # noqa: E402
from ncudnn.ir import NormBwd, NormFwd, OpGraph, TensorDesc  # noqa: E402
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnBackendNormFwdPhase_t as PH,  # noqa: E402
                          cudnnBackendNormMode_t as NM, cudnnDataType_t as DT)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_timing import flushed_median_ms  # noqa: E402

REPS = 30
FLUSH_BYTES = 256 << 20
KC, KO, KU = K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_OCCUPANCY, K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD
F32 = DT.CUDNN_DATA_FLOAT
FWD_PORTS = {"x": "X", "scale": "SCALE", "bias": "BIAS", "running_mean": "INPUT_RUNNING_MEAN",
             "running_var": "INPUT_RUNNING_VAR", "y": "Y", "mean": "MEAN", "inv_var": "INV_VARIANCE",
             "next_running_mean": "OUTPUT_RUNNING_MEAN", "next_running_var": "OUTPUT_RUNNING_VAR"}
BWD_PORTS = {"x": "X", "dy": "DY", "scale": "SCALE", "mean": "MEAN", "inv_var": "INV_VARIANCE", "dx": "DX",
             "dscale": "DSCALE", "dbias": "DBIAS"}


def _case(op, layout):
    return next(c for c in bcases.norm_cases() if c.op == op and c.name.endswith(layout))


def graph(case):
    """(IR graph, role -> uid) with the case's dims and strides."""
    ins, outs = bdata.specs(case)
    ports = FWD_PORTS if case.op == "batchnorm_fwd" else BWD_PORTS
    uid, roles, gi, go = 1, {}, {}, {}
    for role, s in list(ins.items()) + list(outs.items()):
        t = TensorDesc(uid, tuple(s.dims), tuple(s.strides), F32, name=role)
        roles[role] = uid
        (gi if role in ins else go)[ports[role]] = t
        uid += 1
    if case.op == "batchnorm_fwd":
        gi["EPSILON"] = TensorDesc(90, (1,), (1,), F32, is_by_value=True, value=1e-5, name="eps")
        gi["EXP_AVG_FACTOR"] = TensorDesc(91, (1,), (1,), F32, is_by_value=True, value=0.1, name="momentum")
        node = NormFwd("bn", gi, go, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)
    else:
        node = NormBwd("bn_bwd", gi, go, mode=NM.CUDNN_BATCH_NORM)
    return OpGraph([node]).finalize(), roles


def variants(case, vset="all"):
    """Knob settings (dicts) to try, most important first. ``vset`` "tree": the default, the fused
    combine variants beside it (fin: 32 channels per block; fin8 / fin4: the many-block tree; _al: aligned
    chunks, the last rows loaded at once) and their occupancy / unroll neighbours."""
    if case.layout != "nhwc":
        return [dict(), {KC: 1}]
    if vset == "persist":
        lab = COLS_LABELS.index
        out = [dict(), {KC: lab("colsv4_rev_hint_fin4_al"), KO: 3}]
        if case.op == "batchnorm_bwd":
            out += [{KC: i} for i, n in enumerate(COLS_LABELS) if n.startswith("persist_")]
        return out
    if vset == "tree":
        lab = COLS_LABELS.index
        out = [dict()] + [{KC: lab(n)} for n in ("colsv4_rev_hint_fin", "colsv4_rev_hint_fin8", "colsv4_rev_hint_fin4",
                                                 "colsv4_rev_hint_fin_al", "colsv4_rev_hint_fin8_al",
                                                 "colsv4_rev_hint_fin4_al")]
        if case.op == "batchnorm_bwd":
            for n in ("colsv4_rev_hint_fin4", "colsv4_rev_hint_fin4_al"):
                out += [{KC: lab(n), KO: 3}, {KC: lab(n), KO: 5}, {KC: lab(n), KU: 2}, {KC: lab(n), KU: 8}]
            out += [{KC: lab("colsv4_rev_hint_fin4_al"), KU: 6}, {KC: lab("colsv4_rev_hint_fin8_al"), KO: 3}]
        else:
            out += [{KC: lab("colsv4_rev_hint_fin4_al"), KU: 2}, {KC: lab("colsv4_rev_hint_fin4"), KU: 2}]
        return out
    out = [dict()] + [{KC: v} for v in range(len(COLS_LABELS))]
    out += [{KC: 6, KO: o} for o in (3, 4, 6, 8)] + [{KC: 6, KU: u} for u in (2, 8)]
    return out


def _label(cfg, layout):
    c = cfg.get(KC, 0)
    if layout != "nhwc":
        return f"ncudnn[{PLANES_LABELS[c]}]"
    return f"ncudnn[{COLS_LABELS[c] if c < len(COLS_LABELS) else c} occ={cfg.get(KO, 0)} unroll={cfg.get(KU, 4)}]"


def configs(g, vs, layout):
    first = api.get_heuristics(g)[0].config
    out, seen = [], set()
    for knobs in vs:
        cfg = first
        for k, v in knobs.items():
            cfg = cfg.with_knob(k, v)
        if cfg in seen:
            continue
        seen.add(cfg)
        st, why = api.check_support(g, cfg)
        out.append((_label(cfg, layout) + (" (default)" if cfg == first else ""), cfg if int(st) == 0 else None, why))
    return first, out


def relerr(got, want):
    worst = 0.0
    for role, w in want.items():
        if role not in got:
            continue
        e = (got[role].double() - w).abs().max().item() / max(w.abs().max().item(), 1e-30)
        worst = max(worst, e if e == e else float("inf"))
    return worst


def _row(label, ms, nbytes, fe_ms, err=""):
    gbs = nbytes / (ms * 1e-3) / 1e9
    vs = f"vs fe {fe_ms / ms:5.2f}x" if fe_ms else "vs fe   -  "
    return f"  {label:50s} {ms:8.4f} ms {gbs:7.0f} GB/s {vs} {err}"


def per_launch(plan, pack, ws, torch, flush):
    """ms of each kernel launch of the plan's first part, each alone with a flushed L2."""
    from ncudnn import memory

    part = plan.parts[0]
    views = {u: memory.as_view(t) for u, t in pack.items() if not isinstance(t, (int, float))}
    stream = torch.cuda.current_stream().cuda_stream
    launches = part.launches(views, memory.as_view(ws))
    out = []
    for step, pl in zip(part.steps, launches):
        ms = flushed_median_ms(lambda: pl.run(None, stream), torch, flush, 10)
        out.append(f"{step.name}{list(step.grid) if isinstance(step.grid, tuple) else step.grid} {ms:.4f}")
    return "    launches: " + " | ".join(out)


def run_group(key, torch, flush, budget_end, vset="all"):
    from bench import ref_runners as rr

    op, layout = {"nhwc_fwd": ("batchnorm_fwd", "nhwc"), "nhwc_bwd": ("batchnorm_bwd", "nhwc"),
                  "nchw_fwd": ("batchnorm_fwd", "nchw"), "nchw_bwd": ("batchnorm_bwd", "nchw")}[key]
    case = _case(op, layout)
    inputs = bdata.torch_inputs(case)
    truth = rr.truth(case, inputs)
    print(f"== {case.op} {case.name} ({case.bytes / 1e6:.1f} MB counted)", flush=True)
    fe_ms = None
    for name, prep in (("cudnn-fe", rr._prepare_fe(case, inputs, False)),
                       ("torch", rr._prepare_torch(case, inputs, layout, False))):
        try:
            p = prep()
            p.fn()
            torch.cuda.synchronize()
            err = relerr(p.result(), truth)
            ms = flushed_median_ms(p.fn, torch, flush, REPS)
            if name == "cudnn-fe":
                fe_ms = ms
            print(_row(name, ms, case.bytes, fe_ms, f"relerr {err:.1e}{'  BAD' if err > 1e-4 else ''}  {p.detail[:90]}"),
                  flush=True)
        except Exception as e:   # a reference failing must not hide the others
            print(f"  {name:50s} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
    g, roles = graph(case)
    first, cfgs = configs(g, variants(case, vset), case.layout)
    _, outs = bdata.specs(case)
    pack = {roles[r]: t for r, t in inputs.items()}
    results = []
    for label, cfg, why in cfgs:
        if cfg is None:
            print(f"  {label:50s} refused: {why[:120]}")
            continue
        if time.time() > budget_end and cfg != first:
            print(f"  {label:50s} skipped (time budget)")
            continue
        try:
            t0 = time.time()
            plan = api.build_plan(g, cfg)
            ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
            got = {r: bdata.torch_poisoned(s) for r, s in outs.items()}
            pk = dict(pack)
            pk.update({roles[r]: t for r, t in got.items()})
            stream = torch.cuda.current_stream().cuda_stream
            fn = lambda: plan.execute(pk, ws, stream)  # noqa: E731
            fn()
            torch.cuda.synchronize()
            err = relerr(got, truth)
            build_s = time.time() - t0
            ms = flushed_median_ms(fn, torch, flush, REPS)
        except Exception as e:   # a variant failing must not hide the others
            print(f"  {label:50s} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        results.append((ms, label, cfg, plan, pk, ws))
        print(_row(label, ms, case.bytes, fe_ms, f"relerr {err:.1e}{'  BAD' if err > 1e-4 else ''} "
                   f"(build {build_s:.1f} s)"), flush=True)
        try:
            print(per_launch(plan, pk, ws, torch, flush), flush=True)
        except Exception as e:
            print(f"    launches: ERROR {type(e).__name__}: {str(e)[:160]}")
    if results:
        best = min(results, key=lambda r: r[0])
        dflt = [r for r in results if r[2] == first]
        print(f"  -> fastest: {best[1]} {best[0]:.4f} ms" + (f" ({fe_ms / best[0]:.2f}x cudnn-fe)" if fe_ms else "")
              + (f"; default {dflt[0][0]:.4f} ms" if dflt else ""))
    print(flush=True)


GROUPS = ("nhwc_fwd", "nhwc_bwd", "nchw_fwd", "nchw_bwd")


def _group_case(key):
    return _case("batchnorm_fwd" if key.endswith("fwd") else "batchnorm_bwd", key[:4])


def compile_one(key, index, vset="all"):
    """Worker: build variant ``index`` of group ``key`` (its kernels land in the on-disk kernel cache)."""
    t0 = time.time()
    case = _group_case(key)
    g, _ = graph(case)
    _, cfgs = configs(g, variants(case, vset), case.layout)
    cfg = cfgs[index][1]
    if cfg is not None:
        api.build_plan(g, cfg)
    return time.time() - t0


def precompile(keys, jobs, deadline, vset="all"):
    """Every variant's kernels compiled by ``jobs`` spawned workers first (the timing process then loads
    cubins from the kernel cache); unfinished work is stopped at ``deadline``."""
    import concurrent.futures as cf
    import multiprocessing as mp

    tasks = []
    for k in keys:
        case = _group_case(k)
        tasks += [(k, i) for i in range(len(configs(graph(case)[0], variants(case, vset), case.layout)[1]))]
    t0 = time.time()
    ex = cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"))
    futs = [ex.submit(compile_one, k, i, vset) for k, i in tasks]
    done, pending = cf.wait(futs, timeout=max(deadline - time.time(), 1))
    errs = [f.exception() for f in done if f.exception() is not None]
    for e in errs[:5]:
        print(f"# compile error {type(e).__name__}: {str(e)[:200]}", flush=True)
    print(f"# precompile: {len(done)} of {len(tasks)} plans on {jobs} workers in {time.time() - t0:.1f} s", flush=True)
    procs = list(getattr(ex, "_processes", {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    if pending:
        for p in procs:
            p.terminate()


def dry(keys, vset="all"):
    for key in keys:
        op, layout = ("batchnorm_fwd" if key.endswith("fwd") else "batchnorm_bwd"), key[:4]
        case = _case(op, layout)
        g, _ = graph(case)
        first, cfgs = configs(g, variants(case, vset), case.layout)
        print(f"== {key}: heuristic first {first}")
        for label, cfg, why in cfgs:
            if cfg is None:
                print(f"  {label:50s} refused: {why[:120]}")
                continue
            plan = api.build_plan(g, cfg)
            print(f"  {label:50s} built: {[s.name for s in plan.parts[0].steps]} ws {plan.workspace_size}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="*", help=f"groups to run (default all): {', '.join(GROUPS)}")
    ap.add_argument("--dry", action="store_true", help="check and build every config, run nothing")
    ap.add_argument("--set", default="all", choices=("all", "tree", "persist"), help="which NHWC variants (see variants())")
    ap.add_argument("--budget", type=float, default=75.0, help="seconds after which variants are skipped")
    ap.add_argument("--jobs", type=int, default=min(12, max(1, (os.cpu_count() or 2) - 2)),
                    help="worker processes compiling every variant first (1: compile while timing)")
    args = ap.parse_args(argv)
    keys = args.groups or list(GROUPS)
    bad = [k for k in keys if k not in GROUPS]
    if bad:
        ap.error(f"unknown groups {bad}; known: {list(GROUPS)}")
    if args.dry:
        dry(keys, args.set)
        return 0
    t_start = time.time()
    if args.jobs > 1:
        precompile(keys, args.jobs, t_start + 0.4 * args.budget, args.set)
    import torch

    torch.backends.cudnn.benchmark = False
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"median of {REPS} reps, L2 flushed ({FLUSH_BYTES >> 20} MB) before each", flush=True)
    end = t_start + args.budget
    for key in keys:
        run_group(key, torch, flush, end, args.set)
    return 0


if __name__ == "__main__":
    sys.exit(main())
