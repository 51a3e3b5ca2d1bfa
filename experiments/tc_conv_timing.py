"""Quick GPU timing of the tensor-core conv fprop (BF16 NHWC + bias + relu) on the ResNet-50 layers
beside torch (cuDNN); not a benchmark (bench/ owns those).

``python experiments/tc_conv_timing.py [--n 32] [--iters 20] [--configs 0 1 ...] [--dtype bf16]``:
for each distinct ResNet-50 conv layer (conv1's C = 3 is left out: C % 8 != 0) every config is checked
against torch's FP32 conv of the same inputs (relative error printed) and timed with CUDA events
(median of ``--iters`` after 3 warm-ups); the best config's time is set beside ``torch.conv2d(x, w, b)``
in channels_last of the same dtype (cuDNN; its relu is not timed, ours is). TFLOP/s =
2 * N * P * Q * K * C * R * S / seconds / 1e12. Last line: the geometric mean of torch / ours.
"""
import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: ncudnn

from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.tc_gemm.launch import _compiled
from tc_timing import median_seconds
from ncudnn.kernels.tc_conv.fprop import CONV_CONFIGS, conv_args, conv_grid, make_tc_conv_fprop

#: (C, H, K, R, stride) of every distinct ResNet-50 (v1.5) conv after conv1; H = W, pad = R // 2
RESNET50 = (
    (64, 56, 64, 1, 1), (64, 56, 64, 3, 1), (64, 56, 256, 1, 1), (256, 56, 64, 1, 1),
    (256, 56, 128, 1, 1), (128, 56, 128, 3, 2), (128, 28, 512, 1, 1), (256, 56, 512, 1, 2),
    (512, 28, 128, 1, 1), (128, 28, 128, 3, 1),
    (512, 28, 256, 1, 1), (256, 28, 256, 3, 2), (256, 14, 1024, 1, 1), (512, 28, 1024, 1, 2),
    (1024, 14, 256, 1, 1), (256, 14, 256, 3, 1),
    (1024, 14, 512, 1, 1), (512, 14, 512, 3, 2), (512, 7, 2048, 1, 1), (1024, 14, 2048, 1, 2),
    (2048, 7, 512, 1, 1), (512, 7, 512, 3, 1),
)


def layer(N, C, H, K, R, stride, cfgs, iters=20, dtype="bf16"):
    """(best seconds, best config, its rel err, torch seconds) of one layer."""
    import torch
    import torch.nn.functional as F
    from numba import cuda

    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    name = {"bf16": "bfloat16", "fp16": "float16"}[dtype]
    pad = R // 2
    P = (H + 2 * pad - R) // stride + 1
    x = torch.randn(N, C, H, H, device="cuda").to(tdt).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(K, C, R, R, device="cuda") / math.sqrt(C * R * R)).to(tdt)
    w = w.contiguous(memory_format=torch.channels_last)
    b = torch.randn(K, device="cuda").to(tdt)
    y = torch.empty(N, K, P, P, device="cuda", dtype=tdt).contiguous(memory_format=torch.channels_last)
    ref = torch.relu(F.conv2d(x.float(), w.float(), b.float(), stride, pad))
    u16 = np.uint16 if dtype == "bf16" else np.float16

    def arr(t):   # the tensor's storage as a flat numba device array (no copy)
        return cuda.as_cuda_array(t.permute(0, 2, 3, 1).reshape(-1).view(torch.int16)).view(u16)

    best = None
    for cfg in cfgs:
        spec = ep.EpilogueSpec((ep.bias("col"), ep.relu()), name)
        kern = make_tc_conv_fprop(cfg, name, spec, name, name)
        bias = cuda.as_cuda_array(b.view(torch.int16)).view(u16)
        yd = arr(y)
        args = conv_args(kern, arr(x), arr(w), yd, bias, yd, N, C, H, H, K, P, P, R, R, (stride, stride),
                         (pad, pad), (1, 1), (H * H * C, H * C, C), R * R * C, K, 1)
        launch = _compiled(kern).prepare(conv_grid(kern, N, P, P, K), cfg.threads, args, kern.smem)
        y.fill_(float("nan"))
        launch.run(None, 0)
        torch.cuda.synchronize()
        err = float((y.float() - ref).norm() / ref.norm())
        t = median_seconds(lambda: launch.run(None, 0), iters)
        if err < 2e-2 and (best is None or t < best[0]):
            best = (t, cfg, err)
        print(f"    {cfg.name:28s} {t * 1e6:9.1f} us  rel_err {err:.1e}", flush=True)
    t_ref = median_seconds(lambda: F.conv2d(x, w, b, stride, pad), iters)
    return best, t_ref, 2.0 * N * P * P * K * C * R * R


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python experiments/tc_conv_timing.py")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--configs", nargs="*", type=int, default=None, help="indices into CONV_CONFIGS")
    ap.add_argument("--layers", nargs="*", type=int, default=None, help="indices into RESNET50")
    args = ap.parse_args(argv)
    cfgs = [CONV_CONFIGS[i] for i in args.configs] if args.configs is not None else list(CONV_CONFIGS)
    layers = [RESNET50[i] for i in args.layers] if args.layers is not None else list(RESNET50)
    ratios = []
    for C, H, K, R, st in layers:
        print(f"N={args.n} C={C} H=W={H} K={K} {R}x{R} stride {st}:", flush=True)
        best, t_ref, flop = layer(args.n, C, H, K, R, st, cfgs, args.iters, args.dtype)
        if best is None:
            print("    no config passed the check", flush=True)
            continue
        t, cfg, err = best
        ratios.append(t_ref / t)
        print(f"  best {cfg.name}: {t * 1e6:.1f} us ({flop / t / 1e12:.1f} TFLOP/s); torch {t_ref * 1e6:.1f} us "
              f"({flop / t_ref / 1e12:.1f} TFLOP/s); {t_ref / t:.2f}x torch", flush=True)
    if ratios:
        print(f"geomean speed vs torch (cuDNN) over {len(ratios)} layers: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}x", flush=True)


if __name__ == "__main__":
    main()
