"""Quick GPU timing of the tensor-core GEMM configs beside torch (cuBLAS); not a benchmark (bench/ owns
those).

``python experiments/tc_gemm_timing.py [M N K] [--dtype bf16 fp16 tf32 e4m3 e5m2] [--layout mk_kn]
[--iters 20] [--configs 0 1 ...] [--fused]`` (tf32: FP32 storage, always mk_nk, the config's BLOCK_K halved so the
shared footprint matches; plain kernel only; e4m3 / e5m2: FP8 storage, always mk_nk, BLOCK_K in FP8 elements, BF16
output, plain kernel only, torch line ``torch._scaled_mm`` with unit scales, e5m2 x e5m2 has none in
cuBLASLt) checks every config against a float64 product on a 256-row slice (rel
err printed), then times it with CUDA events: median of ``--iters`` launches after 3 warm-ups, inputs
fixed (L2 not flushed; at 8192^3 the 16-bit operands are 256 MiB, far past the 50 MB L2). Output in
the input dtype (as cuBLAS). ``--fused``: the engine's fused kernel (bias + relu epilogue) instead of
the plain one. A torch line (``torch.matmul`` on the same dtype, same timing) closes each dtype, and
each config prints its ratio to it. TFLOP/s = 2 * M * N * K / median seconds / 1e12.
"""
import argparse
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: ncudnn

from ncudnn.kernels.pointwise import epilogue as ep  # noqa: E402
from ncudnn.kernels.tc_gemm.config import CONFIGS  # noqa: E402
from ncudnn.kernels.tc_gemm.kernel import make_tc_gemm  # noqa: E402
from ncudnn.kernels.tc_gemm.launch import _compiled, fused_args, fused_grid, run_tc_gemm  # noqa: E402
from tc_timing import median_seconds  # noqa: E402

_DT = {"bf16": ("bfloat16", ml_dtypes.bfloat16, np.uint16), "fp16": ("float16", np.float16, np.float16),
       "tf32": ("float32", np.float32, np.float32),
       "e4m3": ("float8_e4m3fn", ml_dtypes.float8_e4m3fn, np.uint8),
       "e5m2": ("float8_e5m2", ml_dtypes.float8_e5m2, np.uint8)}
#: dtypes read as 16-bit halves: FP32 (TF32) and FP8 (k-contiguous A and B only)
_HALVES = ("tf32", "e4m3", "e5m2")


def _operands(M, N, K, a_kmajor, b_kmajor, dtype, seed=0, check_rows=256):
    """Host operands (logical A, B; stored a, b) and the float64 product of A's first rows."""
    name, npdt, store = _DT[dtype]
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), np.float32).astype(npdt)
    B = rng.standard_normal((K, N), np.float32).astype(npdt)
    a = A if a_kmajor else np.ascontiguousarray(A.T)
    b = np.ascontiguousarray(B.T) if b_kmajor else B
    ref = A[:check_rows].astype(np.float64) @ B.astype(np.float64)
    if dtype in _HALVES:    # the kernel reads FP32 / FP8 storage as 16-bit halves
        store = np.uint16
    return a.view(store).reshape(-1), b.view(store).reshape(-1), ref


def time_config(cfg, M, N, K, a_kmajor=True, b_kmajor=False, iters=20, check_rows=256, dtype="bf16",
                fused=False, data=None):
    """(tflops, rel_err of the first ``check_rows`` rows) for one config on the current GPU."""
    from numba import cuda

    name, npdt, store = _DT[dtype]
    a, b, ref = data or _operands(M, N, K, a_kmajor, b_kmajor, dtype, check_rows=check_rows)
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    fp8 = dtype in ("e4m3", "e5m2")
    if fp8:                 # FP8 in, BF16 out
        npdt, store = ml_dtypes.bfloat16, np.uint16
    d_c = cuda.device_array(M * N, store)
    sa = (K, 1) if a_kmajor else (1, M)
    sb = (1, K) if b_kmajor else (N, 1)
    fused = fused and dtype not in _HALVES
    if fused:
        spec = ep.EpilogueSpec((ep.bias("col"), ep.relu()), name)
        kern = make_tc_gemm(cfg, a_kmajor, b_kmajor, name, epi=spec, bias_dtype=name, res_dtype=name)
        d_bias = cuda.to_device(np.zeros(N, store))
        args = fused_args(kern, d_a, d_b, d_c, d_bias, d_c, M, N, K, (1, 1), (0, 0) + sa, (0, 0) + sb,
                          (0, 0, N, 1), (0, 1))
        launch = _compiled(kern).prepare(fused_grid(kern, M, N, (1, 1)), kern.cfg.threads, args, kern.smem)

        def go():
            launch.run(None, 0)
    elif dtype == "tf32":   # k-contiguous A and B; K and leading dims in halves; the same shared bytes
        if not (a_kmajor and b_kmajor):
            raise ValueError("tf32 needs --layout mk_nk")
        kern = make_tc_gemm(cfg.replace(BLOCK_K=cfg.BLOCK_K // 2), True, True, "float32", "float32")

        def go():
            run_tc_gemm(kern, d_a, d_b, d_c, M, N, 2 * K, (2 * K, 1), (1, 2 * K), (N, 1))
    elif fp8:               # K, leading dims in halves; BLOCK_K in FP8 elements (as engine matmul_tc)
        if not (a_kmajor and b_kmajor):
            raise ValueError("fp8 needs --layout mk_nk")
        kern = make_tc_gemm(cfg, True, True, name, "bfloat16")

        def go():
            run_tc_gemm(kern, d_a, d_b, d_c, M, N, K // 2, (K // 2, 1), (1, K // 2), (N, 1))
    else:
        kern = make_tc_gemm(cfg, a_kmajor, b_kmajor, name, name)

        def go():
            run_tc_gemm(kern, d_a, d_b, d_c, M, N, K, sa, sb, (N, 1))
    go()
    cuda.synchronize()
    got = d_c.copy_to_host().view(npdt).reshape(M, N)[:ref.shape[0]].astype(np.float64)
    if fused:
        ref = np.maximum(ref, 0)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    return 2.0 * M * N * K / median_seconds(go, iters) / 1e12, err


def time_torch(M, N, K, dtype="bf16", iters=20):
    """TFLOP/s of torch.matmul (cuBLAS) on (M, K) x (K, N) of ``dtype``, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    if dtype in ("e4m3", "e5m2"):
        return _time_torch_fp8(M, N, K, dtype, iters, torch)
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    c = torch.empty(M, N, device="cuda", dtype=tdt)

    def go():
        torch.matmul(a, b, out=c)
    return 2.0 * M * N * K / median_seconds(go, iters) / 1e12


def _time_torch_fp8(M, N, K, dtype, iters, torch):
    """TFLOP/s of ``torch._scaled_mm`` (cuBLASLt FP8, unit scales, BF16 out), or None where it refuses."""
    tdt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[dtype]
    a = torch.randn(M, K, device="cuda").to(tdt)
    b = torch.randn(N, K, device="cuda").to(tdt).t()        # (K, N) column-major, as _scaled_mm wants
    one = torch.ones((), device="cuda")

    def go():
        torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)
    try:
        go()
    except RuntimeError as e:
        print(f"{dtype} torch._scaled_mm: {str(e).splitlines()[0]}", flush=True)
        return None
    return 2.0 * M * N * K / median_seconds(go, iters) / 1e12


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python experiments/tc_gemm_timing.py")
    ap.add_argument("shape", nargs="*", type=int, default=[8192, 8192, 8192])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--layout", default="mk_kn", choices=["mk_kn", "mk_nk", "km_kn", "km_nk"])
    ap.add_argument("--dtype", nargs="+", default=["bf16", "fp16", "tf32"], choices=sorted(_DT))
    ap.add_argument("--configs", nargs="*", type=int, default=None, help="indices into CONFIGS")
    ap.add_argument("--fused", action="store_true", help="time the fused bias+relu kernel")
    args = ap.parse_args(argv)
    M, N, K = args.shape
    cfgs = [CONFIGS[i] for i in args.configs] if args.configs is not None else list(CONFIGS)
    for dtype in args.dtype:
        ref = time_torch(M, N, K, dtype, args.iters)
        layout = "mk_nk" if dtype in _HALVES else args.layout
        ak, bk = layout.split("_")[0] == "mk", layout.split("_")[1] == "nk"
        data = _operands(M, N, K, ak, bk, dtype)
        for cfg in cfgs:
            tf, err = time_config(cfg, M, N, K, ak, bk, args.iters, dtype=dtype, fused=args.fused, data=data)
            ratio = f"  {tf / ref:5.2f}x torch" if ref else ""
            print(f"{dtype} {cfg.name:28s} {layout}{' fused' if args.fused and dtype not in _HALVES else ''} {M}x{N}x{K}: "
                  f"{tf:7.1f} TFLOP/s  rel_err {err:.2e}{ratio}", flush=True)
        if ref:
            what = "torch._scaled_mm (cuBLASLt)" if dtype in ("e4m3", "e5m2") else "torch.matmul (cuBLAS)       "
            print(f"{dtype} {what} {M}x{N}x{K}: {ref:7.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
