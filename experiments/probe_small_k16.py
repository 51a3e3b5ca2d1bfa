"""GPU probe: BF16 / FP16 GEMMs with a small K (C-write bound) on the wgmma kernel beside cuBLAS, same process.

Run on the GPU machine from the repo root::

    python3 experiments/probe_small_k16.py                       # the three shapes, BF16 and FP16, full grid
    python3 experiments/probe_small_k16.py --dtypes bf16 --grid 1,4,5 --shapes 8192x8192x128

What it measures: C (M, N) = A (M, K) @ B (K, N), row-major, A / B / C in the dtype, FP32 accumulation.
Per dtype and shape it times, each as the median of --reps CUDA-event timed runs with the L2 flushed
before every run (experiments/probe_timing.flushed_median_ms; 256 MB zeroed):

* ``cublas``: torch.matmul (cuBLAS) on the same tensors;
* ``hN``: the heuristics' top --top configs through the engine API (api.build_plan + api.execute), with
  the engine, knobs and the model's predicted time; ``eN`` (first dtype): the first config of each other
  engine the heuristics list within 3x of the first pick's predicted time (N: its rank);
* ``gN``: the wgmma kernel configs of :data:`GRID` (BLOCK_N, WGS, MI, STAGES, EPI; EARLY loads, GROUP_M
  8), launched directly (``EPI=0``: the element-walk epilogue, ``EPI=1``: 16-byte vector stores of C,
  ``EPI=2``: the same with ``.cs`` evict-first stores, ``EPI=3``: the packed 16-bit fast path).

Columns: ms, TB/s of C written (M * N * itemsize / time; the H200 copies at ~4.2 TB/s), TFLOP/s, ratio
to cuBLAS (cuBLAS time / ours: >= 0.6 is the goal), ``err``: ||C - C32|| / ||C32|| against an FP32
torch product of the same inputs (a result over 1e-2 is marked WRONG and never BEST), resident CTAs
per SM (registers from the compiled kernel, shared memory from the config).

JIT: every kernel is compiled first by --jobs worker processes into a temporary kernel cache
(NCUDNN_CACHE_DIR, removed at exit); the timing process then loads the cubins. Configs still missing
once --budget seconds have passed are printed as SKIPPED.
"""
import argparse
import os
import sys
import tempfile
import time

SHAPES = ((8192, 8192, 128), (8192, 8192, 256), (65536, 1024, 64))
#: (BLOCK_N, WGS, MI, STAGES, EPI) of the directly launched configs; BLOCK_M = 64 * WGS * MI
GRID = ((256, 2, 1, 4, 0), (256, 2, 1, 4, 1), (128, 2, 1, 3, 1), (128, 2, 1, 2, 1), (128, 1, 1, 2, 1),
        (128, 1, 1, 3, 1), (256, 1, 1, 2, 1), (256, 2, 1, 4, 3), (128, 2, 1, 3, 3), (128, 1, 1, 3, 3))
#: GRID indices timed for FP16 (the BF16 grid decides; FP16 confirms)
FP16_GRID = (8,)
TOL = 1e-2
_DT = {"bf16": ("bfloat16", "CUDNN_DATA_BFLOAT16"), "fp16": ("float16", "CUDNN_DATA_HALF")}


def wg_config(spec):
    from ncudnn.kernels.wgmma.config import WgmmaConfig
    bn, wgs, mi, st, epi = spec
    return WgmmaConfig(bn, wgs, mi, st, 8, 1, EPI=epi)


def kernel(spec, dtype):
    from ncudnn.kernels.pointwise import epilogue as ep
    from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
    name = _DT[dtype][0]
    return make_wgmma_gemm(wg_config(spec), True, False, name, ep.EpilogueSpec((), name))


def storage(dtype):
    import numpy as np
    return np.uint16 if dtype == "bf16" else np.float16


def flats(dtype, pa, pb, pc, M, N, K):
    from ncudnn.engines.gemm.common import Flat
    st = storage(dtype)
    return Flat(pa, M * K, st), Flat(pb, K * N, st), Flat(pc, M * N, st)


def kernel_args(kern, a, b, c, M, N, K):
    from ncudnn.kernels.wgmma.launch import fused_args
    return fused_args(kern, a, b, c, c, c, M, N, K, (1, 1), (0, 0, K, 1), (0, 0, N, 1), (0, 0, N, 1), (0, 1))


def graph(M, N, K, dtype):
    from ncudnn.ir import Matmul, OpGraph, TensorDesc, packed_strides
    from ncudnn.types import cudnnDataType_t as DT

    dt = getattr(DT, _DT[dtype][1])

    def t(uid, d):
        return TensorDesc(uid, d, packed_strides(d), dt, name=f"t{uid}")
    return OpGraph([Matmul("mm", {"A": t(1, (1, M, K)), "B": t(2, (1, K, N))}, {"C": t(3, (1, M, N))})],
                   compute_dtype=DT.CUDNN_DATA_FLOAT).finalize()


def heuristic_rows(shapes, dtypes, top):
    """[(dtype, shape, tag, EngineConfig)]: the heuristics' top configs on this device (``hN``: N-th
    in the ranking), then (first dtype only) the first-ranked config of every other engine predicted within
    3x of the first pick (``eN``)."""
    from ncudnn.engines import api
    rows = []
    for dtype in dtypes:
        for shape in shapes:
            ecs = api.get_heuristics(graph(*shape, dtype))
            for i, ec in enumerate(ecs[:top]):
                rows.append((dtype, shape, f"h{i + 1}", ec))
            seen = {ec.engine.name for ec in ecs[:top]}
            for i, ec in enumerate(ecs if dtype == dtypes[0] else ()):
                if ec.engine.name not in seen and ec.predicted_time < 3 * ecs[0].predicted_time:
                    seen.add(ec.engine.name)
                    rows.append((dtype, shape, f"e{i + 1}", ec))
    return rows


def knob_text(ec):
    from ncudnn.types import cudnnBackendKnobType_t as K
    return " ".join(f"{K(k).name.replace('CUDNN_KNOB_TYPE_', '')}={v}" for k, v in ec.config.knobs
                    if K(k).name != "CUDNN_KNOB_TYPE_EDGE")


def compile_job(job):
    """Worker: compile one kernel ("grid", spec, dtype) or one plan ("plan", shape, dtype, top index)."""
    import warnings

    warnings.simplefilter("ignore")
    t0 = time.time()
    try:
        if job[0] == "grid":
            _, spec, dtype = job
            from ncudnn.kernels.wgmma.launch import compiled
            kern = kernel(spec, dtype)
            compiled(kern, kernel_args(kern, *flats(dtype, 0, 0, 0, 8, 8, 8), 8, 8, 8))
        else:
            _, shape, dtype, idx = job
            from ncudnn.engines import api
            g = graph(*shape, dtype)
            api.build_plan(g, api.get_heuristics(g)[idx].config)
        return time.time() - t0, ""
    except Exception as e:  # noqa: BLE001
        return time.time() - t0, f"{job}: {type(e).__name__}: {str(e)[:300]}"


def precompile(jobs_list, jobs, deadline):
    import concurrent.futures as cf
    import multiprocessing as mp

    t0 = time.time()
    print(f"# precompiling {len(jobs_list)} kernels / plans on {jobs} workers", flush=True)
    ex = cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"))
    futs = [ex.submit(compile_job, j) for j in jobs_list]
    done, pending = cf.wait(futs, timeout=max(deadline - time.time(), 1))
    secs = []
    for f in done:
        s, err = f.result()
        secs.append(s)
        if err:
            print(f"# compile error {err}", flush=True)
    print(f"# precompile: {len(done)} done, {len(pending)} unfinished, {time.time() - t0:.1f} s wall, "
          f"max {max(secs or [0]):.1f} s per kernel", flush=True)
    procs = list(getattr(ex, "_processes", {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    if pending:
        for p in procs:
            p.terminate()


def ctas_per_sm(kern, ck):
    """Resident CTAs per SM of a compiled wgmma kernel (registers, shared memory, threads), or '?'."""
    try:
        from ncudnn.engines import device as _device
        from ncudnn.engines import heuristics as H
        regs = ck.attrs.get("regs")
        if not regs:
            return "?"
        return f"{H.blocks_per_sm(_device.current(), kern.cfg.threads, regs, kern.smem)} ({regs} regs)"
    except Exception:  # noqa: BLE001
        return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="", help="comma-separated MxNxK list (default: SHAPES)")
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "fp16"], choices=sorted(_DT))
    ap.add_argument("--grid", default="", help="comma-separated GRID indices (default: all for bf16, FP16_GRID)")
    ap.add_argument("--top", type=int, default=1, help="heuristic configs per shape")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--budget", type=float, default=85.0, help="seconds after which configs are skipped")
    ap.add_argument("--jobs", type=int, default=min(15, max(1, (os.cpu_count() or 2) - 1)))
    args = ap.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    t_start = time.time()
    deadline = t_start + args.budget
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s] or list(SHAPES)
    chosen = [int(x) for x in args.grid.split(",") if x]

    def grid_of(dtype):
        return chosen or (list(range(len(GRID))) if dtype == "bf16" else list(FP16_GRID))

    import torch
    from ncudnn.engines import api
    hrows = heuristic_rows(shapes, args.dtypes, args.top)
    jobs = [("grid", GRID[i], d) for d in args.dtypes for i in grid_of(d)]
    seen = set()
    for dtype, shape, tag, ec in hrows:
        key = (dtype, ec.engine.name, ec.config)
        if key not in seen:
            seen.add(key)
            jobs.append(("plan", shape, dtype, int(tag[1:]) - 1))
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  median of {args.reps}, L2 flushed "
          f"(256 MB); TB/s = C bytes / time", flush=True)
    if args.jobs > 1:
        precompile(jobs, args.jobs, t_start + 0.6 * args.budget)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from probe_timing import flushed_median_ms

    from ncudnn.kernels.wgmma.launch import compiled, fused_grid
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    best, first = {}, {}
    for dtype in args.dtypes:
        tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
        for shape in shapes:
            M, N, K = shape
            s = f"{dtype} {M}x{N}x{K}"
            gen = torch.Generator(device="cuda").manual_seed(0)
            ta = (torch.rand(M, K, device="cuda", generator=gen) * 2 - 1).to(tdt)
            tb = (torch.rand(K, N, device="cuda", generator=gen) * 2 - 1).to(tdt)
            tc = torch.empty(M, N, device="cuda", dtype=tdt)
            want = torch.matmul(ta.float(), tb.float())
            wn = float(want.norm())
            cbytes = M * N * tc.element_size()
            flops = 2.0 * M * N * K

            def line(tag, name, ms, ref_ms, extra=""):
                err = float((tc.float() - want).norm()) / wn
                ok = err == err and err < TOL
                print(f"{s}  {tag:6s} {name:44s} {ms:8.4f} ms {cbytes / ms / 1e9:5.2f} TB/s "
                      f"{flops / ms / 1e9:6.1f} TFLOP/s  x cuBLAS {ref_ms / ms:5.2f}  err {err:.1e}{extra}"
                      f"{'' if ok else '  WRONG'}", flush=True)
                if ok and (s not in best or ms < best[s][1]):
                    best[s] = (f"{tag} {name}", ms, ref_ms / ms)
                return ok

            def run_cublas():
                torch.matmul(ta, tb, out=tc)
            ref_ms = flushed_median_ms(run_cublas, torch, flush, args.reps)
            line("cublas", "torch.matmul", ref_ms, ref_ms)
            g = graph(M, N, K, dtype)
            for dt_, shp, tag, ec in hrows:
                if dt_ != dtype or shp != shape:
                    continue
                name = f"{ec.engine.name} {knob_text(ec)}"
                if time.time() > deadline:
                    print(f"{s}  {tag:6s} {name:44s} SKIPPED (time budget)", flush=True)
                    continue
                try:
                    plan = api.build_plan(g, ec.config)
                    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
                    pack = {1: ta.view(1, M, K), 2: tb.view(1, K, N), 3: tc.view(1, M, N)}
                    tc.fill_(float("nan"))
                    api.execute(plan, pack, ws)
                    torch.cuda.synchronize()
                    ms = flushed_median_ms(lambda: api.execute(plan, pack, ws), torch, flush, args.reps)
                    line(tag, name, ms, ref_ms, f"  pred {ec.predicted_time * 1e3:.4f} ms")
                    if tag == "h1":
                        first[s] = (name, ms, ref_ms / ms)
                except Exception as e:  # noqa: BLE001
                    print(f"{s}  {tag:6s} {name:44s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            a, b, c = flats(dtype, ta.data_ptr(), tb.data_ptr(), tc.data_ptr(), M, N, K)
            for i in grid_of(dtype):
                spec = GRID[i]
                kern = kernel(spec, dtype)
                name = kern.cfg.name
                if time.time() > deadline:
                    print(f"{s}  g{i:<5d} {name:44s} SKIPPED (time budget)", flush=True)
                    continue
                try:
                    args_ = kernel_args(kern, a, b, c, M, N, K)
                    ck = compiled(kern, args_)
                    pl = ck.prepare(fused_grid(kern, M, N, (1, 1)), kern.cfg.threads, args_, kern.smem)
                    tc.fill_(float("nan"))
                    pl.run(None, 0)
                    torch.cuda.synchronize()
                    ms = flushed_median_ms(lambda: pl.run(None, 0), torch, flush, args.reps)
                    line(f"g{i}", name, ms, ref_ms, f"  ctas/SM {ctas_per_sm(kern, ck)}")
                except Exception as e:  # noqa: BLE001
                    print(f"{s}  g{i:<5d} {name:44s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    print("# summary: heuristic first pick vs best measured")
    for s in first.keys() | best.keys():
        h, b = first.get(s), best.get(s)
        print(f"FIRST {s}: " + (f"{h[0]}  {h[1]:.4f} ms  x cuBLAS {h[2]:.2f}" if h else "-"))
        print(f"BEST  {s}: " + (f"{b[0]}  {b[1]:.4f} ms  x cuBLAS {b[2]:.2f}" if b else "-"))
    print(f"# total {time.time() - t_start:.1f} s")


if __name__ == "__main__":
    if "NCUDNN_CACHE_DIR" not in os.environ:
        _tmp = tempfile.TemporaryDirectory(prefix="ncudnn_probe_sk16_")
        os.environ["NCUDNN_CACHE_DIR"] = _tmp.name
    sys.exit(main())
