"""GPU probe: pooling kernel variants (resample engine) beside torch, issue 4's shape.

N32 C256 112x112 FP32, 3x3 window, stride 2, padding 1 (ResNet's stem pool), NCHW and NHWC (channels_last)::

    python3 experiments/probe_pool.py                      # every group, most important first
    python3 experiments/probe_pool.py bwd_max_x_nchw ...   # only the groups named (see GROUPS)
    python3 experiments/probe_pool.py --dry                # build every plan, run nothing (simulator, no torch)

Each variant is a resample-engine config built through ``api.build_plan`` and run as a user runs it
(``ExecutionPlan.execute`` on torch tensors, torch's stream): KERNEL_CFG=auto (what the heuristics pick
now), direct (the one-element-per-thread kernels of resample_direct) or tiled TH x TW (resample_tile).
Every variant is first checked: relerr = ||ours - oracle|| / ||oracle|| over image 0, channels 0-63, against the float64
oracle (ncudnn.reference), "BAD" past 1e-6; max-pool indices must match exactly. Then timed: per rep an L2
flush (256 MB write), CUDA events around one execute, median of REPS reps. GB/s = bytes / time with bytes =
one read of every input plus one write of every output at its own dtype (forward x + y (+ int32 idx);
backward dy (+ int32 idx | + x) + dx); %BW = GB/s / 4210 (H200 copy). torch: F.max_pool2d / avg_pool2d
forward; backward both through autograd (torch.autograd.grad) and the aten op directly
(max_pool2d_with_indices_backward with torch's saved int64 indices / avg_pool2d_backward); "vs torch" uses
the faster of the two (> 1: we are faster). The last line of a group names the fastest variant.
"""
import argparse
import math
import sys
import time

import numpy as np

from ncudnn.engines import api
from ncudnn.ir import OpGraph, ResampleBwd, ResampleFwd, TensorDesc, packed_strides
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnDataType_t as DT, cudnnPaddingMode_t as PAD,
                          cudnnResampleMode_t as RM)
from probe_timing import flushed_median_ms

F32, I32 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_INT32
MAX, AVG = RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING
COPY_GBPS = 4210.0
REPS = 20
FLUSH_BYTES = 256 << 20
XD, WIN, STR, PADS = (32, 256, 112, 112), (3, 3), (2, 2), (1, 1)
YD = (32, 256, 56, 56)
CH = 64   # the oracle checks image 0, channels 0..63
KB, KC, KTR, KTC = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_TILE_ROWS,
                    K.CUDNN_KNOB_TYPE_TILE_COLS)


def _strides(dims, layout):
    if layout == "nchw":
        return packed_strides(dims)
    st, acc = [0] * 4, 1
    for d in (1, 3, 2, 0):
        st[d] = acc
        acc *= dims[d]
    return tuple(st)


def _t(uid, dims, layout, name, dtype=F32):
    return TensorDesc(uid, tuple(dims), _strides(dims, layout), dtype, name=name)


def graph(kind, op, layout):
    """kind fwd / fwd_idx / bwd_idx / bwd_x / bwd; uids: x 1, y 2, idx 3, dy 20, dx 21."""
    mode = MAX if op == "max" else AVG
    pad = PAD.CUDNN_NEG_INF_PAD if mode == MAX else PAD.CUDNN_ZERO_PAD
    geo = dict(mode=mode, spatial_dims=2, window=WIN, stride=STR, pre_padding=PADS, post_padding=PADS,
               padding_mode=pad)
    if kind.startswith("fwd"):
        outs = {"Y": _t(2, YD, layout, "y")}
        if kind == "fwd_idx":
            outs["IDX"] = _t(3, YD, layout, "idx", I32)
        return OpGraph([ResampleFwd("pool", {"X": _t(1, XD, layout, "x")}, outs, **geo)]).finalize()
    ins = {"DY": _t(20, YD, layout, "dy")}
    if kind == "bwd_idx":
        ins["IDX"] = _t(3, YD, layout, "idx", I32)
    elif kind == "bwd_x":
        ins["X"] = _t(1, XD, layout, "x")
    return OpGraph([ResampleBwd("pool_bwd", ins, {"DX": _t(21, XD, layout, "dx")}, **geo)]).finalize()


def _v(kc=None, th=None, tw=None, b=None):
    out = {}
    if kc is not None:
        out[KC] = kc
    if th:
        out[KTR], out[KTC] = th, tw
    if b:
        out[KB] = b
    return out


AUTO, DIRECT, TILED = 0, 1, 2
FWD_NCHW = [_v(), _v(DIRECT), _v(TILED, 1, 4, 256), _v(TILED, 2, 4, 256), _v(TILED, 1, 8, 256), _v(TILED, 1, 4, 128)]
FWD_NHWC = [_v(), _v(DIRECT), _v(DIRECT, b=256), _v(TILED, 1, 2, 256), _v(TILED, 2, 2, 128)]
BWD_NCHW = [_v(), _v(DIRECT), _v(TILED, 2, 8, 256), _v(TILED, 4, 8, 128), _v(TILED, 2, 8, 128),
            _v(TILED, 2, 2, 256)]   # NCHW 2x2: the scalar layout (what W % 4 != 0 shapes get)
BWD_NHWC = [_v(), _v(DIRECT), _v(TILED, 2, 2, 256), _v(TILED, 2, 2, 128), _v(TILED, 2, 4, 128)]
BWDX_NCHW = [_v(), _v(DIRECT), _v(TILED, 2, 8, 128), _v(TILED, 2, 2, 256)]   # recompute: heavier JIT, fewer
BWDX_NHWC = [_v(), _v(DIRECT), _v(TILED, 2, 2, 128), _v(TILED, 2, 2, 64)]

GROUPS = {   # key: (title, kind, op, layout, variants); order = run order (most important first)
    "bwd_max_idx_nchw": ("max pool bwd routed by IDX, NCHW", "bwd_idx", "max", "nchw", BWD_NCHW),
    "bwd_max_x_nchw": ("max pool bwd recomputed from X, NCHW", "bwd_x", "max", "nchw", BWDX_NCHW),
    "bwd_avg_nchw": ("avg pool bwd (incl. padding), NCHW", "bwd", "avg", "nchw", BWD_NCHW),
    "fwd_max_nchw": ("max pool fwd (no index), NCHW", "fwd", "max", "nchw", FWD_NCHW),
    "fwd_avg_nchw": ("avg pool fwd, NCHW", "fwd", "avg", "nchw", FWD_NCHW[:4]),
    "bwd_max_x_nhwc": ("max pool bwd recomputed from X, NHWC", "bwd_x", "max", "nhwc", BWDX_NHWC),
    "bwd_max_idx_nhwc": ("max pool bwd routed by IDX, NHWC", "bwd_idx", "max", "nhwc", BWD_NHWC),
    "bwd_avg_nhwc": ("avg pool bwd (incl. padding), NHWC", "bwd", "avg", "nhwc", BWD_NHWC[:3]),
    "fwd_max_idx_nchw": ("max pool fwd with int32 index, NCHW", "fwd_idx", "max", "nchw", FWD_NCHW[:3]),
    "fwd_max_nhwc": ("max pool fwd (no index), NHWC", "fwd", "max", "nhwc", FWD_NHWC),
    "fwd_avg_nhwc": ("avg pool fwd, NHWC", "fwd", "avg", "nhwc", FWD_NHWC[:4]),
    "fwd_max_idx_nhwc": ("max pool fwd with int32 index, NHWC", "fwd_idx", "max", "nhwc", FWD_NHWC[:4]),
}


def _label(cfg):
    d = dict(cfg.knobs)
    kc = {AUTO: "auto", DIRECT: "direct", TILED: "tiled"}[d.get(int(KC), AUTO)]
    tile = f" {d.get(int(KTR))}x{d.get(int(KTC))}" if kc == "tiled" else ""
    return f"{kc}{tile} block {d.get(int(KB))}"


def _configs(g, variants):
    first = api.get_heuristics(g)[0].config
    out = []
    for knobs in variants:
        cfg = first
        for k, v in knobs.items():
            cfg = cfg.with_knob(k, v)
        if cfg in [c for _, c, _ in out]:
            continue
        st, why = api.check_support(g, cfg)
        out.append((_label(cfg), cfg if int(st) == 0 else None, "" if int(st) == 0 else why))
    return first, out


def _kernel(plan):
    return ",".join(st.key.split(":")[0] for sp in plan.parts for st in getattr(sp, "steps", ()))


# ------------------------------------------------------------------------------------------ data and oracle

def _data(torch, layout):
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(XD, device="cuda", generator=gen).contiguous(memory_format=fmt)
    dy = torch.randn(YD, device="cuda", generator=gen).contiguous(memory_format=fmt)
    return x, dy


def _oracle(kind, op, x0, dy0, idx0):
    """float64 oracle over image 0: (expected array, expected index or None)."""
    from ncudnn import reference as ref
    mode = MAX if op == "max" else AVG
    pad = PAD.CUDNN_NEG_INF_PAD if mode == MAX else PAD.CUDNN_ZERO_PAD
    if kind.startswith("fwd"):
        out = ref.resample_forward(x0, mode, WIN, STR, PADS, PADS, pad)
        return out if mode == MAX else (out, None)
    if mode == MAX:
        idx0 = ref.resample_forward(x0, mode, WIN, STR, PADS, PADS, pad)[1]
    return ref.resample_backward(dy0, mode, WIN, STR, PADS, PADS, x0.shape, pad, index=idx0), None


def _relerr(out, exp):
    o, r = np.asarray(out, np.float64), np.asarray(exp, np.float64)
    fin = np.isfinite(r)
    if not np.array_equal(np.isfinite(o), fin):
        return float("inf")
    return float(np.linalg.norm(o[fin] - r[fin]) / max(np.linalg.norm(r[fin]), 1e-300))


# ------------------------------------------------------------------------------------------ timing

def _time(fn, torch, flush, reps=REPS):
    return flushed_median_ms(fn, torch, flush, reps)


def _row(label, ms, nbytes, torch_ms, extra=""):
    gbs = nbytes / (ms * 1e-3) / 1e9
    return (f"  {label:34s} {ms:8.4f} ms {gbs:7.0f} GB/s {100 * gbs / COPY_GBPS:5.1f}%BW "
            f"vs torch {torch_ms / ms:5.2f}x {extra}")


def _torch_refs(torch, kind, op, x, dy):
    """[(label, callable)] of torch's way(s) of doing this op."""
    F = torch.nn.functional
    aten = torch.ops.aten
    if kind.startswith("fwd"):
        pool = (lambda: F.max_pool2d(x, 3, 2, 1)) if op == "max" else (lambda: F.avg_pool2d(x, 3, 2, 1))
        return [("torch " + ("max_pool2d" if op == "max" else "avg_pool2d"), pool)]
    xg = x.detach().requires_grad_(True)
    y = F.max_pool2d(xg, 3, 2, 1) if op == "max" else F.avg_pool2d(xg, 3, 2, 1)
    out = [("torch autograd", lambda: torch.autograd.grad(y, xg, dy, retain_graph=True))]
    if op == "max":
        _, ind = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], False)
        out.append(("torch aten bwd (int64 idx)",
                    lambda: aten.max_pool2d_with_indices_backward(dy, x, [3, 3], [2, 2], [1, 1], [1, 1], False, ind)))
    else:
        out.append(("torch aten avg_pool2d_backward",
                    lambda: aten.avg_pool2d_backward(dy, x, [3, 3], [2, 2], [1, 1], False, True, None)))
    return out


def run_group(key, torch, flush, budget_end, cache):
    title, kind, op, layout, variants = GROUPS[key]
    g = graph(kind, op, layout)
    first, cfgs = _configs(g, variants)
    if layout not in cache:
        cache[layout] = _data(torch, layout)
    x, dy = cache[layout]
    nx, ny = math.prod(XD), math.prod(YD)
    nbytes = {"fwd": 4 * (nx + ny), "fwd_idx": 4 * (nx + 2 * ny), "bwd_idx": 4 * (2 * ny + nx),
              "bwd_x": 4 * (ny + 2 * nx), "bwd": 4 * (ny + nx)}[kind]
    pack = {}
    if kind.startswith("fwd"):
        pack[1] = x
        pack[2] = torch.empty_like(dy)
        if kind == "fwd_idx":
            pack[3] = torch.empty(YD, dtype=torch.int32, device="cuda").contiguous(
                memory_format=torch.channels_last if layout == "nhwc" else torch.contiguous_format)
        out_uid = 2
    else:
        pack[20], pack[21] = dy, torch.empty_like(x)
        if kind == "bwd_idx":   # our forward's index (int32, same layout)
            gf = graph("fwd_idx", "max", layout)
            pf = api.build_plan(gf, api.get_heuristics(gf)[0].config)
            idx = torch.empty(YD, dtype=torch.int32, device="cuda").contiguous(
                memory_format=torch.channels_last if layout == "nhwc" else torch.contiguous_format)
            pf.execute({1: x, 2: torch.empty_like(dy), 3: idx}, None, torch.cuda.current_stream().cuda_stream)
            pack[3] = idx
        elif kind == "bwd_x":
            pack[1] = x
        out_uid = 21
    if time.time() > budget_end:
        print(f"== {title}: skipped (time budget)\n", flush=True)
        return
    x0 = x[:1, :CH].float().cpu().numpy()
    dy0 = dy[:1, :CH].cpu().numpy()
    exp, eidx = _oracle(kind, op, x0, dy0, None)
    refs = _torch_refs(torch, kind, op, x, dy)
    print(f"== {title}  ({nbytes / 1e6:.0f} MB moved; heuristic first: {_label(first)})", flush=True)
    tms = []
    for lab, fn in refs:
        tms.append(_time(fn, torch, flush))
    torch_ms = min(tms)
    for (lab, _), ms in zip(refs, tms):
        print(_row(lab, ms, nbytes, torch_ms))
    copy_dst = torch.empty_like(x)
    print(_row("torch copy of x (y.copy_(x))", _time(lambda: copy_dst.copy_(x), torch, flush), 8 * nx, torch_ms))
    stream = torch.cuda.current_stream().cuda_stream
    results = []
    for label, cfg, why in cfgs:
        if cfg is None:
            print(f"  {label:34s} refused: {why[:140]}")
            continue
        if time.time() > budget_end:
            print(f"  {label:34s} skipped (time budget)")
            continue
        try:
            t0 = time.time()
            plan = api.build_plan(g, cfg)
            pack[out_uid].fill_(float("nan"))
            if 3 in pack and kind == "fwd_idx":
                pack[3].fill_(-7)
            fn = lambda: plan.execute(pack, None, stream)  # noqa: E731
            fn()
            torch.cuda.synchronize()
            err = _relerr(pack[out_uid][:1, :CH].cpu().numpy(), exp)
            bad = "" if err <= 1e-6 else "  BAD"
            if kind == "fwd_idx" and not np.array_equal(pack[3][:1, :CH].cpu().numpy(), eidx):
                bad += "  BAD INDEX"
            build_s = time.time() - t0
            ms = _time(fn, torch, flush)
        except Exception as e:   # a variant failing must not hide the others
            print(f"  {label:34s} ERROR {type(e).__name__}: {str(e)[:200]}")
            continue
        results.append((ms, label))
        print(_row(label, ms, nbytes, torch_ms, f"relerr {err:.1e}{bad} [{_kernel(plan)}] (build {build_s:.1f} s)"),
              flush=True)
    if results:
        best = min(results)
        print(f"  -> fastest: {best[1]} {best[0]:.4f} ms ({torch_ms / best[0]:.2f}x torch)")
    print(flush=True)


def dry(keys):
    for key in keys:
        title, kind, op, layout, variants = GROUPS[key]
        g = graph(kind, op, layout)
        first, cfgs = _configs(g, variants)
        print(f"== {title}: heuristic first {_label(first)}")
        for label, cfg, why in cfgs:
            if cfg is None:
                print(f"  {label:34s} refused: {why[:140]}")
                continue
            plan = api.build_plan(g, cfg)
            print(f"  {label:34s} built: {_kernel(plan)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="*", help=f"groups to run (default all): {', '.join(GROUPS)}")
    ap.add_argument("--dry", action="store_true", help="check and build every config, run nothing")
    ap.add_argument("--budget", type=float, default=100.0, help="seconds after which variants are skipped")
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
    cache = {}
    for key in keys:
        run_group(key, torch, flush, end, cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
