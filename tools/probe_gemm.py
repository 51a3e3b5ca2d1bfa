"""GPU probe: time ncudnn's FP32 SIMT GEMM configs on 4096^3 / 8192^3 beside torch (TF32 off).
Run on the GPU machine: python3 tools/probe_gemm.py  (numbers are medians of CUDA-event timings)."""
import sys
import time

import numpy as np
from numba import cuda

from ncudnn.kernels.gemm import CONFIGS, make_gemm, run_gemm
from ncudnn.kernels.gemm.config import GemmConfig


def time_fn(fn, reps=10):
    fn()
    cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = cuda.event(), cuda.event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cuda.event_elapsed_time(s, e))
    return float(np.median(ts))


def main():
    sizes = [int(x) for x in sys.argv[1:]] or [4096]
    extra = [
        GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4),
        GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=16, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4),
        GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4,
                   SWIZZLE=8),
    ]
    for n in sizes:
        rng = np.random.default_rng(0)
        a = cuda.to_device(rng.standard_normal(n * n).astype(np.float32))
        b = cuda.to_device(rng.standard_normal(n * n).astype(np.float32))
        c = cuda.device_array(n * n, np.float32)
        flops = 2.0 * n ** 3
        try:
            import torch
            torch.backends.cuda.matmul.allow_tf32 = False
            ta = torch.randn(n, n, device="cuda")
            tb = torch.randn(n, n, device="cuda")
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.matmul(ta, tb)
            ts = []
            for _ in range(10):
                st.record(); torch.matmul(ta, tb); en.record(); en.synchronize()
                ts.append(st.elapsed_time(en))
            ref = float(np.median(ts))
            print(f"n={n} cuBLAS SGEMM (TF32 off): {ref:.3f} ms  {flops / ref / 1e9:.1f} TFLOP/s", flush=True)
        except Exception as e:  # noqa: BLE001
            ref = None
            print("torch unavailable:", e)
        for cfg in list(CONFIGS) + extra:
            try:
                t0 = time.time()
                k = make_gemm(cfg)
                fn = lambda: run_gemm(k, a, b, c, M=n, N=n, K=n, a_strides=(n, 1), b_strides=(n, 1),
                                      c_strides=(n, 1))
                ms = time_fn(fn)
                out = c.copy_to_host().reshape(n, n)[:64, :64]
                ref_blk = (a.copy_to_host().reshape(n, n)[:64].astype(np.float64)
                           @ b.copy_to_host().reshape(n, n)[:, :64].astype(np.float64))
                err = np.linalg.norm(out - ref_blk) / np.linalg.norm(ref_blk)
                print(f"n={n} {cfg}: {ms:.3f} ms  {flops / ms / 1e9:.1f} TFLOP/s  "
                      f"ratio vs cuBLAS {ref / ms if ref else float('nan'):.2f}  err {err:.1e}  "
                      f"(build+first {time.time() - t0:.1f}s)", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"n={n} {cfg}: FAILED {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
