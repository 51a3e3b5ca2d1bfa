"""GPU probe: ncudnn's convolution engines on ResNet-50 layers at N = 32 (FP32, NHWC) beside torch
(cuDNN, TF32 off, channels_last), fprop (+bias+relu), dgrad and wgrad.

For every layer and direction it times torch, then the first ``--top`` mode-A candidates of the conv
engines (conv_implicit_precomp, conv_implicit_gemm, conv_gemm_1x1, conv_direct, and whatever ranks
first overall), each checked against torch's result first (relative L2 error printed) and timed
with CUDA events (median of ``--reps`` runs, each a loop of ``--inner`` launches). Prints
ms, TFLOP/s (2*N*K*P*Q*C/G*R*S / time) and ratio = torch ms / ncudnn ms (> 1: ncudnn faster), then
the geomean of the best ratio per direction. A wall-clock budget (``--budget`` s, JIT included)
skips what is left once it is spent.

    python3 tools/probe_conv.py --dirs wgrad          # every layer, one direction (< 2 min each)
    python3 tools/probe_conv.py --dirs wgrad --layers c2_3x3_64 --top 6
"""
import argparse
import math
import time

import numpy as np

MINE = ("conv_implicit_precomp", "conv_implicit_gemm", "conv_gemm_1x1", "conv_direct")

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


def desc(uid, t, name, virtual=False):
    from ncudnn.ir import TensorDesc
    from ncudnn.types import cudnnDataType_t as DT
    if virtual:
        return TensorDesc(uid, tuple(t.shape), tuple(t.stride()), DT.CUDNN_DATA_FLOAT, is_virtual=True, name=name)
    return TensorDesc(uid, tuple(t.shape), tuple(t.stride()), DT.CUDNN_DATA_FLOAT, name=name)


def graph(direction, x, w, y, b, stride, pad, groups):
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
    parts = [c.engine]
    if c.engine in ("conv_implicit_precomp", "conv_implicit_gemm", "conv_gemm_1x1"):
        parts.append(registry.by_name(c.engine).TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)].label)
        parts.append(f"split{c.get(K.CUDNN_KNOB_TYPE_SPLIT_K)}{'a' if c.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) == 0 else ''}"
                     + (" phased" if c.get(K.CUDNN_KNOB_TYPE_SPLIT_RS) == 1 else ""))
    else:
        parts.append(" ".join(f"{K(k).name.replace('CUDNN_KNOB_TYPE_', '')}={v}" for k, v in c.knobs))
    return " ".join(parts)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", nargs="*", default=list(LAYERS))
    ap.add_argument("--dirs", nargs="*", default=["fprop", "dgrad", "wgrad"])
    ap.add_argument("--top", type=int, default=2, help="conv-engine candidates timed per problem")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--inner", type=int, default=5)
    ap.add_argument("--budget", type=float, default=105.0, help="seconds; later candidates are skipped")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from ncudnn.engines import api
    from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.time()
    best = {d: [] for d in args.dirs}
    cl = torch.channels_last
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  cuDNN {torch.backends.cudnn.version()}"
          f"  N={args.n} FP32 NHWC, TF32 off", flush=True)
    for name in args.layers:
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
                out = torch.empty(N, K_, P, P, device="cuda").to(memory_format=cl)
                g = graph(d, x, w, out, b, st, pad, G)
                pack = {1: x, 2: w, 3: out, 4: b}
                got = out
            elif d == "dgrad":
                ref_fn = lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, st, pad, 1, G)  # noqa: E731
                dx = torch.empty_like(x)
                g = graph(d, dx, w, dy, None, st, pad, G)
                pack = {1: dx, 2: w, 3: dy}
                got = dx
            else:
                ref_fn = lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, st, pad, 1, G)  # noqa: E731
                dw = torch.empty_like(w)
                g = graph(d, x, dw, dy, None, st, pad, G)
                pack = {1: x, 2: dw, 3: dy}
                got = dw
            expect = ref_fn()
            t_ref = timed(ref_fn, args.reps, args.inner)
            print(f"{name:18s} {d:5s} torch/cuDNN      {t_ref:8.4f} ms {flops / t_ref / 1e9:6.1f} TFLOP/s", flush=True)
            ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
            # deterministic configs only (SPLIT_K_BUF = 0 is the atomic twin of the one before it)
            mine = [e for e in ecs if e.config.engine in MINE and e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) != 0]
            pick = mine[:args.top]
            if any(e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_RS) == 1 for e in pick):
                plain = [e for e in mine if e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_RS) != 1][:1]
                pick += [e for e in plain if e not in pick]      # the all-taps GEMM beside the phased one
            if ecs and ecs[0].config.engine not in MINE:
                pick = [ecs[0]] + pick
            ratios = []
            for ec in pick:
                if time.time() - t_start > args.budget:
                    print(f"{name:18s} {d:5s} {label(ec)}: skipped (budget)", flush=True)
                    continue
                try:
                    t0 = time.time()
                    plan = api.build_plan(g, ec)
                    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
                    got.fill_(float("nan"))
                    api.execute(plan, pack, ws)
                    torch.cuda.synchronize()
                    err = rel(got, expect)
                    ms = timed(lambda: api.execute(plan, pack, ws), args.reps, args.inner)
                    ratio = t_ref / ms
                    if err < 1e-4 and ec.config.engine in MINE:
                        ratios.append(ratio)
                    print(f"{name:18s} {d:5s} {label(ec):44s} {ms:8.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s "
                          f"ratio {ratio:5.2f}  err {err:.1e}  ws {plan.workspace_size / 1e6:.1f} MB  "
                          f"(build+check {time.time() - t0:.1f}s)", flush=True)
                except Exception as e:  # noqa: BLE001
                    print(f"{name:18s} {d:5s} {label(ec)}: FAILED {type(e).__name__}: {e}", flush=True)
            if ratios:
                best[d].append(max(ratios))
    for d, rs in best.items():
        if rs:
            gm = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"geomean best ratio {d}: {gm:.2f} over {len(rs)} layers", flush=True)
    print(f"# total {time.time() - t_start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
