"""GPU probe: FP32 matmul engine configs on skinny shapes beside cuBLAS SGEMM (TF32 off), same process.

Run on the GPU machine from the repo root::

    python3 experiments/probe_skinny.py                                  # the skinny shapes of issue #5
    python3 experiments/probe_skinny.py --shapes 16384x64x4096 --top 12  # one shape, more heuristic configs

What it measures: C[1, M, N] = A[1, M, K] @ B[1, K, N], row-major fp32, through the engine API (the
heuristics' configs and hand-listed knob values of matmul_simt / matmul_small: api.build_plan +
api.execute on torch tensors). Per shape it times (experiments/probe_timing.flushed_median_ms: CUDA events,
L2 flushed before every run, median of --reps) cuBLAS (torch.matmul, allow_tf32 False), then

* the heuristics' top --top configs (mode A on this device; ``h1`` is the first pick), with the
  model's predicted time beside the measured one;
* ``old``: the config the heuristics picked before the skinny tiles (session-4 benchmark);
* ``grid``: the fast tiles (t0 128x128, t9 128x64, t10 64x128, t11 64x64 t8x8, t12 64x64 t8x4, t13 128x64
  capped at 128 registers, t14 16x128x32 t4x4) at SPLIT_K 1/2/4/8.

Every config is first checked against a float64 product (torch, on the GPU) of the same inputs:
``err`` = max |C - C64| / max |C64|; a config over 5e-5 is marked WRONG and never BEST. TFLOP/s =
2*M*N*K / time; ``x cuBLAS`` = cuBLAS time / ours (>= 0.5 is the issue's bar).

JIT: the kernels of all configs are compiled first by --jobs worker processes into a temporary kernel
cache (NCUDNN_CACHE_DIR, removed at exit); the timing process then loads the cubins. Configs still
missing once --budget seconds have passed are printed as SKIPPED.
"""
import argparse
import os
import sys
import tempfile
import time

SHAPES = ((16384, 64, 4096), (16, 8192, 8192), (128, 8192, 8192), (8192, 128, 8192), (65536, 1024, 64),
          (8192, 8192, 256), (1024, 1024, 1024))
#: the heuristics' pick before the skinny tiles (engine, TILE_SIZE, SPLIT_K, SWIZZLE): session-4 benchmark
OLD_PICKS = {(16384, 64, 4096): ("matmul_simt", 1, 1, 8), (16, 8192, 8192): ("matmul_small", 1, 8, 1),
             (128, 8192, 8192): ("matmul_simt", 1, 2, 1), (8192, 128, 8192): ("matmul_simt", 1, 2, 8),
             (65536, 1024, 64): ("matmul_simt", 0, 1, 8), (8192, 8192, 256): ("matmul_simt", 0, 1, 8),
             (1024, 1024, 1024): ("matmul_simt", 1, 2, 1)}
#: matmul_simt TILE_SIZE values of the fast tiles (gemm_common.SIMT_TILES)
FAST_TILES = (0, 9, 10, 11, 12, 13)
GRID_SPLITS = (1, 2, 4, 8)
TOL = 5e-5


def graph(M, N, K):
    from ncudnn.ir import Matmul, OpGraph, TensorDesc, packed_strides
    from ncudnn.types import cudnnDataType_t as DT

    def t(uid, d):
        return TensorDesc(uid, d, packed_strides(d), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")
    return OpGraph([Matmul("mm", {"A": t(1, (1, M, K)), "B": t(2, (1, K, N))}, {"C": t(3, (1, M, N))})],
                   compute_dtype=DT.CUDNN_DATA_FLOAT).finalize()


def make_config(g, engine, knobs):
    """The engine Config of ``engine`` on graph ``g`` with ``knobs`` ((knob name, value), ...)."""
    from ncudnn.engines import api, registry
    from ncudnn.types import cudnnBackendKnobType_t as K

    c = registry.by_name(engine).default_config(api.problem(g))
    for name, v in knobs:
        c = c.with_knob(getattr(K, name), v)
    return c


def knobs_of(tile, split, swizzle, buf=1):
    return (("CUDNN_KNOB_TYPE_TILE_SIZE", tile), ("CUDNN_KNOB_TYPE_SPLIT_K", split),
            ("CUDNN_KNOB_TYPE_SWIZZLE", swizzle), ("CUDNN_KNOB_TYPE_SPLIT_K_BUF", buf))


def label(engine, knobs):
    d = dict(knobs)
    g = lambda k, v=1: d.get("CUDNN_KNOB_TYPE_" + k, v)  # noqa: E731
    return (f"{engine.replace('matmul_', '')} t{g('TILE_SIZE', 0)} s{g('SPLIT_K')} w{g('SWIZZLE')}"
            + ("" if g("SPLIT_K_BUF") else " atomic"))


def plan_rows(shapes, top):
    """[(shape, tag, engine, knobs, predicted seconds or None)], the heuristics run on this device."""
    from ncudnn.engines import api
    from ncudnn.engines.gemm import common as gc
    from ncudnn.engines import registry
    from ncudnn.types import cudnnBackendKnobType_t as K

    rows = []
    for shape in shapes:
        M, N, K_ = shape
        g = graph(M, N, K_)
        seen = set()

        def add(tag, engine, knobs, pred=None):
            key = (engine, tuple(sorted(knobs)))
            if key in seen:
                return
            seen.add(key)
            rows.append((shape, tag, engine, tuple(knobs), pred))
        ecs = api.get_heuristics(g)
        for i, ec in enumerate(ecs[:top]):
            cfg = ec.config
            knobs = tuple((K(k).name, v) for k, v in cfg.knobs
                          if K(k).name not in ("CUDNN_KNOB_TYPE_EDGE", "CUDNN_KNOB_TYPE_STAGES"))
            add(f"h{i + 1}", ec.engine.name, knobs, ec.predicted_time)
        old = OLD_PICKS.get(shape)
        if old is not None:
            add("old", old[0], knobs_of(*old[1:]))
        simt = registry.by_name("matmul_simt")
        sub = api.problem(g)
        ctx = api.context(None)
        for t in FAST_TILES:
            tile = simt.TILES[t]
            if tile.cfg.BLOCK_M > 2 * max(M, 16) or tile.cfg.BLOCK_N > 2 * max(N, 16):
                continue
            if tile.cfg.BLOCK_M < 64 and M > 64:        # the 16-row tile: GEMV-like shapes only (JIT time)
                continue
            sw = gc.swizzle_for(M, tile.cfg, simt.SWIZZLES)
            for s in GRID_SPLITS:
                knobs = knobs_of(t, s, sw)
                cfg = make_config(g, "matmul_simt", knobs)
                if simt.keep(sub, cfg, ctx)[0] == 0:
                    add("grid", "matmul_simt", knobs, simt.cost(sub, cfg, ctx.device))
    return rows


def kernel_group(engine, knobs):
    """Configs that share compiled kernels in one process (a fast tile's split kernel serves every
    SPLIT_K > 1; generic kernels compile per SPLIT_K)."""
    d = dict(knobs)
    split = d.get("CUDNN_KNOB_TYPE_SPLIT_K", 1)
    tile = d.get("CUDNN_KNOB_TYPE_TILE_SIZE", 0)
    fast = engine == "matmul_simt" and tile in FAST_TILES
    return (engine, tile, d.get("CUDNN_KNOB_TYPE_SWIZZLE", 1), d.get("CUDNN_KNOB_TYPE_SPLIT_K_BUF", 1),
            (split > 1) if fast else split)


def compile_group(items):
    """Worker: build the plans of ``items`` [(shape, engine, knobs)] (their kernels land in the cache)."""
    import warnings

    warnings.simplefilter("ignore")
    from ncudnn.engines import api

    t0 = time.time()
    errs = []
    for shape, engine, knobs in items:
        try:
            g = graph(*shape)
            api.build_plan(g, make_config(g, engine, knobs))
        except Exception as e:  # noqa: BLE001
            errs.append(f"{label(engine, knobs)}: {type(e).__name__}: {e}"[:300])
    return time.time() - t0, errs


def precompile(rows, jobs, deadline):
    import concurrent.futures as cf
    import multiprocessing as mp

    groups = {}
    for shape, _, engine, knobs, _ in rows:
        groups.setdefault(kernel_group(engine, knobs), []).append((shape, engine, knobs))
    t0 = time.time()
    print(f"# precompiling {len(groups)} kernel groups ({len(rows)} configs) on {jobs} workers", flush=True)
    ex = cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"))
    futs = [ex.submit(compile_group, items) for items in groups.values()]
    done, pending = cf.wait(futs, timeout=max(deadline - time.time(), 1))
    secs = []
    for f in done:
        try:
            s, errs = f.result()
        except Exception as e:  # noqa: BLE001
            print(f"# worker failed: {type(e).__name__}: {e}", flush=True)
            continue
        secs.append(s)
        for e in errs:
            print(f"# compile error {e}", flush=True)
    print(f"# precompile: {len(done)} groups done, {len(pending)} unfinished, {time.time() - t0:.1f} s wall, "
          f"{sum(secs):.1f} s in workers", flush=True)
    procs = list(getattr(ex, "_processes", {}).values())   # unfinished compiles: stop them (timing needs the CPU)
    ex.shutdown(wait=False, cancel_futures=True)
    if pending:
        for p in procs:
            p.terminate()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="", help="comma-separated MxNxK list (default: SHAPES)")
    ap.add_argument("--top", type=int, default=8, help="heuristic configs per shape")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--budget", type=float, default=80.0, help="seconds after which configs are skipped")
    ap.add_argument("--jobs", type=int, default=min(12, max(1, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--no-grid", action="store_true", help="heuristic and old configs only")
    args = ap.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    t_start = time.time()
    deadline = t_start + args.budget
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s] or list(SHAPES)

    import torch
    from ncudnn.engines import api

    torch.backends.cuda.matmul.allow_tf32 = False
    rows = plan_rows(shapes, args.top)
    if args.no_grid:
        rows = [r for r in rows if r[1] != "grid"]
    dev = api.context(None).device
    print(f"# {torch.cuda.get_device_name()} (model device: {dev.name}, {dev.sm_count} SMs)  torch "
          f"{torch.__version__}  TF32 off; median of {args.reps}, L2 flushed; {len(rows)} configs", flush=True)
    if args.jobs > 1:
        precompile(rows, args.jobs, t_start + 0.6 * args.budget)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from probe_timing import flushed_median_ms

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    best, firsts = {}, {}
    for shape in shapes:
        M, N, K_ = shape
        flops = 2.0 * M * N * K_
        gen = torch.Generator(device="cuda").manual_seed(0)
        ta = torch.rand(1, M, K_, device="cuda", generator=gen) * 2 - 1
        tb = torch.rand(1, K_, N, device="cuda", generator=gen) * 2 - 1
        tc = torch.empty(1, M, N, device="cuda")
        want = torch.matmul(ta.double(), tb.double())
        scale = float(want.abs().max())
        ref_ms = flushed_median_ms(lambda: torch.matmul(ta, tb, out=tc), torch, flush, args.reps)
        ref_err = float((tc.double() - want).abs().max()) / scale
        old = OLD_PICKS.get(shape)
        print(f"{M}x{N}x{K_}  cuBLAS SGEMM {ref_ms:.4f} ms  {flops / ref_ms / 1e9:.1f} TFLOP/s  err {ref_err:.1e}  "
              f"(0.5x bar: {2 * ref_ms:.4f} ms; old pick: {label(old[0], knobs_of(*old[1:])) if old else '-'})",
              flush=True)
        g = graph(M, N, K_)
        for shp, tag, engine, knobs, pred in rows:
            if shp != shape:
                continue
            name = f"{tag:5s} {label(engine, knobs):24s}"
            if time.time() > deadline:
                print(f"{M}x{N}x{K_}  {name} SKIPPED (time budget)", flush=True)
                continue
            try:
                t0 = time.time()
                plan = api.build_plan(g, make_config(g, engine, knobs))
                ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
                tc.fill_(float("nan"))
                pack = {1: ta, 2: tb, 3: tc}
                api.execute(plan, pack, ws)
                torch.cuda.synchronize()
                err = float((tc.double() - want).abs().max()) / scale
                build = time.time() - t0
                ms = flushed_median_ms(lambda: api.execute(plan, pack, ws), torch, flush, args.reps)
                ok = err == err and err < TOL
                p = f"pred {pred * 1e3:7.4f}" if pred is not None else " " * 12
                print(f"{M}x{N}x{K_}  {name} {ms:8.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s  x cuBLAS "
                      f"{ref_ms / ms:5.2f}  {p}  err {err:.1e}  build {build:4.1f}s{'' if ok else '  WRONG'}",
                      flush=True)
                if tag == "h1":
                    firsts[shape] = (label(engine, knobs), ms, ref_ms / ms)
                if ok and (shape not in best or ms < best[shape][1]):
                    best[shape] = (f"{tag} {label(engine, knobs)}", ms, ref_ms / ms)
            except Exception as e:  # noqa: BLE001
                print(f"{M}x{N}x{K_}  {name} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    print("# summary: heuristic first pick vs best measured")
    for shape in shapes:
        s = "x".join(map(str, shape))
        h = firsts.get(shape)
        b = best.get(shape)
        print(f"FIRST {s}: " + (f"{h[0]}  {h[1]:.4f} ms  x cuBLAS {h[2]:.2f}" if h else "-"))
        print(f"BEST  {s}: " + (f"{b[0]}  {b[1]:.4f} ms  x cuBLAS {b[2]:.2f}" if b else "-"))
    print(f"# total {time.time() - t_start:.1f} s")


if __name__ == "__main__":
    if "NCUDNN_CACHE_DIR" not in os.environ:
        _tmp = tempfile.TemporaryDirectory(prefix="ncudnn_probe_skinny_")
        os.environ["NCUDNN_CACHE_DIR"] = _tmp.name
    sys.exit(main())
