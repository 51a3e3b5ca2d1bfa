"""GPU probe (issue #7): split-K and small tiles for the tensor-core conv fprop on small-spatial layers.

Run on the GPU machine from the repo root::

    python3 experiments/probe_tc_splitk.py                        # c5, c4, c3, seed at N = 32, within --budget s
    python3 experiments/probe_tc_splitk.py --layers c5 --splits 1 2 4 --tiles 0 2

For each BF16 NHWC conv fprop + bias + relu layer (N = 32): torch (cuDNN BF16, channels_last) conv2d +
relu_ and conv2d alone; conv_tc's heuristic plan through the API (what the bench runs: its config and
time); then every (tile, SPLIT_K) variant of this script's table: the partial kernel plus the ordered
reduce (kernels/tc_conv/splitk.py), with the main kernel alone beside it ("main") and the total with the
vector reduce ("vec-reduce total": what conv_tc runs for K % 4 == 0). Each line: ms,
TFLOP/s (2 * N * P * Q * K * C * R * S / s), ratio = torch conv+relu time / ours, rel err of the output
vs the float64 oracle (torch float64 conv of the same BF16 inputs, first NREF = 4 images) in the
Frobenius norm, CTAs (grid
x * y). Kernels compile first in --jobs spawned processes through the kernel cache (set NCUDNN_CACHE_DIR to
a scratch directory; the timed process then loads cubins). Timing: experiments/probe_timing.flushed_median_ms (median of --reps CUDA-event runs, L2 flushed
before each). Last: per layer the best variant, and the conv_tc ranking (first three configs with
predicted ms) for all 8 BF16 layers of the bench's conv set, with and without split-K.
"""
import argparse
import math
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_tc import LAYERS, layer_graph  # noqa: E402
from probe_timing import flushed_median_ms  # noqa: E402

T0 = time.time()
#: images of the batch checked against the float64 oracle
NREF = 4

#: (label, BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES): conv_tc's tiles and a two-warp 64x64
TILES = (
    ("128x128 w2x4 s4", 128, 128, 2, 4, 4),
    ("128x64 w2x2 s4", 128, 64, 2, 2, 4),
    ("64x128 w2x2 s4", 64, 128, 2, 2, 4),
    ("64x64 w2x2 s4", 64, 64, 2, 2, 4),
    ("128x256 w2x4 s3", 128, 256, 2, 4, 3),
    ("64x64 w1x2 s4", 64, 64, 1, 2, 4),     # probe only: 2 warps, more CTAs an SM
)


def _cfg(t, C, split):
    from ncudnn.kernels.tc_gemm import TcGemmConfig
    _, bm, bn, wm, wn, st = t
    return TcGemmConfig(bm, bn, 32, wm, wn, st, 8, 4 if C % 32 == 0 else 3, SPLIT_K=split)


def kernels(t, C, split):
    """(kernel, its CompiledKernel, the generic and the vector reduce's CompiledKernels or None) of tile ``t``
    through the kernel cache (shape-free keys: one compile serves every layer; warm workers write the cubins
    first)."""
    from ncudnn.engines.gemm import common as gc
    from ncudnn.kernels.pointwise import epilogue as ep
    from ncudnn.kernels.runtime import kcache
    from ncudnn.kernels.tc_conv import conv_args, make_tc_conv_fprop
    from ncudnn.kernels.tc_conv.splitk import make_split_reduce, make_split_reduce_vec, partial_args, reduce_args
    from ncudnn.kernels.tc_conv.splitk import vec_args

    spec = ep.EpilogueSpec((ep.bias("col"), ep.relu()), "bfloat16")
    kern = make_tc_conv_fprop(_cfg(t, C, split), "bfloat16", spec, "bfloat16", "bfloat16")
    h, f = gc.typing_flat("bfloat16"), gc.typing_flat("float32")
    geo = (1, 32, 1, 1, 8, 1, 1, 1, 1, (1, 1), (0, 0), (1, 1), (32, 32, 32), 32)
    typing = partial_args(kern, h, h, f, *geo) if split > 1 else conv_args(kern, h, h, h, h, h, *geo, 8, 1)
    ck = kcache.get_or_compile(gc.key_text("probe_tc_splitk", kern.cfg, kern.epi), lambda: kern.kernel,
                               gc.argtypes(typing))
    red = vec = None
    if split > 1:
        rk = make_split_reduce(spec, "bfloat16", "bfloat16", split)
        red = kcache.get_or_compile(gc.key_text("probe_tc_splitk_reduce", rk.py_func.__name__, kern.epi),
                                    lambda: rk, gc.argtypes(reduce_args(f, split, h, h, h, 1, 1, 1, 1)))
        vk = make_split_reduce_vec(spec, "bfloat16", "bfloat16")
        vec = kcache.get_or_compile(gc.key_text("probe_tc_splitk_reduce_vec", kern.epi), lambda: vk,
                                    gc.argtypes(vec_args(f, split, h, h, h, 1, 1, 1, 1)))
    return kern, ck, red, vec


def _warm(task):
    """Worker: compile one task's kernels into the kernel cache's disk entries."""
    t0 = time.time()
    try:
        if task[0] == "kern":
            kernels(*task[1:])
        else:   # the heuristics' plan of a layer
            from ncudnn.engines import api
            g, cx = layer_graph(*task[1:])
            api.build_plan(g, api.get_heuristics(g, ctx=cx)[0], cx)
        return f"{task[0]} {task[1][0] if task[0] == 'kern' else ''} {task[2:] if task[0] == 'kern' else task[1:]}: " \
            f"{time.time() - t0:.1f} s"
    except Exception as e:
        return f"{task}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}"


def prewarm(tasks, jobs):
    """Compile ``tasks`` in ``jobs`` spawned processes (each its own CUDA context) before timing."""
    import multiprocessing as mp
    t0 = time.time()
    with mp.get_context("spawn").Pool(jobs) as pool:
        for line in pool.imap_unordered(_warm, tasks):
            print(f"   warm {line}", flush=True)
    print(f"prewarm of {len(tasks)} tasks in {jobs} processes: {time.time() - t0:.1f} s", flush=True)


def ranking(eng, name, C, H, K, R, stride, pad, N, n=3):
    from ncudnn.engines import api
    from ncudnn.types import cudnnBackendKnobType_t as KT
    g, cx = layer_graph(N, C, H, K, R, stride, pad)
    sub = api.problem(g)
    st, why = eng.check_support(sub, cx)
    if int(st) != 0:
        return f"refused: {why}"
    out = []
    for c in eng.candidates(sub, cx)[:n]:
        lab = eng.TILES[c.get(KT.CUDNN_KNOB_TYPE_TILE_SIZE)].label
        out.append(f"{lab} k{c.get(KT.CUDNN_KNOB_TYPE_SPLIT_K, 1)} ({eng.cost(sub, c, cx.device) * 1e3:.4f} ms)")
    return ", ".join(out)


def engine_plan(N, C, H, K, R, stride, pad, x, w, b, ref, torch, flush, reps):
    from ncudnn.engines import api
    g, cx = layer_graph(N, C, H, K, R, stride, pad)
    ec = api.get_heuristics(g, ctx=cx)[0]
    plan = api.build_plan(g, ec, cx)
    P = (H + 2 * pad - R) // stride + 1
    y = torch.empty(N, K, P, P, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    ws = torch.empty(max(plan.workspace_size, 1), device="cuda", dtype=torch.uint8)
    pack = {1: x.data_ptr(), 2: w.data_ptr(), 3: b.data_ptr(), 4: y.data_ptr()}
    wsp = ws.data_ptr() if plan.workspace_size else None
    y.fill_(float("nan"))
    api.execute(plan, pack, wsp)
    torch.cuda.synchronize()
    err = float((y[:NREF].double() - ref).norm() / ref.norm())
    t = flushed_median_ms(lambda: api.execute(plan, pack, wsp), torch, flush, reps)
    return ec.config, t, err, plan.workspace_size


def layer(name, C, H, K, R, stride, pad, N, tiles, splits, reps, budget, flush):
    import torch
    import torch.nn.functional as F
    from numba import cuda

    from ncudnn.kernels.tc_conv import conv_args, conv_grid
    from ncudnn.kernels.tc_conv.splitk import partial_args, reduce_args, reduce_launch, vec_args, vec_launch

    P = (H + 2 * pad - R) // stride + 1
    M = N * P * P
    flop = 2.0 * M * K * C * R * R
    torch.manual_seed(0)
    x = torch.randn(N, C, H, H, device="cuda").to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(K, C, R, R, device="cuda") / math.sqrt(C * R * R)).to(torch.bfloat16)
    w = w.contiguous(memory_format=torch.channels_last)
    b = torch.randn(K, device="cuda").to(torch.bfloat16)
    ref = torch.relu(F.conv2d(x[:NREF].double(), w.double(), b.double(), stride, pad))
    t_ref = flushed_median_ms(lambda: torch.relu_(F.conv2d(x, w, b, stride, pad)), torch, flush, reps)
    t_conv = flushed_median_ms(lambda: F.conv2d(x, w, b, stride, pad), torch, flush, reps)
    print(f"== {name} N={N} C={C} {H}x{H} K={K} {R}x{R} s{stride}  GEMM M={M} N={K} K={C * R * R}: torch conv+relu "
          f"{t_ref:.4f} ms ({flop / t_ref / 1e9:.1f} TFLOP/s), conv alone {t_conv:.4f} ms", flush=True)
    try:
        cfg, t, err, wsb = engine_plan(N, C, H, K, R, stride, pad, x, w, b, ref, torch, flush, reps)
        print(f"   engine plan {cfg}: {t:.4f} ms {flop / t / 1e9:6.1f} TFLOP/s {t_ref / t:5.2f}x rel_err {err:.1e} "
              f"workspace {wsb}", flush=True)
    except Exception as e:
        print(f"   engine plan FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)

    def arr(tn):
        return cuda.as_cuda_array(tn.permute(0, 2, 3, 1).reshape(-1).view(torch.int16)).view(np.uint16)

    y = torch.empty(N, K, P, P, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    xd, wd, yd = arr(x), arr(w), arr(y)
    bd = cuda.as_cuda_array(b.view(torch.int16)).view(np.uint16)
    geo = (N, C, H, H, K, P, P, R, R, (stride, stride), (pad, pad), (1, 1), (H * H * C, H * C, C), R * R * C)
    best = None
    for t_ in tiles:
        for s in splits:
            label = f"{t_[0]} k{s}"
            if time.time() - T0 > budget:
                print(f"   {label:24s} skipped (budget)", flush=True)
                continue
            try:
                kern, ck, red, vec = kernels(t_, C, s)
                grid = conv_grid(kern, N, P, P, K, s)
                launches = []
                if s == 1:
                    args = conv_args(kern, xd, wd, yd, bd, yd, *geo, K, 1)
                    launches.append(ck.prepare(grid, kern.cfg.threads, args, kern.smem))
                else:
                    wst = torch.empty(s * M * K, device="cuda", dtype=torch.float32)   # kept alive below
                    ws = cuda.as_cuda_array(wst)
                    args = partial_args(kern, xd, wd, ws, *geo)
                    launches.append(ck.prepare(grid, kern.cfg.threads, args, kern.smem))
                    rg, rt = reduce_launch(s, M, K)
                    launches.append(red.prepare((rg, 1, 1), (rt, 1, 1), reduce_args(ws, s, yd, bd, yd, M, K, K, 1)))
                    vg, vt = vec_launch(M, K)
                    vec_l = [launches[0], vec.prepare(vg, vt, vec_args(ws, s, yd, bd, yd, M, K, K, 1))]

                def run(ls=launches, keep=(wst if s > 1 else None)):
                    for pl in ls:
                        pl.run(None, 0)
                y.fill_(float("nan"))
                run()
                torch.cuda.synchronize()
                err = float((y[:NREF].double() - ref).norm() / ref.norm())
                t = flushed_median_ms(run, torch, flush, reps)
                t_main = flushed_median_ms(lambda: launches[0].run(None, 0), torch, flush, reps) if s > 1 else t
                t_vec, err_v = t, err
                if s > 1:
                    y.fill_(float("nan"))
                    run(vec_l)
                    torch.cuda.synchronize()
                    err_v = float((y[:NREF].double() - ref).norm() / ref.norm())
                    t_vec = flushed_median_ms(lambda: run(vec_l), torch, flush, reps)
            except Exception as e:
                print(f"   {label:24s} FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
                continue
            print(f"   {label:24s} {t:8.4f} ms {flop / t / 1e9:6.1f} TFLOP/s {t_ref / t:5.2f}x  main {t_main:.4f}  "
                  f"vec-reduce total {t_vec:.4f} ({t_ref / t_vec:4.2f}x)  rel_err {err:.1e} / {err_v:.1e}  "
                  f"CTAs {grid[0] * grid[1]}", flush=True)
            for tt, ee, lab in ((t, err, label), (t_vec, err_v, label + " vec")):
                if ee < 1e-2 and (best is None or tt < best[0]):
                    best = (tt, lab)
    if best:
        print(f"   best {name}: {best[1]} {best[0]:.4f} ms = {t_ref / best[0]:.2f}x torch", flush=True)
        return t_ref / best[0]
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="experiments/probe_tc_splitk.py")
    ap.add_argument("--layers", nargs="*", default=["c5", "c4", "c3", "seed"], help="layer name prefixes")
    ap.add_argument("--tiles", nargs="*", type=int, default=None, help="indices into this script's TILES")
    ap.add_argument("--splits", nargs="*", type=int, default=[1, 2, 3, 4, 5, 6])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=80.0, help="seconds after which no new variant starts")
    ap.add_argument("--no-rank", action="store_true")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="compile processes (0: none)")
    args = ap.parse_args(argv)
    tiles = [TILES[i] for i in args.tiles] if args.tiles is not None else list(TILES)
    lays = [x for n in args.layers for x in LAYERS if x[0].startswith(n)]
    if args.jobs:
        Cs = sorted({lay[1] % 32 == 0 for lay in lays})
        tasks = [("engine",) + lay[1:] + (args.n,) for lay in lays]
        tasks += [("kern", t, 32 if c32 else 8, s) for t in tiles for c32 in Cs for s in {min(x, 2) for x in args.splits}]
        tasks += [("kern", tiles[0], 32, 8)] if max(args.splits) >= 8 else []   # the wide reduce
        prewarm(sorted(tasks, key=lambda t: -t[1][1] * t[1][2] if t[0] == "kern" else 0), args.jobs)
    import torch
    flush = torch.empty(64 * 1024 * 1024 // 4, device="cuda", dtype=torch.float32)
    ratios = []
    for lay in lays:
        try:
            r = layer(*lay, args.n, tiles, args.splits, args.reps, args.budget, flush)
        except Exception:
            traceback.print_exc()
            r = None
        if r:
            ratios.append(r)
    if ratios:
        print(f"geomean of best ratios over {len(ratios)} layers: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}x torch", flush=True)
    if not args.no_rank:
        try:
            from ncudnn.engines import registry
            eng = registry.by_name("conv_tc")
            for lay in LAYERS:
                print(f"   conv_tc ranking {lay[0]}: {ranking(eng, *lay, args.n)}", flush=True)
            splits, eng.SPLITS = eng.SPLITS, (1,)     # the ranking without split-K
            try:
                for lay in LAYERS:
                    print(f"   conv_tc ranking without split {lay[0]}: {ranking(eng, *lay, args.n)}", flush=True)
            finally:
                eng.SPLITS = splits
        except Exception:
            traceback.print_exc()
    print(f"probe_tc_splitk done in {time.time() - T0:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
