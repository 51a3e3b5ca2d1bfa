"""GPU probe: the mma.sync tensor-core kernels beside torch in one process (issue #7).

Run on the GPU machine from the repo root::

    python3 experiments/probe_tc.py                       # everything below, within --budget seconds
    python3 experiments/probe_tc.py --only conv --layers c5 stem
    python3 experiments/probe_tc.py --only tf32 --sizes 8192

Sections (each line: config, ms, TFLOP/s, ratio = torch time / ours, rel err vs a float64 / FP32 truth):

* ``tf32``: C = A @ B, FP32 storage, A (m, k) and B stored (n, k), every config of
  ``tc_gemm.CONFIGS`` (BLOCK_K halved: the 16-bit kernel's shared bytes) and every mainloop version,
  beside ``torch.matmul`` with TF32 on (cuBLAS), at 8192^3 and 4096^3. Rel err: first 256 rows vs float64.
* ``bf16``: the same for BF16 (mk_kn) at 8192^3, only the first configs (v1 against later versions).
* ``conv``: BF16 NHWC conv fprop + bias + relu (the fused kernel conv_tc runs), the 8 ResNet-50 layers
  at N = 32, every tile of ``engines.conv.tc.TILES`` and mainloop version (v1, v3, v4 where C % BLOCK_K
  == 0; conv_tc's default is v4 there, v3 elsewhere), beside ``torch.conv2d(x, w, b)`` in
  channels_last BF16 (cuDNN; its relu not timed, ours is). Rel err vs torch's FP32 conv. The line
  "engine order" gives conv_tc's ranking of its tiles for the layer (what the heuristic would pick).
  The line "engine plan" times the heuristics' first plan through the API (what the bench runs; for the
  stem, C = 3, it includes conv_tc's two channel-padding launches); the per-tile lines of the stem time
  the kernel on x / w zero-padded to C = 8 beforehand.

Timing: median of ``--iters`` CUDA-event timings after 3 warm-ups (experiments/tc_timing.py), inputs
fixed (L2 not flushed). TFLOP/s = 2 * M * N * K / s (conv: 2 * N * P * Q * K * C * R * S). JIT of each
kernel happens at its first launch (untimed). Sections stop starting new configs past ``--budget``.
"""
import argparse
import math
import sys
import time
import traceback

import numpy as np

T0 = time.time()


def _over(budget):
    return time.time() - T0 > budget


def _versions(conv=False):
    """Mainloop versions the kernel factory knows (TcGemmConfig.VERSION; 4 is conv-only)."""
    from ncudnn.kernels.tc_gemm.config import VERSIONS
    return tuple(v for v in VERSIONS if conv or v < 4)


def _with_version(cfg, v):
    return cfg if v == 1 else cfg.replace(VERSION=v)


# ------------------------------------------------------------------------------------------- GEMM
def gemm_section(dtype, sizes, cfg_idx, iters, budget):
    from ncudnn.kernels.tc_gemm import CONFIGS
    from tc_gemm_timing import _operands, time_config, time_torch

    for n in sizes:
        M = N = K = n
        t_ref = time_torch(M, N, K, dtype, iters)
        flop = 2.0 * M * N * K
        print(f"== {dtype} {M}x{N}x{K}: torch {'TF32 ' if dtype == 'tf32' else ''}"
              f"{flop / t_ref / 1e9:.3f} ms  {t_ref:.1f} TFLOP/s" if t_ref else f"== {dtype} {n}^3 (no torch)",
              flush=True)
        layout = (True, True) if dtype == "tf32" else (True, False)
        data = _operands(M, N, K, *layout, dtype)
        rows = []
        for i in cfg_idx:
            for v in _versions():
                cfg = _with_version(CONFIGS[i], v)
                if _over(budget):
                    print(f"   {cfg.name:32s} skipped (budget)", flush=True)
                    continue
                try:
                    tf, err = time_config(cfg, M, N, K, *layout, iters=iters, dtype=dtype, data=data)
                except Exception as e:     # a failing variant must not hide the others
                    print(f"   {cfg.name:32s} FAILED {type(e).__name__}: {str(e).splitlines()[0][:160]}",
                          flush=True)
                    continue
                rows.append((tf, cfg.name))
                ratio = f"{tf / t_ref:5.2f}x" if t_ref else "  -  "
                print(f"   {cfg.name:32s} {flop / tf / 1e9:8.3f} ms {tf:7.1f} TFLOP/s  {ratio}  rel_err {err:.2e}",
                      flush=True)
        if rows:
            best = max(rows)
            print(f"   best {dtype} {n}^3: {best[1]} {best[0]:.1f} TFLOP/s"
                  + (f" = {best[0] / t_ref:.2f}x torch" if t_ref else ""), flush=True)


# ------------------------------------------------------------------------------------------- conv
#: (name, C, H, K, R, stride, pad) at N = 32 (ResNet-50 layers of the bench's conv_fprop_bias_relu suite)
LAYERS = (
    ("c2_3x3_64", 64, 56, 64, 3, 1, 1),
    ("c3_3x3_128", 128, 28, 128, 3, 1, 1),
    ("c4_3x3_256", 256, 14, 256, 3, 1, 1),
    ("c5_3x3_512", 512, 7, 512, 3, 1, 1),
    ("seed_3x3_128_256", 128, 56, 256, 3, 1, 1),
    ("c2_1x1_256_64", 256, 56, 64, 1, 1, 0),
    ("c2_1x1_64_256", 64, 56, 256, 1, 1, 0),
    ("stem_7x7_s2", 3, 224, 64, 7, 2, 3),
)


def layer_graph(N, C, H, K, R, stride, pad):
    """The layer's BF16 NHWC conv + bias + relu graph (uids: 1 x, 2 w, 3 bias (1, K, 1, 1), 4 y) and a
    context allowing tensor cores."""
    from dataclasses import replace

    from ncudnn import reference as ref
    from ncudnn.engines import api
    from ncudnn.ir import ConvFprop, OpGraph, Pointwise, TensorDesc, packed_strides
    from ncudnn.ir.tensor import nhwc_order
    from ncudnn.types import cudnnDataType_t as DT
    from ncudnn.types import cudnnPointwiseMode_t as PM

    bf = DT.CUDNN_DATA_BFLOAT16

    def t(uid, dims):
        return TensorDesc(uid, tuple(dims), packed_strides(dims, nhwc_order(4)), bf, name=f"t{uid}")

    dims, wdims = (N, C, H, H), (K, C, R, R)
    ydims = ref.conv_output_shape(dims, wdims, stride=(stride,) * 2, pre_pad=(pad,) * 2, post_pad=(pad,) * 2,
                                  dilation=(1, 1))
    conv = ConvFprop("conv", {"X": t(1, dims), "W": t(2, wdims)}, {"Y": TensorDesc(10, is_virtual=True, name="v")},
                     spatial_dims=2, stride=(stride,) * 2, pre_padding=(pad,) * 2, post_padding=(pad,) * 2,
                     dilation=(1, 1))
    add = Pointwise("bias", {"X": conv.outputs["Y"], "B": t(3, (1, K, 1, 1))},
                    {"Y": TensorDesc(11, is_virtual=True, name="v2")}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": t(4, ydims)}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    g = OpGraph([conv, add, relu]).finalize()
    return g, replace(api.context(), allow_tensor_cores=True)


def engine_order(N, C, H, K, R, stride, pad):
    """conv_tc's ranked tile labels for the layer (BF16 NHWC + bias + relu graph), or the refusal."""
    from ncudnn.engines import api, registry
    from ncudnn.types import cudnnBackendKnobType_t as KT

    g, cx = layer_graph(N, C, H, K, R, stride, pad)
    eng = registry.by_name("conv_tc")
    sub = api.problem(g)
    st, why = eng.check_support(sub, cx)
    if int(st) != 0:
        return f"refused: {why}"
    out = []
    for c in eng.candidates(sub, cx):
        lab = eng.TILES[c.get(KT.CUDNN_KNOB_TYPE_TILE_SIZE)].label
        out.append(f"{lab} ({eng.cost(sub, c, cx.device) * 1e3:.3f} ms)")
    ecs = api.get_heuristics(g, ctx=cx)
    top = f"; heuristics top: {ecs[0].config.engine}" if ecs else ""
    return ", ".join(out) + top


def conv_layer(name, C, H, K, R, stride, pad, N, tiles, iters, budget):
    import torch
    import torch.nn.functional as F
    from numba import cuda

    from ncudnn.kernels.pointwise import epilogue as ep
    from ncudnn.kernels.tc_conv import conv_args, conv_grid, make_tc_conv_fprop
    from ncudnn.kernels.tc_gemm.launch import _compiled
    from tc_timing import median_seconds

    P = (H + 2 * pad - R) // stride + 1
    flop = 2.0 * N * P * P * K * C * R * R
    torch.manual_seed(0)
    x = torch.randn(N, C, H, H, device="cuda").to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(K, C, R, R, device="cuda") / math.sqrt(C * R * R)).to(torch.bfloat16)
    w = w.contiguous(memory_format=torch.channels_last)
    b = torch.randn(K, device="cuda").to(torch.bfloat16)
    t_ref = median_seconds(lambda: F.conv2d(x, w, b, stride, pad), iters)
    try:
        order = engine_order(N, C, H, K, R, stride, pad)
    except Exception as e:
        order = f"(ranking failed: {type(e).__name__}: {e})"
    print(f"== {name} N={N} C={C} {H}x{H} K={K} {R}x{R} s{stride}: torch {t_ref * 1e3:.4f} ms "
          f"{flop / t_ref / 1e12:.1f} TFLOP/s", flush=True)
    print(f"   engine order: {order}", flush=True)
    try:
        engine_plan_line(N, C, H, K, R, stride, pad, x, w, b, t_ref, flop, iters)
    except Exception as e:
        print(f"   engine plan FAILED {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)
    Cp = C
    if C % 8:     # the stem: zero-pad channels to 8 (same result, 8/3 of the MACs)
        Cp = 8
        x = torch.nn.functional.pad(x.permute(0, 2, 3, 1), (0, Cp - C)).permute(0, 3, 1, 2)
        x = x.contiguous(memory_format=torch.channels_last)
        w = torch.nn.functional.pad(w.permute(0, 2, 3, 1), (0, Cp - C)).permute(0, 3, 1, 2)
        w = w.contiguous(memory_format=torch.channels_last)
        print(f"   (ours: x, w zero-padded to C = {Cp})", flush=True)
    y = torch.empty(N, K, P, P, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    ref = torch.relu(F.conv2d(x.float(), w.float(), b.float(), stride, pad))

    def arr(tn):   # a channels_last tensor's storage as a flat numba device array (no copy)
        return cuda.as_cuda_array(tn.permute(0, 2, 3, 1).reshape(-1).view(torch.int16)).view(np.uint16)

    best = None
    for label, cfg in tiles:
        if cfg.VERSION >= 4 and Cp % cfg.BLOCK_K:
            continue                 # v4 (one tap per k tile) needs C % BLOCK_K == 0
        if _over(budget):
            print(f"   {label:34s} skipped (budget)", flush=True)
            continue
        try:
            spec = ep.EpilogueSpec((ep.bias("col"), ep.relu()), "bfloat16")
            kern = make_tc_conv_fprop(cfg, "bfloat16", spec, "bfloat16", "bfloat16")
            bias = cuda.as_cuda_array(b.view(torch.int16)).view(np.uint16)
            yd = arr(y)
            args = conv_args(kern, arr(x), arr(w), yd, bias, yd, N, Cp, H, H, K, P, P, R, R, (stride, stride),
                             (pad, pad), (1, 1), (H * H * Cp, H * Cp, Cp), R * R * Cp, K, 1)
            launch = _compiled(kern).prepare(conv_grid(kern, N, P, P, K), cfg.threads, args, kern.smem)
            y.fill_(float("nan"))
            launch.run(None, 0)
            torch.cuda.synchronize()
            err = float((y.float() - ref).norm() / ref.norm())
            t = median_seconds(lambda: launch.run(None, 0), iters)
        except Exception as e:
            print(f"   {label:34s} FAILED {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)
            continue
        blocks = conv_grid(kern, N, P, P, K)[0]
        print(f"   {label:34s} {t * 1e3:8.4f} ms {flop / t / 1e12:7.1f} TFLOP/s  {t_ref / t:5.2f}x  "
              f"rel_err {err:.1e}  blocks {blocks}", flush=True)
        if err < 2e-2 and (best is None or t < best[0]):
            best = (t, label)
    if best:
        print(f"   best {name}: {best[1]} {t_ref / best[0]:.2f}x torch", flush=True)
        return t_ref / best[0]
    return None


def engine_plan_line(N, C, H, K, R, stride, pad, x, w, b, t_ref, flop, iters):
    """Time the heuristics' first plan for the layer through the API (what the bench runs: padding
    launches, the conv, everything in the plan), beside torch; rel err vs torch's FP32 conv."""
    import torch
    import torch.nn.functional as F

    from ncudnn.engines import api
    from tc_timing import median_seconds

    g, cx = layer_graph(N, C, H, K, R, stride, pad)
    ec = api.get_heuristics(g, ctx=cx)[0]
    plan = api.build_plan(g, ec, cx)
    P = (H + 2 * pad - R) // stride + 1
    y = torch.empty(N, K, P, P, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    ws = torch.empty(max(plan.workspace_size, 1), device="cuda", dtype=torch.uint8)
    pack = {1: x.data_ptr(), 2: w.data_ptr(), 3: b.data_ptr(), 4: y.data_ptr()}
    y.fill_(float("nan"))
    api.execute(plan, pack, ws.data_ptr() if plan.workspace_size else None)
    torch.cuda.synchronize()
    ref = torch.relu(F.conv2d(x.float(), w.float(), b.float(), stride, pad))
    err = float((y.float() - ref).norm() / ref.norm())
    t = median_seconds(lambda: api.execute(plan, pack, ws.data_ptr() if plan.workspace_size else None), iters)
    print(f"   engine plan {ec.config} {t * 1e3:8.4f} ms {flop / t / 1e12:7.1f} TFLOP/s  {t_ref / t:5.2f}x  "
          f"rel_err {err:.1e}  workspace {plan.workspace_size}", flush=True)


def conv_section(names, N, iters, budget, tile_idx=None):
    from ncudnn.engines.conv.tc import TILES

    tiles = []
    for i in (tile_idx if tile_idx is not None else range(len(TILES) - 1)):   # the last tile is the simulator's
        t = TILES[i]
        for v in _versions(conv=True):
            tiles.append((f"[{i}] {t.label} s{t.stages}" + (f" v{v}" if v != 1 else ""), _with_version(t.cfg, v)))
    ratios = []
    for lay in LAYERS:
        if names and not any(lay[0].startswith(n) for n in names):
            continue
        try:
            r = conv_layer(*lay, N, tiles, iters, budget)
        except Exception:
            traceback.print_exc()
            r = None
        if r:
            ratios.append(r)
    if ratios:
        print(f"conv geomean of best-config ratios over {len(ratios)} layers: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}x torch", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="experiments/probe_tc.py")
    ap.add_argument("--only", nargs="*", default=["tf32", "conv", "bf16"], choices=["tf32", "bf16", "conv"])
    ap.add_argument("--sizes", nargs="*", type=int, default=[8192, 4096])
    ap.add_argument("--configs", nargs="*", type=int, default=None, help="tc_gemm CONFIGS indices")
    ap.add_argument("--layers", nargs="*", default=None, help="layer name prefixes (c2_3x3, c5, stem, ...)")
    ap.add_argument("--tiles", nargs="*", type=int, default=None, help="conv_tc TILES indices (conv section)")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--budget", type=float, default=80.0, help="seconds after which no new config starts")
    args = ap.parse_args(argv)
    from ncudnn.kernels.tc_gemm import CONFIGS
    cfgs = args.configs if args.configs is not None else list(range(len(CONFIGS)))
    for sec in args.only:
        try:
            if sec == "tf32":
                gemm_section("tf32", args.sizes, cfgs, args.iters, args.budget)
            elif sec == "bf16":
                gemm_section("bf16", [8192], cfgs[:2], args.iters, args.budget)
            else:
                conv_section(args.layers, args.n, args.iters, args.budget, args.tiles)
        except Exception:
            traceback.print_exc()
    print(f"probe_tc done in {time.time() - T0:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
