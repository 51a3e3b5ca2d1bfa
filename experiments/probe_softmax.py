"""GPU probe: softmax forward row kernels side by side with torch (issue #4, softmax at memory speed).

Run on the GPU machine (torch with CUDA; about a minute with every JIT compile)::

    python3 experiments/probe_softmax.py                 # every group
    python3 experiments/probe_softmax.py f32_32768       # only the groups named (see GROUPS)
    python3 experiments/probe_softmax.py --dry           # generate and compile nothing on a GPU: list variants

Variants are kernel-layer launches (a :class:`ncudnn.kernels.runtime.launch.PreparedLaunch` each, on torch's
current stream), not engine plans, so every kernel shape can be compared:

* ``online v512 u8``: the vector online kernel (reads the row twice; the session-3 winner);
* ``persist pf B<threads>``: the persistent kernel, row in registers, the next row prefetched into
  shared memory with cp.async (one block per SM unless ``ctas`` says otherwise); ``pf2``: the next two;
* ``persist regs B<threads>``: the same kernel without the prefetch (rows loaded straight into registers);
  ``ctas=rows``: one block per row (not persistent).

Each variant is first checked against a float64 oracle (torch float64 on the GPU): relerr = max |y - ref| /
max |ref| ("BAD" past 1e-5 for FP32 I/O, 1e-2 for BF16), then timed: per rep an L2 flush (a 256 MB write),
CUDA events around one launch; median of REPS reps. GB/s = (bytes of x read + y written) / time;
%BW = GB/s / COPY_GBPS (4210, the H200's measured copy); "vs torch" = torch time / ours (> 1: faster).
"""
import argparse
import sys
import time

import numpy as np
from probe_timing import flushed_median_ms

COPY_GBPS = 4210.0
REPS = 30
FLUSH_BYTES = 256 << 20


def _variants(rows, n, dt, log, sms, wide=False, online_ref=False):
    """(label, factory) pairs; a factory returns (compiled kernel, grid, threads, shared bytes).
    ``wide``: also blocks below 1024 threads and the one-block-per-row launch; ``online_ref``: the
    vector online kernel (today's path for rows past the persistent kernel's registers)."""
    from ncudnn.kernels.runtime import kcache
    from ncudnn.kernels.softmax import axis as ksm
    from ncudnn.kernels.runtime.dtypes import array_sig, storage_dtype
    vec = 16 // storage_dtype(dt).itemsize
    sig = f"void({array_sig(dt)}, {array_sig(dt)}, int64)"

    def online(block, unroll):
        def f():
            kern, (grid, threads, _), _ = ksm.fwd_vec_kernel(rows, n, log, vec, block, 0, unroll, dt, dt, True)
            return kcache.get_or_compile(f"probe_sm_online:{rows}:{n}:{log}:{block}:{unroll}:{dt}", lambda: kern,
                                         sig), grid, threads, 0
        return f

    def regs_vec(block, rpb):
        def f():
            kern, (grid, threads, _), _ = ksm.fwd_vec_kernel(rows, n, log, vec, block, rpb, 4, dt, dt)
            return kcache.get_or_compile(f"probe_sm_vec:{rows}:{n}:{log}:{block}:{rpb}:{dt}", lambda: kern,
                                         sig), grid, threads, 0
        return f

    def persist(block, prefetch, ctas):
        def f():
            kern, threads, shared, _ = ksm.persist_kernel(n, log, vec, block, prefetch, dt, dt)
            ck = kcache.get_or_compile(f"probe_sm_persist:{n}:{log}:{block}:{int(prefetch)}:{dt}", lambda: kern, sig)
            return ck, ksm.persist_grid(rows, ctas, sms), threads, shared
        return f

    def scalar():
        def f():
            kern, (grid, threads, shared), _ = ksm._fwd_kernel(rows, n, 1, log, 0, dt, dt)
            return kcache.get_or_compile(f"probe_sm_scalar:{rows}:{n}:{log}:{dt}", lambda: kern, sig), grid, \
                threads, shared
        return f

    out = []
    short = n <= ksm.WARP_ROW_MAX
    if short:
        out.append(("warp regs v32 rows4 (today's default)", regs_vec(32, 4)))
    elif ksm.softmax_config(n)[2]:
        out.append(("scalar regs (today's default)", scalar()))
    elif online_ref:
        out.append(("online v512 u8 (session-3 best)", online(512, 8)))
    for block in (1024, 512, 256, 128):
        cfg = ksm.persist_config(n, vec, block)
        if cfg is None or block > n // vec:
            continue
        tag = f"B{block} vpt{cfg[1]}"
        if short:
            if block <= 256:
                out += [(f"persist pf {tag} ctas={k}xSMs", persist(block, 1, k * sms)) for k in (4, 8)]
            continue
        if block < 1024 and not wide:
            continue
        out.append((f"persist regs {tag} ctas=SMs", persist(block, 0, sms)))
        out.append((f"persist pf {tag} ctas=SMs", persist(block, 1, sms)))
        if 2 * n * storage_dtype(dt).itemsize <= ksm.PERSIST_SMEM_MAX:
            out.append((f"persist pf2 {tag} ctas=SMs", persist(block, 2, sms)))
        if block == 1024 and dt == "float32" and not log and wide:
            out.append((f"persist regs {tag} ctas=rows", persist(block, 0, rows)))
    return out


GROUPS = {
    "f32_32768": (8192, 32768, "float32", False),
    "log_f32_32768": (8192, 32768, "float32", True),
    "bf16_32768": (8192, 32768, "bfloat16", False),
    "f32_1024": (8192, 1024, "float32", False),
    "f32_16384": (8192, 16384, "float32", False),
}


def _time(fn, torch, flush, reps=REPS):
    return flushed_median_ms(fn, torch, flush, reps)


def _row(label, ms, nbytes, torch_ms, extra=""):
    gbs = nbytes / (ms * 1e-3) / 1e9
    return (f"  {label:44s} {ms:8.4f} ms {gbs:7.0f} GB/s {100 * gbs / COPY_GBPS:5.1f}%BW "
            f"vs torch {torch_ms / ms:5.2f}x {extra}")


def _view(t):
    from ncudnn.kernels.runtime.launch import ArgView
    st = np.dtype(np.uint16) if t.element_size() == 2 else np.dtype(np.float32)
    return ArgView(t.data_ptr(), (t.numel(),), (st.itemsize,), st.itemsize, st)


def _graph(rows, n, dt, log):
    """The softmax (log-softmax) pattern over the rows of a packed (rows, n) tensor, as front ends lower it."""
    from ncudnn.ir import OpGraph, Pointwise, Reduction, TensorDesc, packed_strides
    from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO
    d = DT.CUDNN_DATA_BFLOAT16 if dt == "bfloat16" else DT.CUDNN_DATA_FLOAT
    x = TensorDesc(1, (rows, n), packed_strides((rows, n)), d, name="x")
    y = TensorDesc(2, (rows, n), packed_strides((rows, n)), d, name="y")
    m = TensorDesc(10, (rows, 1), (1, 1), DT.CUDNN_DATA_FLOAT, is_virtual=True, name="m")
    sm = TensorDesc(13, (rows, 1), (1, 1), DT.CUDNN_DATA_FLOAT, is_virtual=True, name="s")
    dd, e, ls = (TensorDesc(u, is_virtual=True, name=nm) for u, nm in ((11, "d"), (12, "e"), (14, "ls")))
    nodes = [Reduction("max", {"X": x}, {"Y": m}, mode=RO.CUDNN_REDUCE_TENSOR_MAX),
             Pointwise("sub", {"X": x, "B": m}, {"Y": dd}, mode=PM.CUDNN_POINTWISE_SUB),
             Pointwise("exp", {"X": dd}, {"Y": e}, mode=PM.CUDNN_POINTWISE_EXP),
             Reduction("sum", {"X": e}, {"Y": sm}, mode=RO.CUDNN_REDUCE_TENSOR_ADD)]
    if log:
        nodes += [Pointwise("log", {"X": sm}, {"Y": ls}, mode=PM.CUDNN_POINTWISE_LOG),
                  Pointwise("sub2", {"X": dd, "B": ls}, {"Y": y}, mode=PM.CUDNN_POINTWISE_SUB)]
    else:
        nodes.append(Pointwise("div", {"X": e, "B": sm}, {"Y": y}, mode=PM.CUDNN_POINTWISE_DIV))
    return OpGraph(nodes).finalize()


def _engine_variant(rows, n, dt, log, torch):
    """(label, run factory) of the heuristic's first config built through the engine API (what a user
    gets by default), run with ExecutionPlan.execute on torch tensors."""
    from ncudnn.engines import api
    from ncudnn.types import cudnnBackendKnobType_t as K
    g = _graph(rows, n, dt, log)
    cfg = api.get_heuristics(g)[0].config
    label = "engine default " + " ".join(f"{K(k).name[len('CUDNN_KNOB_TYPE_'):]}={v}" for k, v in cfg.knobs if v)

    def make(x, y, stream):
        plan = api.build_plan(g, cfg)
        ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
        step = plan.parts[0].steps[0]
        return (lambda: plan.execute({1: x, 2: y}, ws, stream)), \
            f"{step.name} grid {step.grid}x{step.block} smem {step.shared >> 10}K"
    return label, make


def run_group(key, torch, flush, sms, budget_end, wide=False, online_ref=False):
    rows, n, dt, log = GROUPS[key]
    tdt = torch.bfloat16 if dt == "bfloat16" else torch.float32
    g = torch.Generator(device="cuda").manual_seed(1)
    x = (torch.randn(rows, n, device="cuda", generator=g) * 3).to(tdt)
    y = torch.empty_like(x)
    ref = (torch.log_softmax if log else torch.softmax)(x.double(), dim=1)
    scale = ref.abs().max().item()
    nbytes = 2 * x.numel() * x.element_size()
    fn_t = (lambda: torch.log_softmax(x, dim=1)) if log else (lambda: torch.softmax(x, dim=1))
    torch_ms = _time(fn_t, torch, flush)
    terr = (fn_t().double() - ref).abs().max().item() / scale
    copy_ms = _time(lambda: y.copy_(x), torch, flush)
    print(f"== {'log-' if log else ''}softmax fwd {dt} {rows}x{n}  (bytes {nbytes / 1e6:.1f} MB)", flush=True)
    print(_row("torch", torch_ms, nbytes, torch_ms, f"relerr {terr:.1e}"))
    print(_row("torch copy (y.copy_(x))", copy_ms, nbytes, torch_ms))
    tol = 1e-2 if dt == "bfloat16" else 1e-5
    stream = torch.cuda.current_stream().cuda_stream
    results = []
    for label, make in _variants(rows, n, dt, log, sms, wide, online_ref):
        if time.time() > budget_end:
            print(f"  {label:44s} skipped (time budget)")
            continue
        try:
            t0 = time.time()
            ck, grid, threads, shared = make()
            pl = ck.prepare(grid, threads, (_view(x), _view(y), rows), shared)
            y.fill_(float("nan"))
            pl.run(None, stream)
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item() / scale
            build = time.time() - t0
            ms = _time(lambda: pl.run(None, stream), torch, flush)
        except Exception as e:   # one variant failing must not hide the others
            print(f"  {label:44s} ERROR {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        a = ck.attrs
        res = f"regs {a.get('regs')} local {a.get('local')} smem {shared >> 10}K grid {grid}x{threads}"
        bad = "" if err <= tol else "  BAD"
        results.append((ms, label))
        print(_row(label, ms, nbytes, torch_ms, f"relerr {err:.1e}{bad} ({res}; build {build:.1f} s)"), flush=True)
    if time.time() <= budget_end:
        try:
            t0 = time.time()
            label, make = _engine_variant(rows, n, dt, log, torch)
            y.fill_(float("nan"))
            fn, what = make(x, y, stream)
            fn()
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item() / scale
            build = time.time() - t0
            ms = _time(fn, torch, flush)
            bad = "" if err <= tol else "  BAD"
            results.append((ms, label))
            print(_row(label[:44], ms, nbytes, torch_ms, f"relerr {err:.1e}{bad} ({what}; build {build:.1f} s)"))
            print(f"    ({label})", flush=True)
        except Exception as e:
            print(f"  engine default ERROR {type(e).__name__}: {str(e)[:300]}", flush=True)
    if results:
        best = min(results)
        print(f"  -> fastest: {best[1]} {best[0]:.4f} ms ({torch_ms / best[0]:.2f}x torch, "
              f"{100 * nbytes / (best[0] * 1e-3) / 1e9 / COPY_GBPS:.1f}% of copy BW)")
    print(flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="*", help=f"groups to run (default all): {', '.join(GROUPS)}")
    ap.add_argument("--dry", action="store_true", help="list each group's variants, run nothing")
    ap.add_argument("--budget", type=float, default=100.0, help="seconds after which variants are skipped")
    ap.add_argument("--wide", action="store_true", help="also 512 / 256-thread blocks and one block per row")
    ap.add_argument("--online", action="store_true", help="also the vector online kernel (slow to build for BF16)")
    args = ap.parse_args(argv)
    keys = args.groups or list(GROUPS)
    bad = [k for k in keys if k not in GROUPS]
    if bad:
        ap.error(f"unknown groups {bad}; known: {list(GROUPS)}")
    if args.dry:
        for k in keys:
            print(k, [lab for lab, _ in _variants(*GROUPS[k], 132, args.wide, args.online)])
        return 0
    import torch

    from ncudnn.kernels.primitives.warp import sm_count
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{sm_count()} SMs; median of {REPS} reps, L2 flushed ({FLUSH_BYTES >> 20} MB) before each", flush=True)
    end = time.time() + args.budget
    for key in keys:
        run_group(key, torch, flush, sm_count(), end, args.wide, args.online)
    return 0


if __name__ == "__main__":
    sys.exit(main())
