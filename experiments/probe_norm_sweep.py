"""GPU probe: layer / RMS norm forward at 8192 x 1024 FP32 (or --rows / --cols), many kernel variants launched
directly beside cuDNN (cudnn-frontend), the benchmark's own ncudnn implementation and a few floor references,
timed by the benchmark's loop (bench.timing.measure: L2 flush, CUDA events, median) in ROUNDS alternating
rounds within one process. Prints, per variant, the median over rounds and the per-round ratio to cuDNN
(min / median / max): a variant is faster than cuDNN only where its worst round is.

Every variant's outputs are checked against float64 first (relerr: worst of y / mean / inv; BAD past 1e-5).

    python3 experiments/probe_norm_sweep.py                     # LN + RMS, the default variant set, 8 rounds
    python3 experiments/probe_norm_sweep.py --op rms --rounds 12 --only fe,sub128-ef,pipe-w4s4b3-ef

``--consumer``: every norm implementation is timed together with a ``torch.sum`` of its own y right after it (what
the next layer reading y finds in the L2: the evict-first y stores leave less of it there). Floor references are
left out then.

Floor references (bytes as the op's): ``copy`` a torch copy x -> y; ``read`` torch.sum(x) (32 MB read, a
scalar written); ``write`` y.zero_() (32 MB written); ``empty`` a one-element fill (the launch alone).

Variant names: ``sub<threads a row>[r<rows a block>][t<rows a thread>]-<x policy><y policy>`` the sub-block
kernel (ncudnn.kernels.norm.row_fwd_sub; e = evict_first, n = none), ``pipe-w<warps>s<stages>b<blocks an
SM>[-regs][-two]-ef|-en|-nn`` the persistent cp.async kernel (ef: evict-first x copies and y stores, en: x
only) (ncudnn.kernels.norm.row_fwd_pipe).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EPS = 1e-5
POL = {"e": "evict_first", "n": None}

#: sub-block variants: name -> (threads a row, rows a block, rows a thread, x policy, y policy)
SUB = {"sub128-ee": (128, 1, 1, "e", "e"), "sub128-nn": (128, 1, 1, "n", "n"), "sub128-en": (128, 1, 1, "e", "n"),
       "sub128t2-ee": (128, 1, 2, "e", "e"), "sub128t2-nn": (128, 1, 2, "n", "n"), "sub256-ee": (256, 1, 1, "e", "e"),
       "sub128r2-ee": (128, 2, 1, "e", "e"), "sub64r2-ee": (64, 2, 1, "e", "e"), "sub32r4-ee": (32, 4, 1, "e", "e"),
       "sub32r4-nn": (32, 4, 1, "n", "n")}
#: pipe variants: name -> (warps, stages, blocks an SM, stats, params, L2 policy[, policy on y's stores too])
PIPE = {"pipe-w4s4b3-nn": (4, 4, 3, "shift", "smem", None), "pipe-w4s4b3-ef": (4, 4, 3, "shift", "smem", "evict_first"),
        "pipe-w4s4b3-regs-nn": (4, 4, 3, "shift", "regs", None),
        "pipe-w4s4b3-en": (4, 4, 3, "shift", "smem", "evict_first", False),
        "pipe-w4s4b3-regs-en": (4, 4, 3, "shift", "regs", "evict_first", False),
        "pipe-w4s4b3-regs-ef": (4, 4, 3, "shift", "regs", "evict_first"),
        "pipe-w4s3b4-ef": (4, 3, 4, "shift", "smem", "evict_first"),
        "pipe-w2s8b3-ef": (2, 8, 3, "shift", "smem", "evict_first"),
        "pipe-w4s4b3-two-ef": (4, 4, 3, "two", "smem", "evict_first"),
        "pipe-w8s2b2-ef": (8, 2, 2, "shift", "smem", "evict_first"),
        "pipe-w2s6b4-ef": (2, 6, 4, "shift", "smem", "evict_first")}
FLOOR = ("copy", "read", "write", "empty")


def _prepare(op, rows, cols, names, torch):
    """name -> fn for every requested implementation that builds and checks out (failures printed)."""
    from bench import data, ncudnn_runners, ref_runners
    from probe_norm_pipe import _case, _relerr

    from ncudnn.kernels.norm import row_fwd_pipe as kp
    from ncudnn.kernels.norm import row_fwd_sub as ks
    from ncudnn.kernels.primitives import warp as kprim
    from ncudnn.kernels.runtime.launch import CompiledKernel

    ln = op == "ln"
    c = _case("layernorm_fwd" if ln else "rmsnorm_fwd", rows, cols)
    inputs = data.torch_inputs(c)
    truth = ref_runners.truth(c, inputs)
    roles = ("y", "mean", "inv_var") if ln else ("y", "inv_var")
    want = {r: truth[r] for r in roles}
    x, w = inputs["x"].reshape(-1), inputs["scale"].reshape(-1)
    b = inputs["bias"].reshape(-1) if ln else w
    stream = torch.cuda.current_stream().cuda_stream
    sms = kprim.sm_count()
    fns, notes, ys = {}, {}, {}

    def check(name, fn, outs):
        for o in outs.values():
            o.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = _relerr({r: outs[r] for r in roles if r in outs}, want)
        notes[name] = f"relerr {err:.1e}{'  BAD' if err > 1e-5 else ''}"
        fns[name], ys[name] = fn, outs["y"]

    y = torch.empty_like(x)
    mean, inv = torch.empty(rows, device="cuda"), torch.empty(rows, device="cuda")
    outs = {"y": y, "mean": mean, "inv_var": inv}
    f = "float32[::1]"
    sig = f"void({f}, {f}, {f}, {f}, {f}, {f}, float64, int64)"
    args = (x, w, b, y, mean, inv, EPS, rows)
    for name in names:
        t0 = time.time()
        try:
            if name in ("fe", "ncudnn"):     # the bench's own implementations, prepared as it does
                impls = ref_runners.fe_impls(c, inputs) if name == "fe" else ncudnn_runners.impls(c, inputs, True)
                p = [i for i in impls if name == "fe" or i.name == "ncudnn"][0].prepare()
                p.fn()
                torch.cuda.synchronize()
                got = p.result()
                fns[name], ys[name] = p.fn, got["y"]
                notes[name] = f"relerr {_relerr({r: got[r] for r in roles if r in got}, want):.1e}" + \
                    ("" if name == "fe" else f" {p.detail[:70]}")
            elif name == "copy":
                yc = torch.empty_like(x)
                fns[name] = lambda yc=yc: yc.copy_(x)
            elif name == "read":
                fns[name] = lambda: torch.sum(x)
            elif name == "write":
                yw = torch.empty_like(x)
                fns[name] = lambda yw=yw: yw.zero_()
            elif name == "empty":
                e1 = torch.empty(1, device="cuda")
                fns[name] = lambda e1=e1: e1.zero_()
            elif name in SUB:
                tpr, rpb, rpt, xh, yh = SUB[name]
                disp, _ = ks.row_fwd_sub_kernel(cols, tpr, rpb, 4, ln, ln, True, "float32", "float32", "float32",
                                                 "float32", None, two_pass=False, preload=True, rpt=rpt,
                                                 xhint=POL[xh], yhint=POL[yh])
                k = CompiledKernel(disp, sig)
                pl = k.prepare(-(-rows // (rpb * rpt)), tpr * rpb, args, 0)
                check(name, lambda pl=pl: pl.run(None, stream), outs)
                notes[name] += f" regs {k.attrs.get('regs', '?')} local {k.attrs.get('local', '?')}"
            elif name in PIPE:
                warps, stages, bps, stats, params, hint, *hint_y = PIPE[name]
                if not kp.pipe_fits(cols, warps, stages, bps, ln, params):
                    print(f"  {name}: does not fit {bps} blocks an SM", flush=True)
                    continue
                disp, _ = kp.row_fwd_pipe_kernel(cols, warps, stages, ln, ln, True, stats=stats, params=params,
                                                 bps=bps, hint=hint, hint_y=hint_y[0] if hint_y else True)
                k = CompiledKernel(disp, sig)
                grid, block, shared = kp.pipe_geometry(cols, warps, stages, bps, sms, ln, params)
                pl = k.prepare(grid, block, args, shared)
                check(name, lambda pl=pl: pl.run(None, stream), outs)
                notes[name] += f" regs {k.attrs.get('regs', '?')} local {k.attrs.get('local', '?')} grid {grid}"
            else:
                print(f"  {name}: unknown", flush=True)
                continue
            notes[name] = notes.get(name, "") + f" (build {time.time() - t0:.1f} s)"
        except Exception as e:  # one variant failing must not hide the others
            print(f"  {name}: ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
            fns.pop(name, None)
    nbytes = 2 * rows * cols * 4 + (len(roles) - 1) * rows * 4
    return fns, notes, nbytes, ys


def run(op, rows, cols, names, rounds, budget, torch, consumer=False):
    from bench.timing import TorchClock, measure

    clock = TorchClock()
    fns, notes, nbytes, ys = _prepare(op, rows, cols, names, torch)
    if consumer:     # the norm, then a sum reading its y (bytes: the norm's plus y once more)
        fns = {n: (lambda f=f, y=ys[n]: (f(), torch.sum(y))) for n, f in fns.items() if n in ys}
        nbytes += rows * cols * 4
    order = [n for n in names if n in fns]
    per = {n: [] for n in order}
    print(f"== {'LayerNorm' if op == 'ln' else 'RMSNorm'} fwd training FP32 {rows}x{cols}"
          f"{', then torch.sum(y)' if consumer else ''} "
          f"({nbytes / 1e6:.1f} MB): {len(order)} implementations, {rounds} rounds", flush=True)
    for r in range(rounds):
        for n in (order if r % 2 == 0 else order[::-1]):
            per[n].append(measure(fns[n], clock, budget, 3, 5, 200).median_ms)
        print(f"  round {r}: " + " ".join(f"{n} {per[n][-1]:.4f}" for n in order), flush=True)
    fe = per.get("fe")
    for n in order:
        med = statistics.median(per[n])
        s = f"  {n:22s} {med:8.4f} ms {nbytes / (med * 1e-3) / 1e9:6.0f} GB/s"
        if fe:
            q = sorted(fe[i] / per[n][i] for i in range(rounds))
            s += f"  fe/this min {q[0]:.3f} med {statistics.median(q):.3f} max {q[-1]:.3f}"
        print(s + "  " + notes.get(n, ""), flush=True)
    print(flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", default="ln,rms")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--budget", type=float, default=0.03, help="timed seconds an implementation a round")
    ap.add_argument("--only", default="", help="comma-separated implementation names (default: all)")
    ap.add_argument("--consumer", action="store_true", help="time each norm with a torch.sum of its y after it")
    args = ap.parse_args(argv)
    import torch

    names = args.only.split(",") if args.only else ["fe", "ncudnn", *FLOOR, *SUB, *PIPE]
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}",
          flush=True)
    for op in args.op.split(","):
        run(op, args.rows, args.cols, names, args.rounds, args.budget, torch, args.consumer)


if __name__ == "__main__":
    main()
