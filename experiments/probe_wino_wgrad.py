"""GPU probe: Winograd weight gradient (kernels/winograd/wgrad.py) beside torch's cuDNN wgrad (FP32,
TF32 off) on ResNet-50 3x3 layers at N = 32, NCHW and NHWC.

Per layer and layout it times torch.nn.grad.conv2d_weight (cuDNN; channels_last for NHWC), then per
tile r (F(3x3, 2x2) / F(3x3, 4x4)) the engine's best-costed conv_winograd_nonfused config built and
executed through the API (dy transform, x transform, alpha^2 x S batched GEMM, output transform;
kernels through the kernel cache), and optionally (``--gemms``) kernel-level variants with other
GEMM tiles (generic 128x128x16 / 128x128x8 VEC=4, fast-mainloop 128x128x8) through
wgrad_launch.run_wgrad (numba JIT: each GEMM kernel compiles for tens of seconds). Every variant is checked first
against torch's float64 wgrad (relative L2 error). Timing: CUDA events around ``--reps`` launches
queued behind a torch.cuda._sleep (launch overhead hidden), median of ``--trials``; inputs fixed
(L2-warm, as cuDNN's in the same loop). Prints ms, effective TFLOP/s (2*N*K*P*Q*C*9 / t), ratio =
torch ms / ours (> 1: ours faster), the split S and chunk TC; at the end the geomean of the best
ratio per layer and layout.

    python3 experiments/probe_wino_wgrad.py                  # all layers, engine configs, both tiles
    python3 experiments/probe_wino_wgrad.py --no-engine --gemms fast128x8 g128x16 --tiles 4 --layouts nhwc
"""
import argparse
import math
import time

#: name: (C, K, H = W), 3x3, stride 1, pad 1
LAYERS = {
    "c4_256": (256, 256, 14),
    "c3_128": (128, 128, 28),
    "c5_512": (512, 512, 7),
    "c2_64": (64, 64, 56),
    "c128_k256_56": (128, 256, 56),
}


def gemm_variants():
    from ncudnn.kernels.gemm.config import GemmConfig
    g16 = GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=16, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4)
    g8 = g16.replace(BLOCK_K=8)
    fast = g8.replace(MAINLOOP="fast", MAX_REGS=128)
    # (label, config, concurrent blocks per SM: 167 registers -> 1, fast's 128 -> 2)
    return {"g128x16": (g16, 1), "g128x8": (g8, 1), "fast128x8": (fast, 2)}


def time_gpu(fn, reps, trials):
    import torch
    out = []
    for _ in range(trials):
        torch.cuda.synchronize()
        torch.cuda._sleep(20_000_000)          # ~10 ms of GPU time: the launches below queue behind it
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / reps)
    out.sort()
    return out[len(out) // 2]


def rel(out, ref):
    o, r = out.double(), ref.double()
    return float((o - r).norm() / r.norm())


def engine_runners(x, dy, dw, tiles):
    """[(label, run or None)]: per WINO_TILE in ``tiles`` the engine's best-costed conv_winograd_nonfused
    wgrad config built through the API (kernels through the kernel cache), and what mode A ranks first."""
    import numpy as np
    from numba import cuda
    from ncudnn.engines import api, registry
    from ncudnn.ir import ConvWgrad, OpGraph, TensorDesc
    from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as KN
    from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnDataType_t as DT
    out = []
    try:
        d = lambda uid, t, n: TensorDesc(uid, tuple(t.shape), tuple(t.stride()), DT.CUDNN_DATA_FLOAT, name=n)  # noqa
        attrs = dict(spatial_dims=2, stride=(1, 1), pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1),
                     mode=CM.CUDNN_CROSS_CORRELATION)
        g = OpGraph([ConvWgrad("wgrad", {"X": d(1, x, "x"), "DY": d(3, dy, "dy")}, {"DW": d(2, dw, "dw")},
                               **attrs)]).finalize()
        eng = registry.by_name("conv_winograd_nonfused")
        sub = api.problem(g)
        p = eng.problem(sub)
        ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
        out.append((f"mode A first: {ecs[0].name} {ecs[0].config}", None))
        cands = list(eng.candidates(sub, api.context()))
    except Exception as e:       # noqa: BLE001  (the probe reports and goes on)
        return [(f"engine: {type(e).__name__}: {e}"[:200], None)]
    pack = {1: x, 2: dw, 3: dy}
    for r in tiles:
        cfg = next((c for c in cands if c.get(KN.CUDNN_KNOB_TYPE_WINO_TILE) == r), None)
        if cfg is None:
            out.append((f"engine F{r}: no candidate", None))
            continue
        try:
            plan = api.build_plan(g, cfg)
            ws = cuda.device_array(max(plan.workspace_size, 1), np.uint8)
            tile = eng.TILES[cfg.get(KN.CUDNN_KNOB_TYPE_TILE_SIZE)].label
            S, TC, _ = p.split(r)
            run = (lambda plan=plan, ws=ws: api.execute(plan, pack, ws))
            pred = eng.cost(sub, cfg, api.context().device) * 1e3
            out.append((f"eng F{r} {tile}", run, f"{S} x {TC}, predicted {pred:.4f} ms",
                        lambda plan=plan, ws=ws: kernel_launches(plan, pack, ws)))
        except Exception as e:   # noqa: BLE001
            out.append((f"engine F{r}: {type(e).__name__}: {e}"[:200], None))
    return out


def kernel_launches(plan, pack, ws):
    """[(name, run)] of the plan's single launches (dy transform, x transform, GEMM [+ reduce], output)."""
    from ncudnn import memory
    sp = plan.parts[0]
    views = {u: memory.as_view(t) for u, t in pack.items()}
    launches = sp.launches(views, memory.as_view(ws))
    names = ["dy", "x"] + [f"gemm{i}" for i in range(len(launches) - 3)] + ["out"]
    return [(n, (lambda l=l: l.run(None, 0))) for n, l in zip(names, launches)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", nargs="*", default=list(LAYERS))
    ap.add_argument("--layouts", nargs="*", default=["nchw", "nhwc"])
    ap.add_argument("--tiles", nargs="*", type=int, default=[2, 4])
    ap.add_argument("--gemms", nargs="*", default=[],
                    help="kernel-level variants (numba JIT, no kernel cache) of g128x16 g128x8 fast128x8")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--budget", type=float, default=100.0, help="seconds (JIT included) before skipping the rest")
    ap.add_argument("--no-engine", action="store_true")
    ap.add_argument("--no-breakdown", dest="breakdown", action="store_false", help="skip the per-kernel times")
    a = ap.parse_args()

    import torch
    import ncudnn  # noqa: F401  (before numba: picks the device / simulator)
    from numba import cuda
    from ncudnn.kernels.winograd.wgrad_launch import WgradShape, run_wgrad
    import numpy as np

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    t0 = time.time()
    N = 32
    best = {}
    print(f"{'layer':14s} {'lay':4s} {'variant':22s} {'ms':>8s} {'TF/s':>6s} {'ratio':>6s} {'relerr':>9s}  S x TC")
    for name in a.layers:
        C, K, H = LAYERS[name]
        flops = 2.0 * N * K * H * H * C * 9
        for lay in a.layouts:
            if time.time() - t0 > a.budget:
                print(f"budget spent: skipping {name} {lay}")
                continue
            nhwc = lay == "nhwc"
            mf = torch.channels_last if nhwc else torch.contiguous_format
            x = torch.randn(N, C, H, H, device="cuda").contiguous(memory_format=mf)
            dy = torch.randn(N, K, H, H, device="cuda").contiguous(memory_format=mf)
            dw = torch.empty(K, C, 3, 3, device="cuda").contiguous(memory_format=mf)
            ref = torch.nn.grad.conv2d_weight(x.double(), (K, C, 3, 3), dy.double(), padding=1)
            tw = lambda: torch.nn.grad.conv2d_weight(x, (K, C, 3, 3), dy, padding=1)  # noqa: E731
            e_t = rel(tw(), ref)
            t_ms = time_gpu(tw, a.reps, a.trials)
            print(f"{name:14s} {lay:4s} {'torch cudnn':22s} {t_ms:8.4f} {flops / t_ms / 1e9:6.1f} {1.0:6.2f} "
                  f"{e_t:9.2e}")
            xs, dys, dws = (cuda.as_cuda_array(t.permute(0, 2, 3, 1) if nhwc else t) for t in (x, dy, dw))
            flat = lambda arr: arr.reshape(arr.size) if arr.is_c_contiguous() else None  # noqa: E731
            xf, dyf, dwf = flat(xs), flat(dys), flat(dws)
            st = lambda t: tuple(t.stride())  # noqa: E731
            for r in a.tiles:
                for label in a.gemms:
                    gcfg, per_sm = gemm_variants()[label]
                    if time.time() - t0 > a.budget:
                        break
                    sh = WgradShape(N, C, H, H, K, H, H, (1, 1), st(x), st(dy), st(dw), r, gcfg, cfast=nhwc,
                                    slots=132 * per_sm)
                    ws = cuda.device_array(sh.workspace_elems, np.float32)
                    fn = lambda: run_wgrad(sh, xf, dyf, dwf, ws)  # noqa: E731
                    try:
                        dw.fill_(float("nan"))
                        fn()
                        torch.cuda.synchronize()
                        e = rel(dw, ref)
                        ms = time_gpu(fn, a.reps, a.trials)
                    except Exception as ex:     # noqa: BLE001
                        print(f"{name:14s} {lay:4s} F{r} {label:18s} FAILED {type(ex).__name__}: {ex}"[:300])
                        continue
                    ratio = t_ms / ms
                    ok = e < 1e-4
                    if ok:
                        best[(name, lay)] = max(best.get((name, lay), 0.0), ratio)
                    print(f"{name:14s} {lay:4s} F{r} {label:18s} {ms:8.4f} {flops / ms / 1e9:6.1f} {ratio:6.2f} "
                          f"{e:9.2e}  {sh.S} x {sh.TC}{'' if ok else '  (error too large: not counted)'}")
            if a.no_engine:
                continue
            for item in engine_runners(x, dy, dw, a.tiles):
                if item[1] is None:
                    print(f"{name:14s} {lay:4s} {item[0]}")
                    continue
                label, run, extra, parts = item
                if time.time() - t0 > a.budget:
                    print(f"budget spent: skipping {name} {lay} {label}")
                    continue
                try:
                    dw.fill_(float("nan"))
                    run()
                    torch.cuda.synchronize()
                    e = rel(dw, ref)
                    ms = time_gpu(run, a.reps, a.trials)
                except Exception as ex:     # noqa: BLE001
                    print(f"{name:14s} {lay:4s} {label} FAILED {type(ex).__name__}: {ex}"[:300])
                    continue
                ok = e < 1e-4
                if ok:
                    best[(name, lay)] = max(best.get((name, lay), 0.0), t_ms / ms)
                print(f"{name:14s} {lay:4s} {label:22s} {ms:8.4f} {flops / ms / 1e9:6.1f} {t_ms / ms:6.2f} "
                      f"{e:9.2e}  {extra}{'' if ok else '  (error too large: not counted)'}")
                if a.breakdown:
                    try:
                        each = [(n, time_gpu(f, a.reps, 3)) for n, f in parts()]
                        print(f"{'':19s}   per kernel ms: " + ", ".join(f"{n} {t:.4f}" for n, t in each))
                    except Exception as ex:     # noqa: BLE001
                        print(f"{'':19s}   per kernel: {type(ex).__name__}: {ex}"[:200])
    if best:
        g = math.exp(sum(math.log(v) for v in best.values()) / len(best))
        print(f"geomean of the best ratio over {len(best)} layer/layouts: {g:.3f}")
    print(f"wall {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
