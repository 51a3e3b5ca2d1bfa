"""GPU probe: the split-K reduce kernels alone (old wide v1, new wide direct / transpose stores / rows
layout, 4-slice load batches, narrow, the tensor-core conv's vector reduce "tcvec" / "tcvec4"),
beside torch's own sum over the slices, then whole FP32 GEMMs forced to a split through the engines.

Run on the GPU machine::

    python3 experiments/probe_splitk_reduce.py                      # every case of CASES, then the GEMMs
    python3 experiments/probe_splitk_reduce.py --cases 65536x1024x8 --no-gemm
    python3 experiments/probe_splitk_reduce.py --tune 8192x8192x8192 --top 4   # autotuner vs bench timing

What it measures: out[m, n] = sum_s ws[s, m, n] (fp32, alpha 1, beta 0, plain row-major output), every
kernel compiled through the kernel cache and launched as the engines launch it (one prepared
cuLaunchKernel). Time: CUDA events around one launch on torch's stream, the L2 flushed before every
rep (a 256 MB zero_()), median of --reps. GB/s = (S + 1) * M * N * 4 bytes / time (S slices read, one
output written). "err" = max |out - float64 sum| / max |float64 sum|; "same" = bit-identical to the
v1 wide reduce (the summation order is meant to be unchanged). A case with M * N not a multiple of
4 or a shifted workspace runs the scalar (4-byte load) path.
"""
import argparse
import sys
import time

import numpy as np

#: (M, N, S, workspace shift in elements): the brief's four, the scalar path, a rows-layout case,
#: and narrow-range slices (4) for the WIDE_FROM decision
CASES = [(65536, 1024, 8, 0), (16384, 4096, 8, 0), (8192, 8192, 16, 0), (4096, 1024, 12, 0),
         (65536, 1023, 8, 0), (65536, 1024, 8, 1), (256, 256, 512, 0), (2048, 1024, 64, 0),
         (65536, 1024, 4, 0), (16384, 1024, 2, 0)]
#: (M, N, K, engine, knobs): whole GEMMs forced to a split
GEMMS = [(65536, 1024, 64, "matmul_small", (("CUDNN_KNOB_TYPE_SPLIT_K", 8),)),
         (65536, 1024, 64, "matmul_simt", (("CUDNN_KNOB_TYPE_SPLIT_K", 8),)),
         (65536, 1024, 64, "matmul_simt", ())]


def flushed_ms(fn, torch, flush, reps):
    """Median CUDA-event ms of ``fn``, the L2 flushed (``flush.zero_()``) before every rep."""
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return float(np.median(ts))


def kernels():
    """{name: (kernel, grid function(total, splits))} of the reduces compared."""
    from ncudnn.kernels.pointwise import epilogue as ep
    from ncudnn.kernels.gemm import splitk
    from ncudnn.kernels.gemm.operands import strided_output
    out, epi = strided_output(), ep.build(ep.EpilogueSpec())
    narrow = lambda t, s: (max(1, -(-t // splitk.REDUCE_THREADS)), splitk.REDUCE_THREADS)  # noqa: E731
    rows = lambda t, s: (max(1, -(-t // 128)), 32 * splitk.WIDE_ROWS)  # noqa: E731
    return {"v1": (splitk.make_reduce_wide_v1(out, epi), lambda t, s: splitk.wide_grid_v1(t)),
            "direct": (splitk.make_reduce_wide(out, epi, store_mode="direct"),
                       lambda t, s: splitk.wide_grid(t, splits=s)),
            "batch4": (splitk.make_reduce_wide(out, epi, batch=4), lambda t, s: splitk.wide_grid(t, splits=s)),
            "transp": (splitk.make_reduce_wide(out, epi, store_mode="transpose"),
                       lambda t, s: splitk.wide_grid(t, splits=s)),
            "rows": (splitk.make_reduce_wide(out, epi), rows),          # the default (transpose) kernel
            "narrow": (splitk.make_reduce(out, epi), narrow)}


def tc_vec_run(M, N, S, ws, c, gc, kcache, batch=1):
    """run(None, stream) of the tensor-core conv's vector reduce (kernels/tc_conv/splitk.py), the one
    conv_tc uses for N % 4 == 0, over the same partials (``batch`` 4: four slices' loads at once)."""
    from ncudnn.kernels.pointwise import epilogue as ep
    from ncudnn.kernels.tc_conv import splitk as tsk
    kern = tsk.make_split_reduce_vec(ep.EpilogueSpec(), "float32", "float32", batch)
    args = tsk.vec_args(ws, S, c, c, c, M, N, N, 1)
    k = kcache.get_or_compile(f"probe_skr|tcvec{batch}", lambda: kern, gc.argtypes(args))
    g, b = tsk.vec_launch(M, N)
    return k.prepare(g, b, args).run


def reduce_cases(cases, reps, torch, flush, deadline):
    from ncudnn import memory
    from ncudnn.engines.gemm import common as gc
    from ncudnn.kernels.runtime import kcache
    i64 = np.int64
    ks = kernels()
    for M, N, S, shift in cases:
        if time.time() > deadline:
            print(f"reduce {M}x{N} S={S}: SKIPPED (budget)", flush=True)
            continue
        gen = torch.Generator(device="cuda").manual_seed(0)
        wt = torch.rand(S * M * N + shift, device="cuda", generator=gen) - 0.5
        ws = gc.Flat(memory.as_view(wt).ptr + 4 * shift, S * M * N, "float32")
        truth = wt[shift:].view(S, M * N).double().sum(0)
        scale = float(truth.abs().max())
        ct = torch.empty(M * N, device="cuda")
        c = gc.Flat(memory.as_view(ct).ptr, M * N, "float32")
        args = (ws, i64(S), (c, i64(0), i64(0), i64(1), i64(N), i64(1)), (c, i64(0), i64(0)),
                (c, i64(0), i64(0), i64(1), i64(0), i64(0)), i64(1), i64(M), i64(N), np.float32(1), np.float32(0))
        gb = (S + 1) * M * N * 4 / 1e9
        tref = flushed_ms(lambda: torch.sum(wt[shift:].view(S, M * N), 0, out=ct), torch, flush, reps)
        line = [f"reduce {M:6d}x{N:<5d} S={S:<4d} shift {shift}  torch.sum {tref * 1e3:8.1f} us {gb / tref * 1e3:6.0f} GB/s"]
        ref_out = None
        stream = torch.cuda.current_stream().cuda_stream
        for name, (kern, grid) in ks.items():
            if name == "narrow" and S > 16 or name == "rows" and M * N >= (1 << 21):
                continue
            try:
                kname = "transp" if name == "rows" else name       # one kernel, two launch layouts
                k = kcache.get_or_compile(f"probe_skr|{kname}", lambda kern=kern: kern, gc.argtypes(args))
                g = grid(M * N, S)
                run = k.prepare(g[0], g[1], args).run
                ct.fill_(float("nan"))
                run(None, stream)
                torch.cuda.synchronize()
                err = float((ct.double() - truth).abs().max()) / scale
                same = ""
                if name == "v1":
                    ref_out = ct.clone()
                elif ref_out is not None:
                    same = " same" if torch.equal(ct, ref_out) else " DIFF"
                ms = flushed_ms(lambda: run(None, stream), torch, flush, reps)
                line.append(f"{name} {ms * 1e3:9.1f} us {gb / ms * 1e3:6.0f} GB/s err {err:.0e}{same}")
            except Exception as e:  # noqa: BLE001
                line.append(f"{name} {type(e).__name__}: {str(e)[:200]}")
        for batch in ((1, 4) if N % 4 == 0 and not shift else ()):
            try:
                run = tc_vec_run(M, N, S, ws, c, gc, kcache, batch)
                ct.fill_(float("nan"))
                run(None, stream)
                torch.cuda.synchronize()
                err = float((ct.double() - truth).abs().max()) / scale
                same = "" if ref_out is None else (" same" if torch.equal(ct, ref_out) else " DIFF")
                ms = flushed_ms(lambda: run(None, stream), torch, flush, reps)
                line.append(f"tcvec{'4' if batch == 4 else ''} {ms * 1e3:9.1f} us {gb / ms * 1e3:6.0f} GB/s "
                            f"err {err:.0e}{same}")
            except Exception as e:  # noqa: BLE001
                line.append(f"tcvec {type(e).__name__}: {str(e)[:200]}")
        print(" | ".join(line), flush=True)


def gemm_cases(reps, torch, flush, deadline):
    from ncudnn.engines import api, registry
    from ncudnn.ir import Matmul, OpGraph, TensorDesc, packed_strides
    from ncudnn.types import cudnnBackendKnobType_t as K
    from ncudnn.types import cudnnDataType_t as DT
    torch.backends.cuda.matmul.allow_tf32 = False
    for M, N, K_, engine, knobs in GEMMS:
        if time.time() > deadline:
            print(f"gemm {M}x{N}x{K_} {engine} {knobs}: SKIPPED (budget)", flush=True)
            continue

        def t(uid, d):
            return TensorDesc(uid, d, packed_strides(d), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")
        g = OpGraph([Matmul("mm", {"A": t(1, (1, M, K_)), "B": t(2, (1, K_, N))}, {"C": t(3, (1, M, N))})],
                    compute_dtype=DT.CUDNN_DATA_FLOAT).finalize()
        gen = torch.Generator(device="cuda").manual_seed(0)
        ta = torch.rand(1, M, K_, device="cuda", generator=gen) - 0.5
        tb = torch.rand(1, K_, N, device="cuda", generator=gen) - 0.5
        tc = torch.empty(1, M, N, device="cuda")
        want = torch.matmul(ta.double(), tb.double())
        scale = float(want.abs().max())
        ref = flushed_ms(lambda: torch.matmul(ta, tb, out=tc), torch, flush, reps)
        tag = f"gemm {M}x{N}x{K_} {engine} {dict((k.replace('CUDNN_KNOB_TYPE_', ''), v) for k, v in knobs)}"
        try:
            sub = api.problem(g)
            eng = registry.by_name(engine)
            cfg = eng.default_config(sub)
            for name, v in knobs:
                cfg = cfg.with_knob(getattr(K, name), v)
            ok, why = eng.keep(sub, cfg, api.context(None))
            if ok != 0:
                print(f"{tag}: refused: {why}", flush=True)
                continue
            plan = api.build_plan(g, cfg)
            ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
            pack = {1: ta, 2: tb, 3: tc}
            tc.fill_(float("nan"))
            api.execute(plan, pack, ws)
            torch.cuda.synchronize()
            err = float((tc.double() - want).abs().max()) / scale
            ms = flushed_ms(lambda: api.execute(plan, pack, ws), torch, flush, reps)
            print(f"{tag}: {ms:.4f} ms  torch.matmul {ref:.4f} ms  x torch {ref / ms:.2f}  err {err:.1e}  "
                  f"ws {plan.workspace_size / 1e6:.0f} MB", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)


def autotune_check(shape, top, reps, torch, flush, deadline):
    """The engine autotuner's time for each of the heuristic's first ``top`` plans of a TF32 GEMM beside
    the bench's flushed timing of the same plan (bench/timing.py's method, here flushed_ms): the
    autotuner's pick should be the bench's pick (the ranks agree, the times within noise)."""
    import ncudnn as cudnn
    M, N, K_ = shape
    F = cudnn.data_type.FLOAT
    g = cudnn.pygraph(name="probe_tune", io_data_type=F, intermediate_data_type=F, compute_data_type=F)
    a = g.tensor(name="a", dim=[1, M, K_], stride=[M * K_, K_, 1], data_type=F)
    b = g.tensor(name="b", dim=[1, K_, N], stride=[K_ * N, N, 1], data_type=F)
    c = g.matmul(A=a, B=b, compute_data_type=F)
    c.set_output(True).set_dim([1, M, N]).set_stride([M * N, N, 1]).set_data_type(F)
    g.select_numeric_notes([cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    g.build([cudnn.heur_mode.A])
    gen = torch.Generator(device="cuda").manual_seed(0)
    ta = torch.rand(1, M, K_, device="cuda", generator=gen) - 0.5
    tb = torch.rand(1, K_, N, device="cuda", generator=gen) - 0.5
    tc = torch.empty(1, M, N, device="cuda")
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    pack = {a: ta, b: tb, c: tc}
    torch.backends.cuda.matmul.allow_tf32 = True
    ref = flushed_ms(lambda: torch.matmul(ta, tb, out=tc), torch, flush, reps)
    print(f"tune {M}x{N}x{K_} TF32: torch.matmul (TF32) {ref:.3f} ms", flush=True)
    rows = []
    for i in range(min(top, g.get_execution_plan_count())):
        if time.time() > deadline:
            print(f"tune plan {i}: SKIPPED (budget)", flush=True)
            continue
        try:
            t0 = time.time()
            (idx, name, tuned), = g.autotune(pack, ws, store=False, indices={i})
            t_tune = time.time() - t0
            bench = flushed_ms(lambda: g.execute_plan_at_index(pack, ws, i), torch, flush, reps)
            rows.append((i, name, tuned, bench))
            print(f"tune plan {i} {name[:60]:60s} autotune {tuned:8.3f} ms  bench {bench:8.3f} ms  "
                  f"ratio {tuned / bench:5.2f}  (tune call {t_tune:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"tune plan {i}: {type(e).__name__}: {str(e)[:300]}", flush=True)
    if rows:
        pick = min(rows, key=lambda r: r[2])
        best = min(rows, key=lambda r: r[3])
        print(f"tune {M}x{N}x{K_}: autotune picks plan {pick[0]} (bench {pick[3]:.3f} ms); bench's best plan "
              f"{best[0]} ({best[3]:.3f} ms): {'AGREE' if pick[0] == best[0] else 'DISAGREE'}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="", help="comma-separated MxNxS[+shift] list (default: CASES)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--budget", type=float, default=80.0, help="seconds after which cases are skipped")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--tune", default="", help="MxNxK: only the autotune-vs-bench check of a TF32 GEMM")
    ap.add_argument("--top", type=int, default=4, help="plans of the autotune check")
    args = ap.parse_args()
    cases = []
    for s in filter(None, args.cases.split(",")):
        body, _, shift = s.partition("+")
        cases.append(tuple(int(v) for v in body.split("x")) + (int(shift or 0),))
    import torch
    deadline = time.time() + args.budget
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  median of {args.reps}, L2 flushed per rep",
          flush=True)
    if args.tune:
        autotune_check(tuple(int(v) for v in args.tune.split("x")), args.top, args.reps, torch, flush, deadline)
        return 0
    reduce_cases(cases or CASES, args.reps, torch, flush, deadline)
    if not args.no_gemm:
        gemm_cases(args.reps, torch, flush, deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
