"""GPU probe: FP32 weight gradient of ResNet-50 1x1 layers (N = 32, TF32 off), NCHW and NHWC: ncudnn's
conv_gemm_1x1 (fast-mainloop tiles, SPLIT_K; NCHW 56² images summed through the workspace, NCHW 7² /
14² and stride-2 x copied pixels-last first) beside torch (cuDNN) in the same process.

Per (layer, layout) it times torch.nn.grad.conv2d_weight, then: the ranking's pick (mode A, first
config), the first ``--top`` conv_gemm_1x1 candidates, the best other conv engine (what ran before
this engine took wgrad), and the best conv_gemm_1x1 tile at a quarter and half its SPLIT_K ("var").
Each is checked against torch first (relative L2 error) and timed with CUDA events (median of
``--reps`` runs of ``--inner`` launches; L2 not flushed: operands are 3-26 MB, the 50 MB L2 holds some
of them). Prints ms, TFLOP/s (2*N*K*C*P*Q / time, P*Q = dy's pixels), ratio = torch ms / ours (> 1:
ncudnn faster), workspace, the predicted time, and whether the fast mainloop ran (``fast``) or its
generic fallback (``generic``). A wall-clock budget (``--budget`` s, JIT included) skips the rest.

    python3 tools/probe_wgrad_1x1.py                    # 6 stride-1 layers x 2 layouts, < 2 min
    python3 tools/probe_wgrad_1x1.py --layers c1024_2048_14_s2 c512_1024_28_s2 c256_512_56_s2
    python3 tools/probe_wgrad_1x1.py --layers c64_64_56 --top 6 --layouts nchw
"""
import argparse
import math
import time

import numpy as np

#: name: (C, K, H = W of x, stride); unpadded
LAYERS = {
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
DEFAULT = [n for n, v in LAYERS.items() if v[3] == 1]
OTHERS = ("conv_implicit_precomp", "conv_implicit_gemm", "conv_tc", "conv_direct")


def desc(uid, t, name):
    from ncudnn.ir import TensorDesc
    from ncudnn.types import cudnnDataType_t as DT
    return TensorDesc(uid, tuple(t.shape), tuple(t.stride()), DT.CUDNN_DATA_FLOAT, name=name)


def graph(x, dw, dy, stride=1):
    from ncudnn.ir import ConvWgrad, OpGraph
    from ncudnn.types import cudnnConvolutionMode_t as CM
    attrs = dict(spatial_dims=2, stride=(stride, stride), pre_padding=(0, 0), post_padding=(0, 0), dilation=(1, 1),
                 mode=CM.CUDNN_CROSS_CORRELATION)
    return OpGraph([ConvWgrad("wgrad", {"X": desc(1, x, "x"), "DY": desc(3, dy, "dy")},
                              {"DW": desc(2, dw, "dw")}, **attrs)]).finalize()


def label(ec):
    from ncudnn.engines import registry
    from ncudnn.types import cudnnBackendKnobType_t as K
    c = ec.config
    eng = registry.by_name(c.engine)
    tiles = getattr(eng, "TILES", None)
    t = c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)
    if tiles is not None and t is not None and t < len(tiles):
        buf = "a" if c.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) == 0 else ""
        return f"{c.engine} {tiles[t].label} split{c.get(K.CUDNN_KNOB_TYPE_SPLIT_K)}{buf}"
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", nargs="*", default=DEFAULT)
    ap.add_argument("--layouts", nargs="*", default=["nhwc", "nchw"])
    ap.add_argument("--top", type=int, default=3, help="conv_gemm_1x1 candidates timed per problem")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--inner", type=int, default=10)
    ap.add_argument("--budget", type=float, default=100.0, help="seconds; later candidates are skipped")
    args = ap.parse_args()

    import torch
    from ncudnn.engines import api
    from ncudnn.engines import device as dev_mod
    from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.time()
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  cuDNN {torch.backends.cudnn.version()}"
          f"  N={args.n} FP32 wgrad 1x1, TF32 off", flush=True)
    best = {lay: [] for lay in args.layouts}
    for name in args.layers:
        C, K_, H, st = LAYERS[name]
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
            g = graph(x, dw, dy, st)
            ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
            ecs = [e for e in ecs if e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) != 0]   # deterministic only
            pick = ecs[:1]
            pick += [e for e in ecs if e.config.engine == "conv_gemm_1x1" and e not in pick][:args.top]
            pick += [e for e in ecs if e.config.engine in OTHERS and e not in pick][:1]
            mine = [e for e in ecs if e.config.engine == "conv_gemm_1x1"][:1]
            for e in mine:                   # the best conv_gemm_1x1 tile at a quarter and half its split
                sk = e.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K)
                for s in sorted({max(1, sk // 4), max(1, sk // 2)} - {sk}):
                    pick.append(Variant(e.config.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, s)))
            ratios = []
            for i, ec in enumerate(pick):
                what = "PICK " if i == 0 else ("var  " if isinstance(ec, Variant) else "     ")
                if time.time() - t_start > args.budget:
                    print(f"{tag} {what}{label(ec)}: skipped (budget)", flush=True)
                    continue
                try:
                    t0 = time.time()
                    plan = api.build_plan(g, ec.config if isinstance(ec, Variant) else ec)
                    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
                    dw.fill_(float("nan"))
                    api.execute(plan, {1: x, 2: dw, 3: dy}, ws)
                    torch.cuda.synchronize()
                    err = rel(dw, expect)
                    ms = timed(lambda: api.execute(plan, {1: x, 2: dw, 3: dy}, ws), args.reps, args.inner)
                    ratio = t_ref / ms
                    if err < 1e-4:
                        ratios.append(ratio)
                    pred = getattr(ec, "predicted_time", None)
                    pred = f"pred {pred * 1e3:.4f} ms" if pred else ""
                    print(f"{tag} {what}{label(ec):40s} {ms:8.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s ratio {ratio:5.2f}"
                          f"  err {err:.1e}  ws {plan.workspace_size / 1e6:.1f} MB  {path(plan)}  {pred}"
                          f"  (build+check {time.time() - t0:.1f}s)", flush=True)
                except Exception as e:  # noqa: BLE001
                    print(f"{tag} {what}{label(ec)}: FAILED {type(e).__name__}: {e}", flush=True)
            if ratios:
                best[lay].append(max(ratios))
    for lay, rs in best.items():
        if rs:
            gm = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"geomean best ratio {lay}: {gm:.2f} over {len(rs)} layers", flush=True)
    print(f"# device model {dev_mod.current().name}; total {time.time() - t_start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
