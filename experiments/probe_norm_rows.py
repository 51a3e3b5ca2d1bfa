"""GPU probe: norm_rows layer / RMS norm variants beside torch and cuDNN's graph API (cudnn-frontend).

Run from the repo root on the GPU machine (about 60-90 s with every JIT compile; ``--jobs 12`` compiles every
variant first in 12 processes through a temporary disk kernel cache, removed at the end)::

    python3 experiments/probe_norm_rows.py                 # every group
    python3 experiments/probe_norm_rows.py bwd1024 fwd_ln   # only the groups named (see GROUPS)
    python3 experiments/probe_norm_rows.py --dry           # check and build every config, run nothing (simulator)
    python3 experiments/probe_norm_rows.py --jobs 12 --reps 50 sub_ln sub_rms sub_ln4096 sub_rms4096 sub_ln sub_rms
                                                     # the sub-block forward variants (a group named twice runs twice)

Groups are the H200 benchmark's FP32 cases (bench/cases.py norm_cases, same tensors: dims (rows, cols, 1, 1),
statistics (rows, 1, 1, 1), scale / bias / dscale / dbias (1, cols, 1, 1)): LayerNorm backward 8192x4096 and
8192x1024 (dx, dscale, dbias), LayerNorm and RMSNorm training forward 8192x1024 (y and the statistics).

Per group, in one process on the same inputs (bench.data.torch_inputs, seed 0): torch (the bench's torch
reference), cudnn-fe (cuDNN's graph API through ``import cudnn``, the graph of bench/graphs.py, heuristics
A then FALLBACK) and each ncudnn variant: an engine config (the heuristic's first config with knobs set)
built with ``api.build_plan`` and run with ``ExecutionPlan.execute`` on torch tensors on torch's stream.
Each is checked against the float64 truth (bench/ref_runners.truth): the max over output roles of max abs
error / max |truth| is printed as relerr ("BAD" past 1e-4); then timed: per rep an L2 flush (256 MB
write), CUDA events around one run, median of REPS (experiments/probe_timing.py). GB/s counts the bench's bytes
(every input read once, every output written once: bench/cases.py); "vs fe" = cudnn-fe time / ours (> 1:
faster than cuDNN). The last line names the fastest ncudnn variant and the heuristic's default.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repo root: bench

from ncudnn.engines import api                                          # noqa: E402
from ncudnn.ir import NormBwd, NormFwd, OpGraph, TensorDesc             # noqa: E402
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnBackendNormFwdPhase_t as PH,  # noqa: E402
                          cudnnBackendNormMode_t as NM, cudnnDataType_t as DT)
from probe_timing import flushed_median_ms                              # noqa: E402

F32 = DT.CUDNN_DATA_FLOAT
REPS = 25
FLUSH_BYTES = 256 << 20
COPY_GBPS = 4210.0
KB, KR, KL, KC, KW, KS = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_LOAD_SIZE,
                          K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_CTA_COUNT, K.CUDNN_KNOB_TYPE_STAGES)
NAMES = {KB: "BLOCK", KR: "ROWS", KL: "LOAD", KC: "KCFG", KW: "CTAS", KS: "STAGES"}
#: role -> uid of the ncudnn graph's tensors
UID = {"x": 1, "scale": 2, "bias": 3, "mean": 4, "inv_var": 5, "dy": 6,
       "y": 10, "dx": 10, "dscale": 11, "dbias": 12, "mean_out": 11, "inv_out": 12}


def case(op, rows, cols):
    from bench.cases import mem_case

    e = rows * cols
    if op == "layernorm_bwd":
        return mem_case("norm", op, f"{rows}x{cols}", dict(rows=rows, cols=cols), 2 * e, e, 6)
    return mem_case("norm", op, f"{rows}x{cols}", dict(rows=rows, cols=cols), e, e, 8)


def ir_graph(c):
    """The ncudnn IR graph of bench case ``c`` (FP32), tensors at the bench's dims and strides."""
    from bench.data import specs

    ins, outs = specs(c)
    def d(role, uid=None):
        sp = ins.get(role) or outs[role]
        return TensorDesc(UID[role] if uid is None else uid, tuple(sp.dims), tuple(sp.strides), F32, name=role)

    eps = TensorDesc(20, (1, 1, 1, 1), (1, 1, 1, 1), F32, is_by_value=True, value=1e-5, name="eps")
    if c.op == "layernorm_bwd":
        node = NormBwd("bwd", {"X": d("x"), "DY": d("dy"), "SCALE": d("scale"), "MEAN": d("mean"),
                               "INV_VARIANCE": d("inv_var")},
                       {"DX": d("dx"), "DSCALE": d("dscale"), "DBIAS": d("dbias")}, mode=NM.CUDNN_LAYER_NORM)
        return OpGraph([node]).finalize(), {"dx": 10, "dscale": 11, "dbias": 12}
    ln = c.op == "layernorm_fwd"
    ins_ = {"X": d("x"), "SCALE": d("scale"), "EPSILON": eps}
    outs_ = {"Y": d("y"), "INV_VARIANCE": d("inv_var", 12)}
    roles = {"y": 10, "inv_var": 12}
    if ln:
        ins_["BIAS"] = d("bias")
        outs_["MEAN"] = d("mean", 11)
        roles["mean"] = 11
    node = NormFwd("fwd", ins_, outs_, mode=NM.CUDNN_LAYER_NORM if ln else NM.CUDNN_RMS_NORM,
                   phase=PH.CUDNN_NORM_FWD_TRAINING)
    return OpGraph([node]).finalize(), roles


def _bwd_variants(cols):
    """(BLOCK, ROWS, CTAS, STAGES) of the fused kernel (0: the kernel layer's choice; STAGES 2 loads the
    next row group early, 1 does not)."""
    out = [dict(), {KC: 0, KL: 0}]                                # default first, then the two-pass path
    if cols <= 1024:
        geoms = [(0, 0, 0, 1), (0, 2, 0, 0), (0, 0, 3, 0), (0, 0, 1, 0), (128, 2, 2, 2), (256, 2, 0, 2),
                 (256, 4, 2, 2), (128, 8, 1, 2)]
    else:
        geoms = [(0, 0, 0, 1), (0, 1, 0, 0), (256, 1, 0, 1), (256, 2, 0, 2), (256, 1, 0, 2), (512, 1, 2, 2),
                 (1024, 1, 0, 1), (128, 1, 0, 1)]
    out += [{KC: 1, KL: 16, KB: b, KR: r, KW: w, KS: st} for b, r, w, st in geoms]
    return out


def _fwd_variants():
    out = [dict()] + [{KW: w} for w in (4, 8, 16)]                  # the default, persistent grids of it
    out += [{KW: w, KS: 2} for w in (4, 8, 16)]                     # ... loading the next row early
    out += [{KB: 32, KR: 4, KL: 16}, {KB: 32, KR: 4, KL: 16, KW: 8}, {KB: 32, KR: 4, KL: 16, KW: 8, KS: 2},
            {KB: 32, KR: 8, KL: 16}, {KB: 256, KL: 16}, {KB: 256, KL: 16, KW: 4, KS: 2}]
    return out


def _sub_variants(cols, rms=False):
    """The sub-block forward (KERNEL_CFG 1..8: 1 two-pass stats, 2 shifted one-pass, 3 / 4 the same with .cs
    stores, 5 / 6 with .cs stores and .cs loads of x, 7 / 8 with .cs loads of x only; BLOCK threads a row, ROWS rows a block, STAGES 1 scale / bias loaded before the reductions),
    after the default and its equivalent in the new kernel."""
    if cols <= 1024:
        geoms = [(1, 32, 4, 0), (2, 32, 4, 0), (1, 32, 4, 1), (3, 32, 4, 0), (1, 32, 8, 0), (1, 64, 2, 0),
                 (2, 64, 2, 0), (2, 64, 2, 1), (4, 64, 2, 0), (2, 64, 1, 0), (2, 64, 4, 0), (2, 128, 1, 0),
                 (4, 128, 1, 0), (2, 128, 2, 0), (5, 32, 4, 0), (6, 64, 2, 0), (6, 128, 1, 0)]
    else:
        geoms = [(2, 256, 1, 0), (4, 256, 1, 0), (6, 256, 1, 0), (1, 256, 1, 0), (2, 128, 1, 0)]
    if rms:     # RMS norm has one reduction: two-pass (odd KERNEL_CFG) and shifted (even) are the same kernel
        geoms = list(dict.fromkeys((kc + kc % 2, b, r, st) for kc, b, r, st in geoms))
    return [dict()] + [{KC: kc, KB: b, KR: r, KS: st, KL: 16} for kc, b, r, st in geoms]


def _csx_variants(rms=False):
    """x loaded with the streaming hint, y stored plainly (KERNEL_CFG 7 / 8), beside their plain twins."""
    geoms = [(2, 128, 1, 0), (8, 128, 1, 0), (2, 128, 1, 1), (8, 128, 1, 1), (7, 128, 1, 0), (2, 32, 4, 1),
             (8, 32, 4, 1), (2, 64, 2, 0), (8, 64, 2, 0), (8, 64, 1, 0), (8, 256, 1, 0)]
    if rms:
        geoms = list(dict.fromkeys((kc + kc % 2, b, r, st) for kc, b, r, st in geoms))
    return [dict()] + [{KC: kc, KB: b, KR: r, KS: st, KL: 16} for kc, b, r, st in geoms]


def _rpt_variants(rms=False):
    """Several rows a thread (KERNEL_CFG 9 / 10: 2 rows, 11 / 12: 4 rows; odd two-pass, even shifted), scale /
    bias loaded once for them, beside the one-row kernel they extend."""
    geoms = [(2, 128, 1, 1), (10, 128, 1, 1), (9, 128, 1, 1), (12, 128, 1, 1), (11, 128, 1, 1), (10, 128, 1, 0),
             (10, 64, 1, 1), (10, 32, 4, 1), (12, 32, 4, 1), (10, 256, 1, 1), (10, 64, 2, 1)]
    if rms:
        geoms = list(dict.fromkeys((kc + kc % 2, b, r, st) for kc, b, r, st in geoms))
    return [dict()] + [{KC: kc, KB: b, KR: r, KS: st, KL: 16} for kc, b, r, st in geoms]


def _l2_variants(rms=False, cols=1024):
    """L2 eviction policies (KERNEL_CFG 13: x evict-first; 14: x evict-first, y evict-last; 15: y evict-last; 16: x and
    y evict-first) on the default geometry (LN 128 threads a row; RMS one warp a row, 4 rows a block) and one more."""
    geoms = [(128, 1, 1), (32, 4, 1), (64, 2, 1)] if cols <= 1024 else [(256, 1, 1)]
    if rms:
        geoms = [geoms[1], geoms[0], geoms[2]] if cols <= 1024 else geoms
    return [dict()] + [{KC: kc, KB: b, KR: r, KS: st, KL: 16} for b, r, st in geoms for kc in (13, 14, 15, 16)]


GROUPS = {
    "l2_ln": ("LayerNorm fwd training FP32 8192x1024, L2 policies", lambda: case("layernorm_fwd", 8192, 1024),
              _l2_variants()),
    "l2_rms": ("RMSNorm fwd training FP32 8192x1024, L2 policies", lambda: case("rmsnorm_fwd", 8192, 1024),
               _l2_variants(True)),
    "l2_ln4096": ("LayerNorm fwd training FP32 8192x4096, L2 policies", lambda: case("layernorm_fwd", 8192, 4096),
                  _l2_variants(cols=4096)),
    "rpt_ln": ("LayerNorm fwd training FP32 8192x1024, rows a thread", lambda: case("layernorm_fwd", 8192, 1024),
               _rpt_variants()),
    "rpt_rms": ("RMSNorm fwd training FP32 8192x1024, rows a thread", lambda: case("rmsnorm_fwd", 8192, 1024),
                _rpt_variants(True)),
    "rpt_ln4096": ("LayerNorm fwd training FP32 8192x4096, rows a thread",
                   lambda: case("layernorm_fwd", 8192, 4096),
                   [dict()] + [{KC: kc, KB: b, KR: 1, KS: 1, KL: 16} for kc, b in ((2, 256), (10, 256), (9, 256))]),
    "csx_ln": ("LayerNorm fwd training FP32 8192x1024, .cs loads of x", lambda: case("layernorm_fwd", 8192, 1024),
               _csx_variants()),
    "csx_rms": ("RMSNorm fwd training FP32 8192x1024, .cs loads of x", lambda: case("rmsnorm_fwd", 8192, 1024),
                _csx_variants(True)),
    "bwd4096": ("LayerNorm bwd FP32 8192x4096 (dx, dscale, dbias)", lambda: case("layernorm_bwd", 8192, 4096),
                _bwd_variants(4096)),
    "bwd1024": ("LayerNorm bwd FP32 8192x1024 (dx, dscale, dbias)", lambda: case("layernorm_bwd", 8192, 1024),
                _bwd_variants(1024)),
    "fwd_ln": ("LayerNorm fwd training FP32 8192x1024", lambda: case("layernorm_fwd", 8192, 1024), _fwd_variants()),
    "fwd_rms": ("RMSNorm fwd training FP32 8192x1024", lambda: case("rmsnorm_fwd", 8192, 1024), _fwd_variants()),
    "sub_ln": ("LayerNorm fwd training FP32 8192x1024, sub-block kernel",
               lambda: case("layernorm_fwd", 8192, 1024), _sub_variants(1024)),
    "sub_rms": ("RMSNorm fwd training FP32 8192x1024, sub-block kernel",
                lambda: case("rmsnorm_fwd", 8192, 1024), _sub_variants(1024, True)),
    "sub_ln4096": ("LayerNorm fwd training FP32 8192x4096, sub-block kernel",
                   lambda: case("layernorm_fwd", 8192, 4096), _sub_variants(4096)),
    "sub_rms4096": ("RMSNorm fwd training FP32 8192x4096, sub-block kernel",
                    lambda: case("rmsnorm_fwd", 8192, 4096), _sub_variants(4096, True)),
}


def _label(cfg, default):
    diff = [f"{NAMES.get(K(k), K(k).name)}={v}" for k, v in cfg.knobs if dict(default.knobs).get(k) != v]
    return f"ncudnn[{' '.join(diff) or 'default'}]"


def configs(g, variants):
    """(heuristic first config, [(label, Config or None, why)])."""
    ecs = api.get_heuristics(g)
    first = ecs[0].config
    out, seen = [], set()
    for knobs in variants:
        cfg = first
        for k, v in knobs.items():
            cfg = cfg.with_knob(k, v)
        if cfg in seen:
            continue
        seen.add(cfg)
        st, why = api.check_support(g, cfg)
        out.append((_label(cfg, first), cfg if int(st) == 0 else None, "" if int(st) == 0 else why))
    return first, out


def _relerr(got, want):
    worst = 0.0
    for role, ref in want.items():
        if role not in got:
            continue
        den = ref.abs().max().item() or 1.0
        worst = max(worst, (got[role].double().reshape(ref.shape) - ref).abs().max().item() / den)
    return worst


def _row(label, ms, nbytes, fe_ms, note=""):
    gbs = nbytes / (ms * 1e-3) / 1e9
    vs = f"vs fe {fe_ms / ms:5.2f}x" if fe_ms else "vs fe   -  "
    return f"  {label:52s} {ms:8.4f} ms {gbs:7.0f} GB/s {100 * gbs / COPY_GBPS:5.1f}%BW {vs} {note}"


def run_group(key, torch, flush, end):
    from bench import data, ref_runners

    title, make, variants = GROUPS[key]
    c = make()
    g, roles = ir_graph(c)
    first, cfgs = configs(g, variants)
    inputs = data.torch_inputs(c)
    want = ref_runners.truth(c, inputs)
    want = {r: v for r, v in want.items() if r in roles}
    print(f"== {title}  (bench bytes {c.bytes / 1e6:.1f} MB; heuristic first {first})", flush=True)
    refs = {}
    for impl in ref_runners.torch_impls(c, inputs) + ref_runners.fe_impls(c, inputs)[:1]:
        try:
            p = impl.prepare()
            p.fn()
            torch.cuda.synchronize()
            err = _relerr(p.result(), want)
            ms = flushed_median_ms(p.fn, torch, flush, REPS)
        except Exception as e:
            print(f"  {impl.name:52s} unavailable: {type(e).__name__}: {str(e)[:200]}")
            continue
        refs[impl.name] = ms
        print(_row(impl.name, ms, c.bytes, refs.get("cudnn-fe"), f"relerr {err:.1e}  {p.detail[:70]}"), flush=True)
    fe_ms = refs.get("cudnn-fe")
    if c.op.endswith("_fwd") and "x" in inputs:     # the floor: torch copying x to y (bytes: x read, y written)
        xs = inputs["x"]
        yc = torch.empty_like(xs)
        ms = flushed_median_ms(lambda: yc.copy_(xs), torch, flush, REPS)
        print(_row("torch copy x->y (floor)", ms, 2 * xs.numel() * xs.element_size(), fe_ms), flush=True)
        del yc
    stream = torch.cuda.current_stream().cuda_stream
    pack = {UID[r]: v for r, v in inputs.items()}
    outs = {r: torch.empty_like(want[r], dtype=torch.float32) for r in roles}
    for r, uid in roles.items():
        pack[uid] = outs[r]
    results = []
    for label, cfg, why in cfgs:
        if cfg is None:
            print(f"  {label:52s} refused: {why[:140]}")
            continue
        if time.time() > end:
            print(f"  {label:52s} skipped (time budget)")
            continue
        try:
            t0 = time.time()
            plan = api.build_plan(g, cfg)
            ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
            for o in outs.values():
                o.fill_(float("nan"))
            fn = lambda: plan.execute(pack, ws, stream)  # noqa: E731
            fn()
            torch.cuda.synchronize()
            err = _relerr(outs, want)
            build_s = time.time() - t0
            ms = flushed_median_ms(fn, torch, flush, REPS)
        except Exception as e:   # a variant failing must not hide the others
            print(f"  {label:52s} ERROR {type(e).__name__}: {str(e)[:200]}")
            continue
        part = plan.parts[0]
        regs = [getattr(ck, "attrs", {}).get("regs", "?") for ck in getattr(part, "compiled", [])]
        geo = " ".join(f"{s.name}<{s.grid},{s.block}>r{r}" for s, r in zip(getattr(part, "steps", []), regs))
        bad = "" if err <= 1e-4 else "  BAD"
        if len(part.steps) == 2 and part.steps[1].name == "norm_rows_dparams_combine":
            cms = _combine_ms(torch, flush, part.steps[0].grid, c.params["cols"])
            geo += f" [combine alone (numba launch: an upper bound) {cms:.4f} ms]"
        results.append((ms, label, cfg))
        print(_row(label, ms, c.bytes, fe_ms, f"relerr {err:.1e}{bad} ws {plan.workspace_size >> 10} KB "
                   f"(build {build_s:.1f} s) {geo}"), flush=True)
    if results:
        best = min(results)
        dflt = [r for r in results if r[2] == first]
        fe = f" (fe {fe_ms:.4f} ms: {fe_ms / best[0]:.2f}x)" if fe_ms else ""
        print(f"  -> fastest: {best[1]} {best[0]:.4f} ms{fe}; default: "
              + (f"{dflt[0][0]:.4f} ms" + (f" ({fe_ms / dflt[0][0]:.2f}x fe)" if fe_ms else "") if dflt else "not run"))
    print(flush=True)


_COMBINE = {}


def _combine_ms(torch, flush, chunks, n):
    """Median ms of the ordered combine alone (norm_bn_cols.combine_kernel) over ``chunks`` partial rows of
    ``n`` float32 columns (two arrays), launched through numba on torch's stream."""
    if (chunks, n) in _COMBINE:
        return _COMBINE[(chunks, n)]
    from numba import cuda as ncuda

    from ncudnn.kernels.norm import bn_cols as kcols

    ty = kcols.combine_ty(chunks)
    k = kcols.combine_kernel("float32", "float32", "float32", True, True, ty)
    bufs = [torch.randn(chunks * n, device="cuda"), torch.randn(chunks * n, device="cuda"),
            torch.empty(n, device="cuda"), torch.empty(n, device="cuda")]
    arrs = [ncuda.as_cuda_array(b) for b in bufs]
    st = ncuda.external_stream(torch.cuda.current_stream().cuda_stream)
    fn = lambda: k[(-(-n // kcols.TX),), (kcols.TX, ty), st](*arrs, chunks, n)  # noqa: E731
    ms = _COMBINE[(chunks, n)] = flushed_median_ms(fn, torch, flush, REPS)
    return ms


def dry(keys):
    for key in keys:
        title, make, variants = GROUPS[key]
        g, _ = ir_graph(make())
        first, cfgs = configs(g, variants)
        print(f"== {title}: heuristic first {first}")
        for label, cfg, why in cfgs:
            if cfg is None:
                print(f"  {label:52s} refused: {why[:140]}")
                continue
            plan = api.build_plan(g, cfg)
            steps = getattr(plan.parts[0], "steps", [])
            print(f"  {label:52s} built: ws {plan.workspace_size} "
                  + " ".join(f"{s.name}<{s.grid},{s.block}>" for s in steps))


def _precompile_one(job):
    """Worker: build one (group, variant) plan so its kernels land in the disk kernel cache."""
    key, i = job
    title, make, variants = GROUPS[key]
    g, _ = ir_graph(make())
    _, cfgs = configs(g, variants)
    cfg = cfgs[i][1] if i < len(cfgs) else None
    if cfg is None:
        return 0.0
    t0 = time.time()
    try:
        api.build_plan(g, cfg)
    except Exception:   # the timing pass reports it
        pass
    return time.time() - t0


def precompile(keys, jobs):
    """Every variant's kernels compiled by ``jobs`` worker processes (spawned; the disk kernel cache in
    $NCUDNN_CACHE_DIR carries them to this process)."""
    import concurrent.futures as cf
    import multiprocessing as mp

    work = [(k, i) for k in dict.fromkeys(keys) for i in range(len(GROUPS[k][2]))]
    t0 = time.time()
    with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as ex:
        total = sum(ex.map(_precompile_one, work))
    print(f"precompiled {len(work)} variants in {time.time() - t0:.1f} s ({jobs} processes, {total:.1f} s of builds)",
          flush=True)


def main(argv=None):
    global REPS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="*", help=f"groups to run (default all): {', '.join(GROUPS)}")
    ap.add_argument("--dry", action="store_true", help="check and build every config, run nothing")
    ap.add_argument("--budget", type=float, default=80.0, help="seconds after which variants are skipped")
    ap.add_argument("--jobs", type=int, default=0, help="compile every variant first in this many processes")
    ap.add_argument("--reps", type=int, default=REPS, help="timed runs per variant (median)")
    args = ap.parse_args(argv)
    REPS = args.reps
    keys = args.groups or list(GROUPS)
    bad = [k for k in keys if k not in GROUPS]
    if bad:
        ap.error(f"unknown groups {bad}; known: {list(GROUPS)}")
    if args.dry:
        dry(keys)
        return 0
    tmp = None
    if args.jobs:
        if not os.environ.get("NCUDNN_CACHE_DIR"):
            import tempfile

            tmp = os.environ["NCUDNN_CACHE_DIR"] = tempfile.mkdtemp(prefix="ncudnn_probe_")
        precompile(keys, args.jobs)
    import torch

    torch.backends.cudnn.benchmark = False
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"median of {REPS} reps, L2 flushed ({FLUSH_BYTES >> 20} MB) before each", flush=True)
    end = time.time() + args.budget
    try:
        for key in keys:
            run_group(key, torch, flush, end)
    finally:
        if tmp:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
