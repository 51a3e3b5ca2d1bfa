"""GPU probe: memory-bound engine variants (norm_rows, softmax_fused, pointwise_fused) beside torch.

Run on the GPU machine (torch with CUDA; about 1-2 minutes with every JIT compile)::

    python3 experiments/probe_membound.py                  # every group
    python3 experiments/probe_membound.py ln1024 sm32768   # only the groups named (see GROUPS)
    python3 experiments/probe_membound.py --dry            # build every plan, run nothing (simulator, no torch)

What it measures: each variant is an engine config (the default config with knobs set) built through
the engine API (``api.build_plan``) and run as a user runs it (``ExecutionPlan.execute`` on torch
tensors, torch's current stream). Every variant is first checked against torch's output (max abs error over max |torch|
printed as relerr; "BAD" past 1e-4, 1e-3 for GELU), then timed: per rep an L2 flush (a 256 MB write), CUDA events around
one execute; median of REPS reps. GB/s = (bytes of x read + y written) / time (parameters and statistics
ignored, as in bench/cases.py); %BW = GB/s / COPY_GBPS (4210, H200 copy); "vs torch" = torch time /
ours (> 1: faster than torch). The torch line and a torch copy (y.copy_(x)) are measured in the same
process. The last line of each group names the fastest variant and what the heuristic's first config
(the current default) is and how fast.

Groups: LN / RMS forward FP32 8192x1024 and 8192x4096 (training: MEAN and INV_VARIANCE written, as
torch does not: torch writes y only in inference -- we time ncudnn in inference too, y only);
softmax FP32 8192x1024 and 8192x32768; bias + relu, bias + gelu (per-channel bias, NCHW) and relu on
a 16x256x128x128 FP32 tensor (256 MiB).
"""
import argparse
import math
import sys
import time


from ncudnn.engines import api
from ncudnn.ir import NormFwd, OpGraph, Pointwise, Reduction, TensorDesc, packed_strides
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnBackendNormFwdPhase_t as PH,
                          cudnnBackendNormMode_t as NM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM,
                          cudnnReduceTensorOp_t as RO)
from probe_timing import flushed_median_ms

F32 = DT.CUDNN_DATA_FLOAT
COPY_GBPS = 4210.0
REPS = 30
FLUSH_BYTES = 256 << 20
KB, KR, KL, KU, KW = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_LOAD_SIZE,
                      K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, K.CUDNN_KNOB_TYPE_CTA_COUNT)
NAMES = {KB: "BLOCK", KR: "ROWS", KL: "LOAD", KU: "ASPT", KW: "WAVES"}


def _t(uid, dims, name, virtual=False):
    return TensorDesc(uid, tuple(dims), packed_strides(dims), F32, name=name, is_virtual=virtual)


def _v(uid, name):
    return TensorDesc(uid, is_virtual=True, name=name)


# ------------------------------------------------------------------------------------------ graphs

def norm_graph(rows, cols, rms):
    ins = {"X": _t(1, (rows, cols), "x"), "SCALE": _t(2, (1, cols), "scale"),
           "EPSILON": TensorDesc(4, (1,), (1,), F32, is_by_value=True, value=1e-5, name="eps")}
    if not rms:
        ins["BIAS"] = _t(3, (1, cols), "bias")
    mode = NM.CUDNN_RMS_NORM if rms else NM.CUDNN_LAYER_NORM
    node = NormFwd("norm", ins, {"Y": _t(10, (rows, cols), "y")}, mode=mode, phase=PH.CUDNN_NORM_FWD_INFERENCE)
    return OpGraph([node]).finalize()


def softmax_graph(rows, cols):
    x, y = _t(1, (rows, cols), "x"), _t(2, (rows, cols), "y")
    m, s = _t(10, (rows, 1), "m", True), _t(13, (rows, 1), "s", True)
    d, e = _v(11, "d"), _v(12, "e")
    nodes = [Reduction("max", {"X": x}, {"Y": m}, mode=RO.CUDNN_REDUCE_TENSOR_MAX),
             Pointwise("sub", {"X": x, "B": m}, {"Y": d}, mode=PM.CUDNN_POINTWISE_SUB),
             Pointwise("exp", {"X": d}, {"Y": e}, mode=PM.CUDNN_POINTWISE_EXP),
             Reduction("sum", {"X": e}, {"Y": s}, mode=RO.CUDNN_REDUCE_TENSOR_ADD),
             Pointwise("div", {"X": e, "B": s}, {"Y": y}, mode=PM.CUDNN_POINTWISE_DIV)]
    return OpGraph(nodes).finalize()


def pointwise_graph(dims, act):
    x, y = _t(1, dims, "x"), _t(3, dims, "y")
    if act == "relu":
        return OpGraph([Pointwise("relu", {"X": x}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]).finalize()
    b = _t(2, (1, dims[1], 1, 1), "b")
    mode = PM.CUDNN_POINTWISE_RELU_FWD if act == "bias_relu" else PM.CUDNN_POINTWISE_GELU_FWD
    v = _v(10, "xb")
    return OpGraph([Pointwise("add", {"X": x, "B": b}, {"Y": v}, mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("act", {"X": v}, {"Y": y}, mode=mode)]).finalize()


# ------------------------------------------------------------------------------------------ groups

def _norm_variants(cols):
    if cols <= 1024:
        out = [dict()]                                             # most important first (time budget)
        out += [{KB: 32, KR: r, KL: 16} for r in (4, 2, 8)] + [{KB: b, KL: 16} for b in (128, 256)]
        out += [{KB: 32, KR: r} for r in (2, 8)] + [{KB: 128}]
        return out
    return [dict()] + [{KB: b, KL: 16} for b in (128, 256, 512, 1024)] + [{KB: 256}, {KB: 512}, {KB: 1024}]


def _softmax_variants(cols):
    if cols <= 1024:
        return [dict()] + [{KB: 32, KL: 16, KR: r} for r in (1, 2, 4, 8)] + [{KB: 128, KL: 16}, {KB: 256, KL: 16}]
    return [dict(), {KB: 512}] + [{KB: b, KL: 16, KU: u} for b in (256, 512, 1024) for u in (2, 4, 8)]


def _pw_variants():
    out = [dict()] + [{KW: w} for w in (0, 2, 8)]
    for b in (128, 256, 512):
        for u in (2, 4):
            for w in (0, 2, 4, 8):
                out.append({KB: b, KU: u, KW: w})
    return out


PW_DIMS = (16, 256, 128, 128)
GROUPS = {
    "ln1024": ("LayerNorm fwd 8192x1024", lambda: norm_graph(8192, 1024, False), _norm_variants(1024)),
    "rms1024": ("RMSNorm fwd 8192x1024", lambda: norm_graph(8192, 1024, True), _norm_variants(1024)),
    "ln4096": ("LayerNorm fwd 8192x4096", lambda: norm_graph(8192, 4096, False), _norm_variants(4096)),
    "rms4096": ("RMSNorm fwd 8192x4096", lambda: norm_graph(8192, 4096, True), _norm_variants(4096)),
    "sm1024": ("softmax fwd 8192x1024", lambda: softmax_graph(8192, 1024), _softmax_variants(1024)),
    "sm32768": ("softmax fwd 8192x32768", lambda: softmax_graph(8192, 32768), _softmax_variants(32768)),
    "bias_relu": ("bias+relu NCHW 16x256x128x128", lambda: pointwise_graph(PW_DIMS, "bias_relu"), _pw_variants()),
    "bias_gelu": ("bias+gelu NCHW 16x256x128x128", lambda: pointwise_graph(PW_DIMS, "bias_gelu"), _pw_variants()),
    "relu": ("relu 16x256x128x128", lambda: pointwise_graph(PW_DIMS, "relu"), _pw_variants()),
}


def _label(cfg, default):
    diff = [f"{NAMES.get(K(k), K(k).name)}={v}" for k, v in cfg.knobs if dict(default.knobs).get(k) != v]
    return f"{cfg.engine}[{' '.join(diff) or 'default'}]"


def _configs(g, variants):
    """(label, Config or None (refused: label says why)) per variant; the heuristic's first config."""
    ecs = api.get_heuristics(g)
    first = ecs[0].config
    eng = ecs[0].engine
    out = []
    for knobs in variants:
        cfg = first
        for k, v in knobs.items():
            cfg = cfg.with_knob(k, v)
        if cfg in [c for _, c, _ in out]:
            continue
        st, why = api.check_support(g, cfg)
        out.append((_label(cfg, eng.default_config(api.problem(g))), cfg if int(st) == 0 else None,
                    "" if int(st) == 0 else why))
    return first, [(lab, cfg, why) for lab, cfg, why in out]


# ------------------------------------------------------------------------------------------ torch side

def _torch_inputs(key, g, torch):
    """uid -> torch tensor for every external tensor of ``g``; the torch reference callable and the
    output uid; bytes moved (x read + y written)."""
    F = torch.nn.functional
    tens = g.tensors()
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    pack = {}
    for uid, t in tens.items():
        if t.is_virtual or t.is_by_value:
            continue
        pack[uid] = torch.randn(math.prod(t.dims), device=dev, generator=gen).reshape(t.dims)
    if key.startswith(("ln", "rms")):
        x, sc = pack[1], pack[2].reshape(-1)
        pack[2].uniform_(0.5, 1.5)
        if key.startswith("ln"):
            b = pack[3].reshape(-1)
            ref = lambda: F.layer_norm(x, (x.shape[1],), sc, b, 1e-5)  # noqa: E731
        else:
            ref = lambda: F.rms_norm(x, (x.shape[1],), sc, 1e-5)  # noqa: E731
        out = 10
    elif key.startswith("sm"):
        x = pack[1]
        ref = lambda: torch.softmax(x, dim=1)  # noqa: E731
        out = 2
    else:
        x = pack[1]
        if key == "relu":
            ref = lambda: torch.relu(x)  # noqa: E731
        else:
            b = pack[2]
            act = torch.relu if key == "bias_relu" else F.gelu
            ref = lambda: act(x + b)  # noqa: E731
        out = 3
    nbytes = 2 * pack[1].numel() * 4
    return pack, ref, out, nbytes


def _time(fn, torch, flush, reps=REPS):
    return flushed_median_ms(fn, torch, flush, reps)


def _row(label, ms, nbytes, torch_ms, err=""):
    gbs = nbytes / (ms * 1e-3) / 1e9
    return (f"  {label:58s} {ms:8.4f} ms {gbs:8.0f} GB/s {100 * gbs / COPY_GBPS:5.1f}%BW "
            f"vs torch {torch_ms / ms:5.2f}x {err}")


def run_group(key, torch, flush, budget_end):
    title, make, variants = GROUPS[key]
    g = make()
    first, cfgs = _configs(g, variants)
    pack, ref, out_uid, nbytes = _torch_inputs(key, g, torch)
    want = ref()
    torch_ms = _time(ref, torch, flush)
    copy_src, copy_dst = pack[1], torch.empty_like(pack[1])
    copy_ms = _time(lambda: copy_dst.copy_(copy_src), torch, flush)
    print(f"== {title}  (bytes {nbytes / 1e6:.1f} MB)", flush=True)
    print(_row("torch", torch_ms, nbytes, torch_ms))
    print(_row("torch copy (y.copy_(x))", copy_ms, nbytes, torch_ms))
    stream = torch.cuda.current_stream().cuda_stream
    tol = 1e-3 if key == "bias_gelu" else 1e-4   # relative to max |torch output|; GELU: erf formulations differ
    scale = want.abs().max().item() or 1.0
    results = []
    for label, cfg, why in cfgs:
        if cfg is None:
            print(f"  {label:58s} refused: {why[:120]}")
            continue
        if time.time() > budget_end:
            print(f"  {label:58s} skipped (time budget)")
            continue
        try:
            t0 = time.time()
            plan = api.build_plan(g, cfg)
            ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
            pack[out_uid].fill_(float("nan"))
            fn = lambda: plan.execute(pack, ws, stream)  # noqa: E731
            fn()
            torch.cuda.synchronize()
            err = (pack[out_uid] - want).abs().max().item() / scale
            build_s = time.time() - t0
            ms = _time(fn, torch, flush)
        except Exception as e:   # a variant failing must not hide the others
            print(f"  {label:58s} ERROR {type(e).__name__}: {str(e)[:200]}")
            continue
        bad = "" if err <= tol else "  BAD"
        results.append((ms, label, cfg))
        print(_row(label, ms, nbytes, torch_ms, f"relerr {err:.1e}{bad}  (build {build_s:.1f} s)"), flush=True)
    if results:
        best = min(results)
        dflt = [r for r in results if r[2] == first]
        print(f"  -> fastest: {best[1]} {best[0]:.4f} ms ({torch_ms / best[0]:.2f}x torch); heuristic default: "
              + (f"{dflt[0][1]} {dflt[0][0]:.4f} ms ({torch_ms / dflt[0][0]:.2f}x torch)" if dflt else f"{first}"))
    print(flush=True)


def dry(keys):
    """Every group's configs checked and built (no run): usable in the simulator."""
    for key in keys:
        title, make, variants = GROUPS[key]
        g = make()
        first, cfgs = _configs(g, variants)
        print(f"== {title}: heuristic first {first}")
        for label, cfg, why in cfgs:
            if cfg is None:
                print(f"  {label:58s} refused: {why[:120]}")
                continue
            plan = api.build_plan(g, cfg)
            print(f"  {label:58s} built: {[p.engine.name for p in plan.parts]} ws {plan.workspace_size}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="*", help=f"groups to run (default all): {', '.join(GROUPS)}")
    ap.add_argument("--dry", action="store_true", help="check and build every config, run nothing")
    ap.add_argument("--budget", type=float, default=110.0, help="seconds after which variants are skipped")
    args = ap.parse_args(argv)
    keys = args.groups or list(GROUPS)
    bad = [k for k in keys if k not in GROUPS]
    if bad:
        ap.error(f"unknown groups {bad}; known: {list(GROUPS)}")
    if args.dry:
        dry(keys)
        return 0
    import torch

    torch.backends.cudnn.benchmark = False
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"median of {REPS} reps, L2 flushed ({FLUSH_BYTES >> 20} MB) before each", flush=True)
    end = time.time() + args.budget
    for key in keys:
        run_group(key, torch, flush, end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
