"""Quick GPU timing of the tensor-core GEMM configs (not a benchmark: bench/ owns those).

``python -m ncudnn.kernels.tc_gemm.timing [M N K] [--iters N] [--layout mk_kn|mk_nk|km_kn|km_nk]``
checks every config in CONFIGS against a float64 product on a 256-row slice, then times each with
CUDA events: median of ``--iters`` launches after 3 warm-ups, inputs fixed (L2 not flushed; at
8192^3 the operands are 256 MiB, far past L2). TFLOP/s = 2 * M * N * K / median seconds / 1e12.
"""
import argparse
import statistics

import ml_dtypes
import numpy as np

from .config import CONFIGS
from .kernel import make_tc_gemm
from .launch import run_tc_gemm


def time_config(cfg, M, N, K, a_kmajor=True, b_kmajor=False, iters=20, check_rows=256, seed=0):
    """(tflops, rel_err of the first ``check_rows`` rows) for one config on the current GPU."""
    from numba import cuda

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), np.float32).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((K, N), np.float32).astype(ml_dtypes.bfloat16)
    a = A if a_kmajor else np.ascontiguousarray(A.T)
    b = np.ascontiguousarray(B.T) if b_kmajor else B
    d_a = cuda.to_device(a.view(np.uint16).reshape(-1))
    d_b = cuda.to_device(b.view(np.uint16).reshape(-1))
    d_c = cuda.device_array(M * N, np.float32)
    kern = make_tc_gemm(cfg, a_kmajor, b_kmajor, "bfloat16", "float32")
    sa = (K, 1) if a_kmajor else (1, M)
    sb = (1, K) if b_kmajor else (N, 1)

    def go():
        run_tc_gemm(kern, d_a, d_b, d_c, M, N, K, sa, sb, (N, 1))

    go()
    cuda.synchronize()
    rows = min(check_rows, M)
    got = d_c.copy_to_host().reshape(M, N)[:rows].astype(np.float64)
    ref = A[:rows].astype(np.float64) @ B.astype(np.float64)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    for _ in range(3):
        go()
    times = []
    for _ in range(iters):
        e0, e1 = cuda.event(), cuda.event()
        e0.record()
        go()
        e1.record()
        e1.synchronize()
        times.append(cuda.event_elapsed_time(e0, e1) / 1e3)
    return 2.0 * M * N * K / statistics.median(times) / 1e12, err


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ncudnn.kernels.tc_gemm.timing")
    ap.add_argument("shape", nargs="*", type=int, default=[8192, 8192, 8192])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--layout", default="mk_kn", choices=["mk_kn", "mk_nk", "km_kn", "km_nk"])
    args = ap.parse_args(argv)
    M, N, K = args.shape
    ak, bk = args.layout.split("_")[0] == "mk", args.layout.split("_")[1] == "nk"
    for cfg in CONFIGS:
        tf, err = time_config(cfg, M, N, K, ak, bk, args.iters)
        print(f"{cfg.name:28s} {args.layout} {M}x{N}x{K}: {tf:7.1f} TFLOP/s  rel_err {err:.2e}",
              flush=True)


if __name__ == "__main__":
    main()
