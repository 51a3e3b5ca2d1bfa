"""Time the persistent cp.async-pipelined layer / RMS norm forward (ncudnn.kernels.norm.row_fwd_pipe), launched
directly, against torch, cuDNN (cudnn-frontend), a torch copy x -> y (the floor) and our current kernel
(ncudnn.kernels.norm.row_fwd_sub) in one process: FP32 rows x cols, stats written, eps 1e-5, L2 flushed before
every rep (CUDA-event median). Every variant's outputs are checked against float64 first (relerr = ||got - want||
/ ||want||, worst of y / mean / inv; BAD past 1e-5).

    python3 experiments/probe_norm_pipe.py                               # LN + RMS, 8192 x 1024, the probe set
    python3 experiments/probe_norm_pipe.py --rows 16384 --set best --no-fe
    python3 experiments/probe_norm_pipe.py --cols 512 --set best --no-fe

Variant label: w<warps a block> s<stages> b<blocks an SM> [two / chan: statistics method; cs: streaming y stores;
regs: scale / bias in registers; ef: L2 evict-first on x's copies and y's stores];
grid = SMs x b blocks (the occupancy column says how many blocks an SM the driver allows: below b means
the grid is not all resident).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EPS = 1e-5
COPY_GBPS = 4210.0

#: name -> (warps, stages, blocks an SM, stats, params, cs[, L2 policy of x's copies and y's stores])
VARIANTS = {
    "w4s4b3-ef": (4, 4, 3, "shift", "smem", False, "evict_first"),
    "w8s2b3-ef": (8, 2, 3, "shift", "smem", False, "evict_first"),
    "w4s3b4-ef": (4, 3, 4, "shift", "smem", False, "evict_first"),
    "w8s2b3": (8, 2, 3, "shift", "smem", False),      # cuDNN's footprint: 3 x 72 KB, 256 threads
    "w4s4b3": (4, 4, 3, "shift", "smem", False),
    "w4s4b3-two": (4, 4, 3, "two", "smem", False),
    "w4s4b3-chan": (4, 4, 3, "chan", "smem", False),
    "w4s4b3-cs": (4, 4, 3, "shift", "smem", True),
    "w4s4b3-regs": (4, 4, 3, "shift", "regs", False),
    "w4s3b4": (4, 3, 4, "shift", "smem", False),
    "w2s6b4": (2, 6, 4, "shift", "smem", False),
    "w8s3b2": (8, 3, 2, "shift", "smem", False),
    "w4s6b2": (4, 6, 2, "shift", "smem", False),
    "w16s2b1": (16, 2, 1, "shift", "smem", False),
    "w4s2b5": (4, 2, 5, "shift", "smem", False),
    "w8s2b3-cs": (8, 2, 3, "shift", "smem", True),
    "w4s3b4-cs": (4, 3, 4, "shift", "smem", True),
}
SETS = {
    "probe": {"ln": ["w4s4b3", "w4s4b3-ef", "w4s4b3-regs"], "rms": ["w4s4b3", "w4s4b3-ef", "w8s2b3-ef"]},
    "all": {"ln": list(VARIANTS),
            "rms": ["w8s2b3", "w4s4b3", "w4s3b4", "w4s4b3-cs", "w2s6b4", "w8s3b2", "w4s4b3-ef", "w8s2b3-ef"]},
    "best": {"ln": ["w4s4b3", "w4s4b3-ef"], "rms": ["w4s4b3", "w4s4b3-ef"]},
}


def _case(op, rows, cols):
    from bench.cases import mem_case
    e = rows * cols
    return mem_case("norm", op, f"{rows}x{cols}", dict(rows=rows, cols=cols), e, e, 8)


def _relerr(got, want):
    worst = 0.0
    for role, ref in want.items():
        if role not in got:
            continue
        g = got[role].double().reshape(ref.shape)
        den = ref.norm().item() or 1.0
        e = (g - ref).norm().item() / den
        worst = max(worst, e if e == e else float("inf"))
    return worst


def _occupancy(k, threads, shared):
    try:
        from cuda.bindings import driver
        err, nb = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(k.function, threads, shared)
        return int(nb) if int(err) == 0 else "?"
    except Exception:
        return "?"


def run_op(op, rows, cols, names, torch, flush, reps, end, fe=True, sub=True):
    from bench import data, ref_runners
    from probe_timing import flushed_median_ms

    from ncudnn.kernels.norm import row_fwd_pipe as kp
    from ncudnn.kernels.norm import row_fwd_sub as ks
    from ncudnn.kernels.primitives import warp as kprim
    from ncudnn.kernels.runtime.launch import CompiledKernel

    ln = op == "ln"
    c = _case("layernorm_fwd" if ln else "rmsnorm_fwd", rows, cols)
    inputs = data.torch_inputs(c)
    want = ref_runners.truth(c, inputs)
    x, w = inputs["x"].reshape(-1), inputs["scale"].reshape(-1)
    b = inputs["bias"].reshape(-1) if ln else w
    roles = ("y", "mean", "inv_var") if ln else ("y", "inv_var")
    want = {r: want[r] for r in roles}
    nbytes = 2 * rows * cols * 4 + len(roles[1:]) * rows * 4
    stream = torch.cuda.current_stream().cuda_stream
    sms = kprim.sm_count()
    print(f"== {'LayerNorm (bias)' if ln else 'RMSNorm (no bias)'} fwd {rows} x {cols} FP32, stats written; "
          f"{sms} SMs; bytes {nbytes / 1e6:.1f} MB; median of {reps}, L2 flushed", flush=True)
    fe_ms = [None]

    def line(label, ms, note=""):
        gbs = nbytes / (ms * 1e-3) / 1e9
        vs = f"fe/this {fe_ms[0] / ms:5.3f}x" if fe_ms[0] else "fe/this   -   "
        print(f"  {label:34s} {ms:8.4f} ms {gbs:6.0f} GB/s {100 * gbs / COPY_GBPS:5.1f}%copyBW {vs} {note}",
              flush=True)

    refs = [ref_runners.fe_impls(c, inputs)[0]] if fe else []
    for impl in refs:
        try:
            p = impl.prepare()
            p.fn()
            torch.cuda.synchronize()
            got = p.result()
            err = _relerr({r: got[r] for r in roles if r in got}, want)
            ms = flushed_median_ms(p.fn, torch, flush, reps)
            fe_ms[0] = ms
            line("cudnn-fe", ms, f"relerr {err:.1e}  {p.detail[:60]}")
        except Exception as e:
            print(f"  cudnn-fe unavailable: {type(e).__name__}: {str(e)[:200]}", flush=True)
    tfn = ref_runners.torch_op(c, inputs)
    got = tfn()
    torch.cuda.synchronize()
    err = _relerr({r: got[r] for r in roles if r in got}, {r: want[r] for r in roles if r in got})
    line("torch", flushed_median_ms(tfn, torch, flush, reps), f"relerr {err:.1e} (y only for RMS)")
    yc = torch.empty_like(x)
    line("torch copy x->y (floor)", flushed_median_ms(lambda: yc.copy_(x), torch, flush, reps),
         "(bytes counted as this op's)")
    y = torch.empty_like(x)
    mean = torch.empty(rows, device="cuda")
    inv = torch.empty(rows, device="cuda")
    outs = {"y": y, "mean": mean, "inv_var": inv}
    f = "float32[::1]"
    sig = f"void({f}, {f}, {f}, {f}, {f}, {f}, float64, int64)"
    args = (x, w, b, y, mean, inv, EPS, rows)
    results = []

    def timed(label, k, grid, block, shared, note=""):
        for o in outs.values():
            o.fill_(float("nan"))
        pl = k.prepare(grid, block, args, shared)
        fn = lambda: pl.run(None, stream)  # noqa: E731
        fn()
        torch.cuda.synchronize()
        err = _relerr({r: outs[r] for r in roles}, want)
        ms = flushed_median_ms(fn, torch, flush, reps)
        occ = _occupancy(k, block, shared)
        line(label, ms, f"relerr {err:.1e}{'  BAD' if err > 1e-5 else ''} regs {k.attrs.get('regs', '?')} "
             f"local {k.attrs.get('local', '?')} occ {occ} grid {grid} {note}")
        return ms

    if sub:
        try:
            t0 = time.time()
            tpr, rpb = 128, 1      # the engine's default (KERNEL_CFG 16: L2 evict-first on x and y)
            disp, _ = ks.row_fwd_sub_kernel(cols, tpr, rpb, 4, ln, ln, True, "float32", "float32", "float32",
                                             "float32", None, two_pass=False, preload=True, xhint="evict_first",
                                             yhint="evict_first")
            k = CompiledKernel(disp, sig)
            timed(f"ours now: sub tpr{tpr} rpb{rpb} ef", k, -(-rows // rpb), tpr * rpb, 0,
                  f"(build {time.time() - t0:.1f} s)")
        except Exception as e:
            print(f"  ours now: ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
    for name in names:
        warps, stages, bps, stats, params, cs, *hint = VARIANTS[name]
        label = f"pipe {name}" + ("" if ln or stats == "shift" else f" ({stats})")
        if time.time() > end:
            print(f"  {label:34s} skipped (time budget)", flush=True)
            continue
        if not kp.pipe_fits(cols, warps, stages, bps, ln, params):
            print(f"  {label:34s} does not fit {bps} blocks an SM", flush=True)
            continue
        try:
            t0 = time.time()
            disp, _ = kp.row_fwd_pipe_kernel(cols, warps, stages, ln, ln, True, stats=stats, params=params, cs=cs,
                                             bps=bps, hint=hint[0] if hint else None)
            k = CompiledKernel(disp, sig)
            grid, block, shared = kp.pipe_geometry(cols, warps, stages, bps, sms, ln, params)
            results.append((timed(label, k, grid, block, shared, f"(build {time.time() - t0:.1f} s)"), label))
        except Exception as e:  # one variant failing must not hide the others
            print(f"  {label:34s} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
    if results:
        ms, label = min(results)
        print(f"  -> fastest pipe: {label} {ms:.4f} ms" + (f" ({fe_ms[0] / ms:.3f}x cudnn-fe)" if fe_ms[0] else ""),
              flush=True)
    print(flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", default="ln,rms", help="ln, rms or both (comma separated)")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--set", default="probe", choices=sorted(SETS))
    ap.add_argument("--variants", default="", help="comma-separated variant names (overrides --set)")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--budget", type=float, default=75.0,
                    help="seconds of the whole run after which the remaining variants are skipped")
    ap.add_argument("--no-fe", action="store_true", help="skip cudnn-frontend")
    ap.add_argument("--no-sub", action="store_true", help="skip our current kernel")
    args = ap.parse_args(argv)
    import torch

    end = time.time() + args.budget
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}",
          flush=True)
    for op in args.op.split(","):
        names = args.variants.split(",") if args.variants else SETS[args.set][op]
        run_op(op, args.rows, args.cols, names, torch, flush, args.reps, end, not args.no_fe, not args.no_sub)


if __name__ == "__main__":
    main()
