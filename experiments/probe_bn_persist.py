"""Time the one-kernel batch-norm backward (ncudnn.kernels.norm.bn_persist) launched directly on the GPU, whole
and cut after its phases (``stop`` 1: the sums only; 2: sums + coefficients), NHWC FP32, L2 flushed before
every rep (median of 30). cuDNN on the same problem: experiments/probe_bn.py --set persist nhwc_bwd.

    python3 experiments/probe_bn_persist.py                  # N32 C256 56x56
    python3 experiments/probe_bn_persist.py --rows 100352 --channels 256
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: (threads, register rows, shared rows, unroll, cp.async shared rows, streaming hint on the on-chip rows' dx,
#: prefetched rows, barrier): barrier "cg" = this_grid().sync() (cooperative launch), "gbar" = the inline
#: grid_sync.grid_barrier on a plain launch, "gbar_coop" = the inline barrier on a cooperative launch
#: (a last entry: the cut points timed, default (0, 1, 2))
VARIANTS = ((512, 4, 8, 4, True, True, 0, "cg", (0, 2)), (512, 4, 8, 4, True, True, 0, "gbar", (0, 2)),
            (512, 4, 8, 4, True, True, 0, "gbar_coop", (0, 2)), (512, 4, 10, 4, False, True, 0, "gbar_coop", (0,)),
            (512, 4, 10, 4, True, True, 0, "gbar_coop", (0,)), (512, 4, 8, 4, True, True, 0, "cg", (0,)),
            (512, 4, 8, 4, True, True, 0, "gbar", (0,)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=32 * 56 * 56)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    import torch
    from probe_timing import flushed_median_ms

    from ncudnn.kernels.norm import bn_persist as kp
    from ncudnn.kernels.primitives import warp as kprim
    from ncudnn.kernels.runtime.launch import CompiledKernel

    R, C = args.rows, args.channels
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.rand(R, C, device=dev, generator=g) * 2 - 1
    dy = torch.rand(R, C, device=dev, generator=g) * 2 - 1
    mean = x.mean(0)
    inv = 1.0 / torch.sqrt(x.var(0, unbiased=False) + 1e-5)
    scale = torch.rand(C, device=dev, generator=g) + 0.5
    xh = (x.double() - mean.double()) * inv.double()
    dbias = dy.double().sum(0)
    dscale = (dy.double() * xh).sum(0)
    want = scale.double() * inv.double() * (dy.double() - dbias / R - xh * dscale / R)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    stream = torch.cuda.current_stream().cuda_stream
    sms = kprim.sm_count()
    print(f"device {torch.cuda.get_device_name()}, {sms} SMs; rows {R} x C {C} FP32 NHWC; "
          f"median of {args.reps}, L2 flushed before each", flush=True)
    dense = (("float32", 0, 1),) * len(kp.CHANNEL_ARRAYS)
    nbytes = R * C * 4 * 3
    from numba import cuda as ncuda
    import numpy as np

    for threads, nr, ns, unroll, acache, tail_hint, pf, mode, *stops in VARIANTS:
        gbar = mode != "cg"
        cfg = kp.persist_config(R, C, sms, threads)
        cpb, _ = kp.phase2_geometry(C, cfg.tiles * cfg.chunks, threads)
        shared = kp.shared_bytes(threads, ns, pf)
        row = []
        for stop in (stops[0] if stops else (0, 1, 2)):
            t0 = time.time()
            try:
                disp, _ = kp.persist_bwd_kernel(C, dense, cfg.txv, cfg.ty, cfg.tiles, nr, ns, unroll, cpb, True,
                                                acache, stop, tail_hint, pf, gbar)
                k = CompiledKernel(disp, kp.signature(dense, gbar))
                if mode == "gbar_coop":
                    k.cooperative = True
                dx = torch.full_like(x, float("nan"))
                ds, db = torch.empty(C, device=dev), torch.empty(C, device=dev)
                p0 = torch.empty(cfg.chunks * C, device=dev)
                p1 = torch.empty(cfg.chunks * C, device=dev)
                coef = torch.empty(3 * C, device=dev)
                kargs = (x.view(-1), dy.view(-1), dx.view(-1), p0, p1, coef, mean, inv, scale, ds, db, R,
                         cfg.chunk_rows, cfg.chunks, float(R)) + ((ncuda.to_device(np.zeros(1, np.uint32)),) if gbar else ())
                pl = k.prepare((cfg.tiles, cfg.chunks), (cfg.txv, cfg.ty), kargs, shared)
                fn = lambda: pl.run(None, stream)  # noqa: E731
                fn()
                torch.cuda.synchronize()
                err = ""
                if stop == 0:
                    e = ((dx.double() - want).abs().max() / want.abs().max()).item()
                    e2 = ((db.double() - dbias).abs().max() / dbias.abs().max()).item()
                    err = f" relerr dx {e:.1e} dbias {e2:.1e}{'  BAD' if max(e, e2) > 1e-4 else ''}"
                ms = flushed_median_ms(fn, torch, flush, args.reps)
                row.append(f"stop{stop} {ms:.4f} ms{err}")
                if stop == 0:
                    regs = k.attrs.get("regs", "?")
                    local = k.attrs.get("local", "?")
                    row.append(f"{nbytes / ms / 1e6:.0f} GB/s counted, regs {regs} local {local} "
                               f"(build {time.time() - t0:.1f} s)")
            except Exception as exc:  # one variant failing must not hide the others
                row.append(f"stop{stop} ERROR {type(exc).__name__}: {str(exc)[:160]}")
        print(f"  persist t{threads} r{nr} s{ns} u{unroll} {'cp.async' if acache else 'st.shared'}"
              f"{'' if tail_hint else ' tail plain'}{f' prefetch {pf}' if pf else ''} {mode}: " + " | ".join(row),
              flush=True)


if __name__ == "__main__":
    main()
