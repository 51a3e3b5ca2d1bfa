"""GPU probe: ncudnn FP32 SIMT GEMM configs beside torch.matmul (cuBLAS SGEMM, TF32 off).

Run on the GPU machine::

    python3 experiments/probe_gemm.py 4096 8192       # the square shapes named
    python3 experiments/probe_gemm.py --shapes 1024x1024x1024,8192x8192x256,16384x64x4096
    python3 experiments/probe_gemm.py                 # every shape in SHAPES (JIT ~5-10 s per kernel: slower)

What it measures: C = A @ B, row-major fp32 (A "mk", B "kn"), alpha 1, beta 0. Every config is first
checked against a float64 product of sampled rows / columns (first and last 32 of each: edge tiles
included); then timed: median of REPS CUDA-event timings of one launch sequence (the split-K reduce
included), inputs resident in L2 where they fit (no flush: compute-bound sizes). TFLOP/s = 2*M*N*K /
time. "ratio" = cuBLAS time / ours. The last lines give the best config per shape. Configs are skipped
once ``--budget`` seconds have passed (their line says so).
"""
import argparse
import sys
import time

import numpy as np

from ncudnn.kernels.gemm import make_gemm, run_gemm
from ncudnn.kernels.gemm.config import GemmConfig

REPS = 10


def G(bm, bn, bk, tm=8, tn=8, wm=32, wn=64, **kw):
    kw.setdefault("VEC", 4)
    return GemmConfig(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, THREAD_M=tm, THREAD_N=tn, WARP_M=wm, WARP_N=wn,
                      UNROLL_K=2, **kw)


F = dict(MAINLOOP="fast")
#: (label, config), most important first (JIT of a fast kernel: several seconds each)
BIG = [
    ("fast 128x128x8 sw8 r128 (default)", G(128, 128, 8, SWIZZLE=8, MAX_REGS=128, **F)),
    ("fast 128x128x8 sw8 (130 regs)", G(128, 128, 8, SWIZZLE=8, **F)),
    ("generic 128x128x16 (old default)", G(128, 128, 16)),
    ("fast 128x128x16 sw8", G(128, 128, 16, SWIZZLE=8, **F)),
]
#: extra candidates for few-tile shapes (small M*N): smaller tiles and split-K
SMALL = [
    ("fast 64x64x8 t4x8", G(64, 64, 8, 4, 8, 16, 64, **F)),
    ("fast 128x64x8 (128 threads)", G(128, 64, 8, **F)),
    ("fast 128x128x8 sw8 r128 split2", G(128, 128, 8, SPLIT_K=2, SWIZZLE=8, MAX_REGS=128, **F)),
    ("fast 128x128x8 sw8 r128 split4", G(128, 128, 8, SPLIT_K=4, SWIZZLE=8, MAX_REGS=128, **F)),
]
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 1024), (8192, 8192, 256),
          (16384, 64, 4096)]


def candidates(M, N, K):
    out = list(BIG)
    if M * N <= 1024 * 1024 or min(M, N) < 128:
        out += SMALL
    if M * N * K >= 8192 ** 3:          # the biggest shape: the two main candidates only (time)
        out = out[:3]
    return out


def time_ms(fn, sync, event):
    fn()
    sync()
    ts = []
    for _ in range(REPS):
        s, e = event(), event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", type=int, help="square sizes n (n^3 problems)")
    ap.add_argument("--shapes", default="", help="comma-separated MxNxK list")
    ap.add_argument("--budget", type=float, default=100.0, help="seconds after which configs are skipped")
    args = ap.parse_args()
    shapes = [(n, n, n) for n in args.sizes] + [tuple(int(v) for v in s.split("x"))
                                                for s in args.shapes.split(",") if s]
    shapes = shapes or SHAPES

    import torch
    from numba import cuda
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  TF32 off; median of {REPS}", flush=True)
    t_start = time.time()
    best = {}
    for M, N, K in shapes:
        gen = torch.Generator(device="cuda").manual_seed(0)
        ta = torch.rand(M, K, device="cuda", generator=gen) * 2 - 1
        tb = torch.rand(K, N, device="cuda", generator=gen) * 2 - 1
        tc = torch.empty(M, N, device="cuda")
        flops = 2.0 * M * N * K
        ref_ms = time_ms(lambda: torch.matmul(ta, tb, out=tc), torch.cuda.synchronize, event)
        print(f"{M}x{N}x{K}  cuBLAS SGEMM: {ref_ms:.3f} ms  {flops / ref_ms / 1e9:.1f} TFLOP/s", flush=True)
        rows = np.r_[0:min(32, M), max(M - 32, 0):M]
        cols = np.r_[0:min(32, N), max(N - 32, 0):N]
        want = ta[rows].double().cpu().numpy() @ tb[:, cols].double().cpu().numpy()
        a, b = cuda.as_cuda_array(ta.view(-1)), cuda.as_cuda_array(tb.view(-1))
        c = cuda.as_cuda_array(tc.view(-1))
        for label, cfg in candidates(M, N, K):
            if time.time() - t_start > args.budget:
                print(f"{M}x{N}x{K}  {label:34s} SKIPPED (time budget)", flush=True)
                continue
            try:
                t0 = time.time()
                kern = make_gemm(cfg)
                ws_elems = kern.workspace_size(M, N) // 4
                ws = cuda.device_array(ws_elems, np.float32) if ws_elems else None
                fn = lambda: run_gemm(kern, a, b, c, M=M, N=N, K=K, a_strides=(K, 1),  # noqa: E731
                                      b_strides=(N, 1), c_strides=(N, 1), workspace=ws)
                tc.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                got = tc[rows][:, cols].double().cpu().numpy()
                err = float(np.abs(got - want).max() / np.abs(want).max())
                first = time.time() - t0
                ms = time_ms(fn, torch.cuda.synchronize, event)
                tf = flops / ms / 1e9
                bad = "" if err < 1e-5 else "  WRONG RESULT"
                print(f"{M}x{N}x{K}  {label:34s} {ms:8.3f} ms {tf:6.1f} TFLOP/s  ratio {ref_ms / ms:5.2f}  "
                      f"err {err:.1e}  (jit+first {first:.1f}s){bad}", flush=True)
                if not bad and ((M, N, K) not in best or ms < best[(M, N, K)][1]):
                    best[(M, N, K)] = (label, ms, ref_ms / ms, tf)
            except Exception as e:  # noqa: BLE001
                print(f"{M}x{N}x{K}  {label:34s} FAILED {type(e).__name__}: {e}", flush=True)
    print("# best per shape:")
    for (M, N, K), (label, ms, ratio, tf) in best.items():
        print(f"BEST {M}x{N}x{K}: {label}  {tf:.1f} TFLOP/s  ratio {ratio:.2f}")
    print(f"# total {time.time() - t_start:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
