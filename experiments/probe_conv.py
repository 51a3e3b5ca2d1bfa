"""GPU probe: ncudnn's convolution engines beside torch (cuDNN, TF32 off) in the same process, FP32, N = 32.

``--mode layers`` (default): ResNet-50 layers (NHWC, channels_last), fprop (+bias+relu), dgrad and wgrad.
For every layer and direction it times torch, then the first ``--top`` mode-A candidates of the conv
engines (conv_implicit_precomp, conv_implicit_gemm, conv_gemm_1x1, conv_direct, and whatever ranks
first overall).

``--mode wgrad1x1``: the weight gradient of ResNet-50 1x1 layers, NCHW and NHWC (``--layouts``):
conv_gemm_1x1 (fast-mainloop tiles, SPLIT_K; NCHW 56² images summed through the workspace, NCHW 7² /
14² and stride-2 x copied pixels-last first): the ranking's pick (PICK), the first ``--top``
conv_gemm_1x1 candidates, the best other conv engine, and the best conv_gemm_1x1 tile at a quarter and
half its SPLIT_K (var).

``--mode reduce``: the split-K reduce alone (kernels/gemm/splitk.py), one thread per output (narrow)
beside the wide reduce (32 outputs x 16 slice rows a block), over ``slices`` partial [M, N] slices; both
checked against each other; GB/s = (slices + 1) * M * N * 4 bytes / time.

Every candidate is checked against torch's result first (relative L2 error printed) and timed with CUDA
events (median of ``--reps`` runs, each a loop of ``--inner`` launches; L2 not flushed). Prints ms,
TFLOP/s (2*N*K*P*Q*C/G*R*S / time), ratio = torch ms / ncudnn ms (> 1: ncudnn faster), workspace, the
predicted time, whether a fast GEMM mainloop ran (``fast``) or its generic fallback (``generic``), then
the geomean of the best ratio per direction (layout). A wall-clock budget (``--budget`` s, JIT included)
skips what is left once it is spent.

    python3 experiments/probe_conv.py --dirs wgrad          # every layer, one direction (< 2 min each)
    python3 experiments/probe_conv.py --dirs wgrad --layers c2_3x3_64 --top 6
    python3 experiments/probe_conv.py --mode wgrad1x1       # 6 stride-1 1x1 layers x 2 layouts, < 2 min
    python3 experiments/probe_conv.py --mode wgrad1x1 --layers c1024_2048_14_s2 c512_1024_28_s2 c256_512_56_s2
    python3 experiments/probe_conv.py --mode reduce         # narrow vs wide split-K reduce, < 30 s
"""
import argparse
import math
import time

import numpy as np

MINE = ("conv_implicit_precomp", "conv_implicit_gemm", "conv_gemm_1x1", "conv_direct")
OTHERS = ("conv_implicit_precomp", "conv_implicit_gemm", "conv_tc", "conv_direct")

#: name: (C, K, H (= W), R (= S), stride, pad, groups)
LAYERS = {
    "stem_7x7_s2": (3, 64, 224, 7, 2, 3, 1),
    "c2_3x3_64": (64, 64, 56, 3, 1, 1, 1),
    "c2_1x1_256_64": (256, 64, 56, 1, 1, 0, 1),
    "c3_3x3_128_s2": (128, 128, 56, 3, 2, 1, 1),
    "c3_1x1_256_512_s2": (256, 512, 56, 1, 2, 0, 1),
    "c4_1x1_1024_256": (1024, 256, 14, 1, 1, 0, 1),
    "c5_3x3_512": (512, 512, 7, 3, 1, 1, 1),
}
#: --mode wgrad1x1: name: (C, K, H = W of x, stride); unpadded
LAYERS_1X1 = {
    "c256_64_56": (256, 64, 56, 1),
    "c64_256_56": (64, 256, 56, 1),
    "c64_64_56": (64, 64, 56, 1),
    "c512_2048_7": (512, 2048, 7, 1),
    "c2048_512_7": (2048, 512, 7, 1),
    "c1024_256_14": (1024, 256, 14, 1),
    # stride-2 downsample 1x1 (run with --layers ...: not in the default list)
    "c1024_2048_14_s2": (1024, 2048, 14, 2),
    "c512_1024_28_s2": (512, 1024, 28, 2),
    "c256_512_56_s2": (256, 512, 56, 2),
}
DEFAULT_1X1 = [n for n, v in LAYERS_1X1.items() if v[3] == 1]
#: --mode reduce: (slices, M, N): 1x1 / implicit-GEMM wgrad dw shapes at their SPLIT_K range
REDUCE_CASES = [(s, m, n) for m, n in ((64, 64), (256, 576), (512, 2048)) for s in (4, 8, 16, 64, 256)]


def desc(uid, t, name, virtual=False):
    from ncudnn.ir import TensorDesc
    from ncudnn.types import cudnnDataType_t as DT
    if virtual:
        return TensorDesc(uid, tuple(t.shape), tuple(t.stride()), DT.CUDNN_DATA_FLOAT, is_virtual=True, name=name)
    return TensorDesc(uid, tuple(t.shape), tuple(t.stride()), DT.CUDNN_DATA_FLOAT, name=name)


def graph(direction, x, w, y, b, stride, pad):
    from ncudnn.ir import ConvDgrad, ConvFprop, ConvWgrad, OpGraph, Pointwise
    from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnPointwiseMode_t as PM
    attrs = dict(spatial_dims=2, stride=(stride,) * 2, pre_padding=(pad,) * 2, post_padding=(pad,) * 2,
                 dilation=(1, 1), mode=CM.CUDNN_CROSS_CORRELATION)   # groups: from W's C / G
    X, W, Y = desc(1, x, "x"), desc(2, w, "w"), desc(3, y, "y")
    if direction == "fprop":
        B = desc(4, b, "b")
        conv = ConvFprop("conv", {"X": X, "W": W}, {"Y": desc(10, y, "v0", True)}, **attrs)
        add = Pointwise("bias", {"X": conv.outputs["Y"], "B": B}, {"Y": desc(11, y, "v1", True)},
                        mode=PM.CUDNN_POINTWISE_ADD)
        relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": Y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
        return OpGraph([conv, add, relu]).finalize()
    if direction == "dgrad":
        return OpGraph([ConvDgrad("dgrad", {"DY": Y, "W": W}, {"DX": X}, **attrs)]).finalize()
    return OpGraph([ConvWgrad("wgrad", {"X": X, "DY": Y}, {"DW": W}, **attrs)]).finalize()


def label(ec):
    from ncudnn.engines import registry
    from ncudnn.types import cudnnBackendKnobType_t as K
    c = ec.config
    tiles = getattr(registry.by_name(c.engine), "TILES", None)
    t = c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)
    if tiles is not None and t is not None and t < len(tiles):
        buf = "a" if c.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) == 0 else ""
        phased = " phased" if c.get(K.CUDNN_KNOB_TYPE_SPLIT_RS) == 1 else ""
        return f"{c.engine} {tiles[t].label} split{c.get(K.CUDNN_KNOB_TYPE_SPLIT_K)}{buf}{phased}"
    return c.engine + " " + " ".join(f"{K(k).name.replace('CUDNN_KNOB_TYPE_', '')}={v}" for k, v in c.knobs)


class Variant:
    """A hand-made config timed beside the ranked ones (no prediction)."""

    def __init__(self, config):
        self.config, self.predicted_time = config, None


def timed(fn, reps, inner):
    import torch
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(inner):
            fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / inner)
    return float(np.median(ts))


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / max(b.norm(), 1e-30))


def path(plan):
    """'fast' / 'generic' (fast config on its fallback) / '-' for the first part of a plan."""
    bl = getattr(plan.parts[0], "bl", None)
    if bl is None or bl.bk.fallback is None:
        return "-"
    return "generic" if bl._fallback is not None else "fast"


def run_candidates(tag, g, pick, pack, got, expect, t_ref, flops, args, t_start, counts):
    """Build, check and time every candidate of ``pick``; returns the ratios of the correct ones whose
    engine ``counts``."""
    import torch
    from ncudnn.engines import api
    ratios = []
    for i, ec in enumerate(pick):
        what = ("var  " if isinstance(ec, Variant) else "PICK " if i == 0 else "     ") if args.mode == "wgrad1x1" \
            else ""
        if time.time() - t_start > args.budget:
            print(f"{tag} {what}{label(ec)}: skipped (budget)", flush=True)
            continue
        try:
            t0 = time.time()
            plan = api.build_plan(g, ec.config if isinstance(ec, Variant) else ec)
            ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
            got.fill_(float("nan"))
            api.execute(plan, pack, ws)
            torch.cuda.synchronize()
            err = rel(got, expect)
            ms = timed(lambda: api.execute(plan, pack, ws), args.reps, args.inner)
            ratio = t_ref / ms
            if err < 1e-4 and counts(ec):
                ratios.append(ratio)
            pred = getattr(ec, "predicted_time", None)
            pred = f"pred {pred * 1e3:.4f} ms" if pred else ""
            print(f"{tag} {what}{label(ec):44s} {ms:8.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s ratio {ratio:5.2f}"
                  f"  err {err:.1e}  ws {plan.workspace_size / 1e6:.1f} MB  {path(plan)}  {pred}"
                  f"  (build+check {time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{tag} {what}{label(ec)}: FAILED {type(e).__name__}: {e}", flush=True)
    return ratios


def layers_mode(args, t_start):
    import torch
    import torch.nn.functional as F
    from ncudnn.engines import api
    from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
    best = {d: [] for d in args.dirs}
    cl = torch.channels_last
    for name in args.layers or list(LAYERS):
        C, K_, H, R, st, pad, G = LAYERS[name]
        N = args.n
        P = (H + 2 * pad - R) // st + 1
        flops = 2.0 * N * K_ * P * P * (C // G) * R * R
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(N, C, H, H, device="cuda", generator=gen).to(memory_format=cl)
        w = (torch.randn(K_, C // G, R, R, device="cuda", generator=gen) / math.sqrt(C // G * R * R)).to(memory_format=cl)
        b = torch.randn(K_, device="cuda", generator=gen).reshape(1, K_, 1, 1)
        dy = torch.randn(N, K_, P, P, device="cuda", generator=gen).to(memory_format=cl)
        for d in args.dirs:
            if d == "fprop":
                ref_fn = lambda: F.relu(F.conv2d(x, w, b.reshape(-1), st, pad, 1, G))  # noqa: E731
                got = torch.empty(N, K_, P, P, device="cuda").to(memory_format=cl)
                g, pack = graph(d, x, w, got, b, st, pad), {1: x, 2: w, 3: got, 4: b}
            elif d == "dgrad":
                ref_fn = lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, st, pad, 1, G)  # noqa: E731
                got = torch.empty_like(x)
                g, pack = graph(d, got, w, dy, None, st, pad), {1: got, 2: w, 3: dy}
            else:
                ref_fn = lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, st, pad, 1, G)  # noqa: E731
                got = torch.empty_like(w)
                g, pack = graph(d, x, got, dy, None, st, pad), {1: x, 2: got, 3: dy}
            expect = ref_fn()
            t_ref = timed(ref_fn, args.reps, args.inner)
            tag = f"{name:18s} {d:5s}"
            print(f"{tag} torch/cuDNN      {t_ref:8.4f} ms {flops / t_ref / 1e9:6.1f} TFLOP/s", flush=True)
            ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
            # deterministic configs only (SPLIT_K_BUF = 0 is the atomic twin of the one before it)
            mine = [e for e in ecs if e.config.engine in MINE and e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) != 0]
            pick = mine[:args.top]
            if any(e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_RS) == 1 for e in pick):
                plain = [e for e in mine if e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_RS) != 1][:1]
                pick += [e for e in plain if e not in pick]      # the all-taps GEMM beside the phased one
            if ecs and ecs[0].config.engine not in MINE:
                pick = [ecs[0]] + pick
            ratios = run_candidates(tag, g, pick, pack, got, expect, t_ref, flops, args, t_start,
                                    lambda ec: ec.config.engine in MINE)
            if ratios:
                best[d].append(max(ratios))
    return best


def wgrad1x1_mode(args, t_start):
    import torch
    from ncudnn.engines import api
    from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
    best = {lay: [] for lay in args.layouts}
    for name in args.layers or DEFAULT_1X1:
        C, K_, H, st = LAYERS_1X1[name]
        N = args.n
        P = (H - 1) // st + 1
        flops = 2.0 * N * K_ * C * P * P
        for lay in args.layouts:
            mf = torch.channels_last if lay == "nhwc" else torch.contiguous_format
            gen = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(N, C, H, H, device="cuda", generator=gen).to(memory_format=mf)
            dy = torch.randn(N, K_, P, P, device="cuda", generator=gen).to(memory_format=mf)
            dw = torch.empty(K_, C, 1, 1, device="cuda").to(memory_format=mf)
            wshape = dw.shape
            ref_fn = lambda: torch.nn.grad.conv2d_weight(x, wshape, dy, st, 0)  # noqa: E731
            expect = ref_fn()
            t_ref = timed(ref_fn, args.reps, args.inner)
            tag = f"{name:13s} {lay}"
            print(f"{tag} torch/cuDNN {'':40s} {t_ref:8.4f} ms {flops / t_ref / 1e9:6.1f} TFLOP/s", flush=True)
            g = graph("wgrad", x, dw, dy, None, st, 0)
            ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
            ecs = [e for e in ecs if e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) != 0]   # deterministic only
            pick = ecs[:1]
            pick += [e for e in ecs if e.config.engine == "conv_gemm_1x1" and e not in pick][:args.top]
            pick += [e for e in ecs if e.config.engine in OTHERS and e not in pick][:1]
            for e in [e for e in ecs if e.config.engine == "conv_gemm_1x1"][:1]:
                sk = e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K)      # the best tile at a quarter / half its split
                for s in sorted({max(1, sk // 4), max(1, sk // 2)} - {sk}):
                    pick.append(Variant(e.config.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, s)))
            ratios = run_candidates(tag, g, pick, {1: x, 2: dw, 3: dy}, dw, expect, t_ref, flops, args, t_start,
                                    lambda ec: True)
            if ratios:
                best[lay].append(max(ratios))
    return best


def reduce_launch(kern, ws, c, slices, M, N, wide):
    """``run(None, stream)`` of ``kern``'s narrow or wide split-K reduce of ``ws`` (``slices`` x M x N
    floats, a gc.Flat) into ``c``, compiled through the kernel cache as gemm_common.BlockLaunch does."""
    from ncudnn.engines.gemm import common as gc
    from ncudnn.kernels.runtime import kcache
    from ncudnn.kernels.gemm import splitk
    from ncudnn.kernels.gemm.gemm import gemm_args
    _, _, _, _, _, _, o_args, bias_args, r_args = gemm_args(
        kern, ws, ws, c, M=M, N=N, K=1, a_strides=(1, 1), b_strides=(N, 1), c_strides=(N, 1))
    a = (ws, slices, o_args, bias_args, r_args, 1, M, N, np.float32(1), np.float32(0))
    name = "reduce_wide" if wide else "reduce"
    k = kcache.get_or_compile(f"probe_conv|{name}|{slices}", lambda: getattr(kern.bk, name), gc.argtypes(a))
    grid = splitk.wide_grid(M * N) if wide else (max(1, -(-(M * N) // splitk.REDUCE_THREADS)), splitk.REDUCE_THREADS)
    return k.prepare(grid[0], grid[1], a).run


def reduce_mode(args, t_start):
    """Narrow vs wide split-K reduce over REDUCE_CASES, each compiled through the kernel cache and run as
    the engines run it (one prepared cuLaunchKernel), timed with CUDA events on torch's stream."""
    import torch
    from ncudnn import memory
    from ncudnn.engines.gemm import common as gc
    from ncudnn.kernels.gemm import GemmConfig, make_gemm, splitk
    cfg = GemmConfig()
    gen = torch.Generator(device="cuda").manual_seed(0)
    for slices, M, N in REDUCE_CASES:
        if time.time() - t_start > args.budget:
            print(f"reduce {slices:4d} x {M}x{N}: skipped (budget)", flush=True)
            continue
        kern = make_gemm(cfg.replace(SPLIT_K=slices))
        wt = torch.rand(slices * M * N, device="cuda", generator=gen) - 0.5
        ws = gc.Flat(memory.as_view(wt).ptr, wt.numel(), "float32")
        outs = []
        for wide in (False, True):
            ct = torch.full((M * N,), float("nan"), device="cuda")
            c = gc.Flat(memory.as_view(ct).ptr, ct.numel(), "float32")
            run = reduce_launch(kern, ws, c, slices, M, N, wide)
            stream = torch.cuda.current_stream().cuda_stream
            ms = timed(lambda: run(None, stream), args.reps, args.inner)
            outs.append((ms, ct.double()))
        (tn, cn), (tw, cw) = outs
        truth = wt.double().reshape(slices, M * N).sum(0)
        gb = (slices + 1) * M * N * 4 / 1e9
        used = "wide" if slices >= splitk.WIDE_FROM else "narrow"
        print(f"reduce {slices:4d} x {M:4d}x{N:<5d} narrow {tn * 1e3:8.2f} us {gb / tn * 1e3:7.1f} GB/s  "
              f"err {rel(cn, truth):.1e}   wide {tw * 1e3:8.2f} us {gb / tw * 1e3:7.1f} GB/s  err "
              f"{rel(cw, truth):.1e}   narrow/wide {tn / tw:5.2f}   launchers use {used}", flush=True)
    return {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("layers", "wgrad1x1", "reduce"), default="layers")
    ap.add_argument("--layers", nargs="*", default=None, help="default: every layer of the mode (wgrad1x1: the "
                    "stride-1 ones)")
    ap.add_argument("--dirs", nargs="*", default=["fprop", "dgrad", "wgrad"], help="--mode layers")
    ap.add_argument("--layouts", nargs="*", default=["nhwc", "nchw"], help="--mode wgrad1x1")
    ap.add_argument("--top", type=int, default=None, help="conv-engine candidates timed per problem (default: 2; "
                    "wgrad1x1: 3 conv_gemm_1x1 ones)")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--inner", type=int, default=None, help="default 5 (wgrad1x1, reduce: 10)")
    ap.add_argument("--budget", type=float, default=None, help="seconds; later candidates are skipped "
                    "(default 105; wgrad1x1: 100)")
    args = ap.parse_args()
    one = args.mode == "wgrad1x1"
    args.top = args.top if args.top is not None else (3 if one else 2)
    args.inner = args.inner if args.inner is not None else (5 if args.mode == "layers" else 10)
    args.budget = args.budget if args.budget is not None else (100.0 if one else 105.0)

    import torch
    from ncudnn.engines import device as dev_mod
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.time()
    what = {"layers": "FP32 NHWC", "wgrad1x1": "FP32 wgrad 1x1", "reduce": "split-K reduce FP32"}[args.mode]
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  cuDNN {torch.backends.cudnn.version()}"
          f"  N={args.n} {what}, TF32 off", flush=True)
    best = {"layers": layers_mode, "wgrad1x1": wgrad1x1_mode, "reduce": reduce_mode}[args.mode](args, t_start)
    for d, rs in best.items():
        if rs:
            gm = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"geomean best ratio {d}: {gm:.2f} over {len(rs)} layers", flush=True)
    print(f"# device model {dev_mod.current().name}; total {time.time() - t_start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
