"""GPU probe: reduction and pointwise variants at the bench's issue-4 shapes, beside torch.

Run on the GPU machine (torch with CUDA; about 1-2 minutes with every JIT compile)::

    python3 experiments/probe_reduce.py                      # every group
    python3 experiments/probe_reduce.py amax rows            # only the groups named (see GROUPS)
    python3 experiments/probe_reduce.py --dry                # build every plan, run nothing (simulator)

Shapes are exactly those of bench/cases.py (FP32): reduce_sum_rows 8192x32768 -> (8192, 1, 1, 1),
reduce_sum_cols 32768x8192 -> (1, 8192, 1, 1), reduce_amax 8192x32768 -> (1, 1, 1, 1) (|x| max over
the whole tensor), bias + GELU and bias + ReLU on 8192x4096 (bias over the 4096 columns), relu on 64 Mi.

Each variant is an engine config (the heuristic's first config with knobs set) built through
``api.build_plan`` and run with ``ExecutionPlan.execute`` on torch tensors (torch's current stream),
checked against a float64 torch result first (relerr = max abs error / max |truth|; "BAD" past 1e-5 for
the reductions, 1e-4 for the pointwise ops), then timed: per rep an L2 flush (256 MB write), CUDA events
around one execute, median of REPS reps. GB/s = bytes / time with bytes as in bench/cases.py (reductions:
the input read once; pointwise: x read + y written); %BW = GB/s / 4210 (H200 copy); "vs torch" = torch
time / ours. regs: registers per thread of each launched kernel (main, combine). The last line of a group
names the fastest variant and the heuristic's first config.
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ncudnn.engines import api  # noqa: E402
from ncudnn.ir import OpGraph, Pointwise, Reduction, TensorDesc, packed_strides  # noqa: E402
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnDataType_t as DT,  # noqa: E402
                          cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO)
from probe_timing import flushed_median_ms  # noqa: E402

F32 = DT.CUDNN_DATA_FLOAT
COPY_GBPS = 4210.0
REPS = 30
FLUSH_BYTES = 256 << 20
KB, KS, KL, KR, KU, KC = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_SPLIT_K, K.CUDNN_KNOB_TYPE_LOAD_SIZE,
                          K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD,
                          K.CUDNN_KNOB_TYPE_CTA_COUNT)
NAMES = {KB: "BLOCK", KS: "SPLIT1", KL: "ELEM", KR: "ROWS", KU: "U", KC: "CTAS"}
PW_NAMES = {KB: "BLOCK", KU: "ASPT", KC: "WAVES"}
R, C = 8192, 32768


def _t(uid, dims, name, virtual=False):
    return TensorDesc(uid, tuple(dims), packed_strides(dims), F32, name=name, is_virtual=virtual)


def reduce_graph(rows, cols, out, mode):
    x, y = _t(1, (rows, cols, 1, 1), "x"), _t(2, out, "y")
    return OpGraph([Reduction("red", {"X": x}, {"Y": y}, mode=mode)]).finalize()


def pw_graph(rows, cols, act):
    x, y = _t(1, (rows, cols, 1, 1), "x"), _t(3, (rows, cols, 1, 1), "y")
    if act == "relu":
        return OpGraph([Pointwise("relu", {"X": x}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]).finalize()
    b = _t(2, (1, cols, 1, 1), "b")
    mode = PM.CUDNN_POINTWISE_RELU_FWD if act == "bias_relu" else PM.CUDNN_POINTWISE_GELU_FWD
    v = TensorDesc(10, is_virtual=True, name="xb")
    return OpGraph([Pointwise("add", {"X": x, "B": b}, {"Y": v}, mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("act", {"X": v}, {"Y": y}, mode=mode)]).finalize()


# ------------------------------------------------------------------------------ variants (first = most wanted)

ROWS_V = ([{}, {KL: 1}] + [{KB: b, KU: u} for b, u in ((512, 4), (1024, 2), (256, 8))]
          + [{KR: r, KU: u} for r, u in ((4, 4), (4, 8), (8, 4), (2, 8))])
AMAX_V = ([{}, {KL: 1}, {KB: 256, KC: 2}, {KB: 256, KC: 8}, {KB: 512, KC: 1}, {KB: 512, KC: 2}, {KB: 1024, KC: 1},
           {KB: 256, KU: 8, KC: 2}])
COLS_V = [{}, {KB: 512}]
PW_V = ([{}] + [{KB: b, KU: u, KC: w} for b, u, w in
                ((128, 4, 0), (256, 2, 0), (256, 4, 0), (512, 2, 0), (1024, 1, 0),
                 (128, 2, 1), (256, 4, 1), (512, 4, 1), (256, 4, 2), (128, 2, 8))])

#: bias + GELU with the heavy-kernel launch bounds varied (engines.pointwise.fused.HEAVY_THREADS; 0: unbounded)
GELU_BOUNDS_V = [({}, 1536), ({}, 0), ({}, 2048), ({}, 1024), ({KU: 4}, 1536), ({KU: 4}, 0), ({KB: 256}, 1536),
                 ({KU: 1}, 2048)]

GROUPS = {
    "rows": ("reduce_sum_rows 8192x32768", lambda: reduce_graph(R, C, (R, 1, 1, 1), RO.CUDNN_REDUCE_TENSOR_ADD),
             ROWS_V, R * C * 4),
    "amax": ("reduce_amax 8192x32768 (whole tensor)",
             lambda: reduce_graph(R, C, (1, 1, 1, 1), RO.CUDNN_REDUCE_TENSOR_AMAX), AMAX_V, R * C * 4),
    "gelu_bounds": ("bias_gelu 8192x4096, launch bounds varied", lambda: pw_graph(8192, 4096, "bias_gelu"),
                    GELU_BOUNDS_V, 2 * 8192 * 4096 * 4),
    "cols": ("reduce_sum_cols 32768x8192", lambda: reduce_graph(C, R, (1, R, 1, 1), RO.CUDNN_REDUCE_TENSOR_ADD),
             COLS_V, R * C * 4),
    "bias_gelu": ("bias_gelu 8192x4096", lambda: pw_graph(8192, 4096, "bias_gelu"), PW_V, 2 * 8192 * 4096 * 4),
    "bias_relu": ("bias_relu 8192x4096", lambda: pw_graph(8192, 4096, "bias_relu"), PW_V[:4] + PW_V[7:9], 2 * 8192 * 4096 * 4),
    "relu": ("relu 64Mi", lambda: pw_graph(1, 1 << 26, "relu"), PW_V[:3], 2 * (1 << 26) * 4),
}


#: shares of the time budget (variant builds are most of it)
WEIGHT = {"amax": 0.3, "rows": 0.3, "bias_gelu": 0.2, "bias_relu": 0.1, "cols": 0.1, "relu": 0.1, "gelu_bounds": 0.3}


def _label(cfg, default):
    names = PW_NAMES if cfg.engine == "pointwise_fused" else NAMES
    diff = [f"{names.get(K(k), K(k).name)}={v}" for k, v in cfg.knobs if dict(default.knobs).get(k) != v]
    return f"{cfg.engine}[{' '.join(diff) or 'default'}]"


def _configs(g, variants):
    ecs = api.get_heuristics(g)
    first, eng = ecs[0].config, ecs[0].engine
    out, seen = [], set()
    for knobs in variants:
        knobs, heavy = knobs if isinstance(knobs, tuple) else (knobs, None)
        cfg = first
        for k, v in knobs.items():
            cfg = cfg.with_knob(k, v)
        if (cfg, heavy) in seen:
            continue
        seen.add((cfg, heavy))
        st, why = api.check_support(g, cfg)
        label = _label(cfg, eng.default_config(api.problem(g))) + ("" if heavy is None else f" bounds={heavy}")
        out.append((label, cfg if int(st) == 0 else None, why, heavy))
    return first, out


def _regs(plan):
    regs = []
    for p in plan.parts:
        for ck in getattr(p, "compiled", None) if isinstance(getattr(p, "compiled", None), list) else \
                [getattr(p, "compiled", None)]:
            a = getattr(ck, "attrs", None) or {}
            regs.append(str(a.get("regs", "?")))
    return "/".join(regs)


def _torch_side(key, g, torch):
    tens = g.tensors()
    gen = torch.Generator(device="cuda").manual_seed(0)
    pack = {}
    for uid, t in tens.items():
        if not t.is_virtual and not t.is_by_value:
            pack[uid] = torch.randn(math.prod(t.dims), device="cuda", generator=gen).reshape(t.dims)
    x = pack[1]
    F = torch.nn.functional
    if key == "rows":
        return pack, 2, lambda: x.sum(dim=1, keepdim=True), lambda: x.double().sum(dim=1, keepdim=True)
    if key == "cols":
        return pack, 2, lambda: x.sum(dim=0, keepdim=True), lambda: x.double().sum(dim=0, keepdim=True)
    if key == "amax":
        return pack, 2, lambda: x.abs().amax().reshape(1, 1, 1, 1), lambda: x.double().abs().amax().reshape(1, 1, 1, 1)
    if key == "relu":
        return pack, 3, lambda: torch.relu(x), lambda: torch.relu(x.double())
    b = pack[2]
    act = torch.relu if key == "bias_relu" else F.gelu
    return pack, 3, lambda: act(x + b), lambda: act(x.double() + b.double())


def _time(fn, torch, flush, reps=REPS):
    return flushed_median_ms(fn, torch, flush, reps)


def _row(label, ms, nbytes, torch_ms, extra=""):
    gbs = nbytes / (ms * 1e-3) / 1e9
    return (f"  {label:52s} {ms:8.4f} ms {gbs:7.0f} GB/s {100 * gbs / COPY_GBPS:5.1f}%BW "
            f"vs torch {torch_ms / ms:5.2f}x {extra}")


def run_group(key, torch, flush, budget_end):
    title, make, variants, nbytes = GROUPS[key]
    g = make()
    first, cfgs = _configs(g, variants)
    pack, out_uid, ref, truth_fn = _torch_side(key, g, torch)
    truth = truth_fn()
    torch_ms = _time(ref, torch, flush)
    terr = (ref().double() - truth).abs().max().item() / (truth.abs().max().item() or 1.0)
    x = pack[1]
    dst = torch.empty_like(x)
    copy_ms = _time(lambda: dst.copy_(x), torch, flush)
    copy_bytes = 2 * x.numel() * 4
    print(f"== {title}  (bytes {nbytes / 1e6:.1f} MB)", flush=True)
    print(_row("torch", torch_ms, nbytes, torch_ms, f"relerr {terr:.1e}"))
    print(_row(f"torch copy of x ({copy_bytes / 1e6:.0f} MB moved)", copy_ms, copy_bytes, torch_ms))
    stream = torch.cuda.current_stream().cuda_stream
    tol = 1e-5 if key in ("rows", "cols", "amax") else 1e-4
    scale = truth.abs().max().item() or 1.0
    results = []
    from ncudnn.engines.pointwise import fused as epw
    for label, cfg, why, heavy in cfgs:
        if cfg is None:
            print(f"  {label:52s} refused: {why[:110]}")
            continue
        if time.time() > budget_end:
            print(f"  {label:52s} skipped (time budget)")
            continue
        try:
            t0 = time.time()
            saved = epw.HEAVY_THREADS
            epw.HEAVY_THREADS = saved if heavy is None else heavy
            if heavy is not None:   # the plan cache keys on graph + config, not on the bounds
                from ncudnn.engines.plancache import cache_for
                cache_for(None).clear()
            try:
                plan = api.build_plan(g, cfg)
            finally:
                epw.HEAVY_THREADS = saved
            ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
            pack[out_uid].fill_(float("nan"))
            fn = lambda: plan.execute(pack, ws, stream)  # noqa: E731
            fn()
            torch.cuda.synchronize()
            err = (pack[out_uid].double() - truth).abs().max().item() / scale
            build_s = time.time() - t0
            ms = _time(fn, torch, flush)
        except Exception as e:   # a variant failing must not hide the others
            print(f"  {label:52s} ERROR {type(e).__name__}: {str(e)[:200]}")
            continue
        bad = "" if err <= tol else "  BAD"
        results.append((ms, label, cfg))
        print(_row(label, ms, nbytes, torch_ms, f"relerr {err:.1e}{bad} regs {_regs(plan)} grid "
                   f"{_grids(plan)} (build {build_s:.1f} s)"), flush=True)
    if results:
        best = min(results, key=lambda r: r[0])
        dflt = [r for r in results if r[2] == first]
        print(f"  -> fastest: {best[1]} {best[0]:.4f} ms ({torch_ms / best[0]:.2f}x torch); heuristic first: "
              + (f"{dflt[0][1]} {dflt[0][0]:.4f} ms ({torch_ms / dflt[0][0]:.2f}x torch)" if dflt else f"{first}"))
    print(flush=True)


def _grids(plan):
    out = []
    for p in plan.parts:
        steps = getattr(p, "steps", None)
        if steps:
            out += [f"{s.grid}x{s.block}" for s in steps]
        elif hasattr(p, "grid"):
            mb = getattr(getattr(p, "meta", None), "spec", None)
            out.append(f"{p.grid}x{p.block}" + (f"(minblocks={mb.min_blocks})" if mb is not None else ""))
    return ",".join(str(o).replace(" ", "") for o in out)


def dry(keys):
    for key in keys:
        title, make, variants, _ = GROUPS[key]
        g = make()
        first, cfgs = _configs(g, variants)
        print(f"== {title}: heuristic first {first}")
        for label, cfg, why, _ in cfgs:
            if cfg is None:
                print(f"  {label:52s} refused: {why[:110]}")
                continue
            plan = api.build_plan(g, cfg)
            print(f"  {label:52s} built: {plan.engine_names} ws {plan.workspace_size} grid {_grids(plan)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="*", help=f"groups to run (default all): {', '.join(GROUPS)}")
    ap.add_argument("--dry", action="store_true", help="check and build every config, run nothing")
    ap.add_argument("--budget", type=float, default=80.0, help="seconds after which variants are skipped")
    args = ap.parse_args(argv)
    keys = args.groups or list(GROUPS)
    bad = [k for k in keys if k not in GROUPS]
    if bad:
        ap.error(f"unknown groups {bad}; known: {list(GROUPS)}")
    if args.dry:
        dry(keys)
        return 0
    import torch

    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"median of {REPS} reps, L2 flushed ({FLUSH_BYTES >> 20} MB) before each", flush=True)
    end = time.time() + args.budget
    weights = [WEIGHT.get(k, 0.1) for k in keys]
    for i, key in enumerate(keys):   # each group its weight's share of the budget left
        share = (end - time.time()) * weights[i] / sum(weights[i:])
        run_group(key, torch, flush, time.time() + share)
    return 0


if __name__ == "__main__":
    sys.exit(main())
