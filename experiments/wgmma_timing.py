"""Quick GPU timing of the wgmma GEMM configs beside torch (cuBLAS); not a benchmark (bench/ owns those).

``python experiments/wgmma_timing.py [M N K ...] [--dtype bf16 fp16 tf32] [--layout mk_nk mk_kn ...]
[--iters 20] [--configs SPEC ...] [--fused] [--jobs N]``. SPEC: an index into CONFIGS or
``BLOCK_N,WGS,MI,STAGES[,GROUP_M[,EARLY[,L2PF]]]``. Every config is first checked against a float64 product of A's
first 256 rows (rel err printed), then timed with CUDA events: median of ``--iters`` launches after 3
warm-ups, inputs fixed (L2 not flushed; at 8192^3 the 16-bit operands are 256 MiB, far past the 50 MB
L2). Output in the input dtype (as cuBLAS). ``tf32``: FP32 A and B stored (m, k) / (n, k) (layout mk_nk
only), torch.matmul with ``allow_tf32`` on the same layouts. ``--fused``: bias + relu epilogue. A torch line
(``torch.matmul``, same dtype, same timing) closes each dtype and each config prints its ratio to it.
TFLOP/s = 2 * M * N * K / median seconds / 1e12. ``--jobs N`` compiles the kernels in N processes first
(numba's front end is single-threaded; the kernel cache then serves the timing process).
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: ncudnn

from ncudnn.kernels.pointwise import epilogue as ep
from tc_timing import median_seconds
from ncudnn.kernels.wgmma.config import CONFIGS, WgmmaConfig

#: dtype -> (kernel input dtype name, NumPy type, storage type of C / bias); tf32: FP32 storage, A / B passed
#: to the kernel as uint16 halves (K and strides doubled, launch.tf32_halves)
_DT = {"bf16": ("bfloat16", ml_dtypes.bfloat16, np.uint16), "fp16": ("float16", np.float16, np.float16),
       "tf32": ("float32", np.float32, np.float32)}


def parse_config(spec):
    """A WgmmaConfig from an index into CONFIGS or ``BLOCK_N,WGS,MI,STAGES[,GROUP_M[,EARLY[,L2PF]]]``."""
    if "," not in spec:
        return CONFIGS[int(spec)]
    return WgmmaConfig(*[int(x) for x in spec.split(",")])


def _operands(M, N, K, a_kmajor, b_kmajor, dtype, seed=0, check_rows=256):
    name, npdt, store = _DT[dtype]
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), np.float32).astype(npdt)
    B = rng.standard_normal((K, N), np.float32).astype(npdt)
    a = A if a_kmajor else np.ascontiguousarray(A.T)
    b = np.ascontiguousarray(B.T) if b_kmajor else B
    ref = A[:check_rows].astype(np.float64) @ B.astype(np.float64)
    if dtype == "tf32":
        return a.reshape(-1).view(np.uint16), b.reshape(-1).view(np.uint16), ref
    return a.view(store).reshape(-1), b.view(store).reshape(-1), ref


def _problem_args(M, N, K, a_kmajor, b_kmajor, dtype):
    """(K, A strides, B strides) as the kernel takes them (tf32: in uint16 halves)."""
    from ncudnn.kernels.wgmma.launch import tf32_halves
    sa = (0, 0) + ((K, 1) if a_kmajor else (1, M))
    sb = (0, 0) + ((1, K) if b_kmajor else (N, 1))
    return tf32_halves(K, sa, sb) if dtype == "tf32" else (K, sa, sb)


def _kernel(cfg, a_kmajor, b_kmajor, dtype, fused):
    from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
    name = _DT[dtype][0]
    steps = (ep.bias("col"), ep.relu()) if fused else ()
    return make_wgmma_gemm(cfg, a_kmajor, b_kmajor, name, ep.EpilogueSpec(steps, name), bias_dtype=name,
                           res_dtype=name)


def time_config(cfg, M, N, K, a_kmajor=True, b_kmajor=True, iters=20, dtype="bf16", fused=False, data=None):
    """(tflops, rel_err of the first rows) for one config on the current GPU."""
    from numba import cuda

    from ncudnn.kernels.wgmma.launch import compiled, fused_args, fused_grid
    name, npdt, store = _DT[dtype]
    a, b, ref = data or _operands(M, N, K, a_kmajor, b_kmajor, dtype)
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_c = cuda.device_array(M * N, store)
    d_bias = cuda.to_device(np.zeros(N, store))
    kern = _kernel(cfg, a_kmajor, b_kmajor, dtype, fused)
    Kk, sa, sb = _problem_args(M, N, K, a_kmajor, b_kmajor, dtype)
    args = fused_args(kern, d_a, d_b, d_c, d_bias, d_c, M, N, Kk, (1, 1), sa, sb, (0, 0, N, 1), (0, 1))
    launch = compiled(kern, args).prepare(fused_grid(kern, M, N, (1, 1)), kern.cfg.threads, args, kern.smem)

    def go():
        launch.run(None, 0)
    go()
    cuda.synchronize()
    got = d_c.copy_to_host().view(npdt).reshape(M, N)[:ref.shape[0]].astype(np.float64)
    if fused:
        ref = np.maximum(ref, 0)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    return 2.0 * M * N * K / median_seconds(go, iters) / 1e12, err


def time_torch(M, N, K, dtype="bf16", iters=20):
    """TFLOP/s of torch.matmul (cuBLAS) on (M, K) x (K, N), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(N, K, device="cuda", dtype=tdt).t() if dtype == "tf32" else torch.randn(K, N, device="cuda",
                                                                                            dtype=tdt)
    c = torch.empty(M, N, device="cuda", dtype=tdt)

    def go():
        torch.matmul(a, b, out=c)
    try:
        return 2.0 * M * N * K / median_seconds(go, iters) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def _precompile(specs, layouts, dtypes, fused, jobs):
    """Compile every (config, layout, dtype) kernel in ``jobs`` processes (numba front end: one core each)."""
    todo = [(s, lay, d) for s in specs for lay in layouts for d in dtypes if d != "tf32" or lay == "mk_nk"]
    procs = []
    for i in range(0, len(todo), max(1, -(-len(todo) // jobs))):
        chunk = todo[i:i + max(1, -(-len(todo) // jobs))]
        arg = ";".join(f"{s}|{lay}|{d}" for s, lay, d in chunk)
        procs.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--compile-only", arg] +
                                      (["--fused"] if fused else [])))
    for p in procs:
        p.wait()


def _compile_only(arg, fused):
    from ncudnn.kernels.wgmma.launch import compiled
    for item in arg.split(";"):
        spec, lay, dtype = item.split("|")
        kern = _kernel(parse_config(spec), lay.split("_")[0] == "mk", lay.split("_")[1] == "nk", dtype, fused)
        compiled(kern, _dummy_args(kern, dtype))


def _dummy_args(kern, dtype):
    from numba import cuda

    from ncudnn.kernels.wgmma.launch import fused_args
    x = cuda.device_array(8, _DT[dtype][2])
    ab = cuda.device_array(8, np.uint16) if dtype == "tf32" else x
    return fused_args(kern, ab, ab, x, x, x, 8, 8, 8, (1, 1), (0, 0, 8, 1), (0, 0, 1, 8), (0, 0, 8, 1), (0, 1))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python experiments/wgmma_timing.py")
    ap.add_argument("shape", nargs="*", type=int, default=[8192, 8192, 8192], help="M N K [M N K ...]")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--layout", nargs="+", default=["mk_nk"], choices=["mk_kn", "mk_nk", "km_kn", "km_nk"])
    ap.add_argument("--dtype", nargs="+", default=["bf16"], choices=sorted(_DT))
    ap.add_argument("--configs", nargs="*", default=None, help="indices into CONFIGS or BN,WGS,MI,STAGES[,GROUP_M[,EARLY[,L2PF]]]")
    ap.add_argument("--fused", action="store_true", help="time the bias+relu epilogue")
    ap.add_argument("--jobs", type=int, default=0, help="compile in this many processes first")
    ap.add_argument("--compile-only", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compile_only:
        _compile_only(args.compile_only, args.fused)
        return
    specs = args.configs if args.configs is not None else [str(i) for i in range(len(CONFIGS))]
    if args.jobs > 1:
        os.environ.setdefault("NCUDNN_CACHE_DIR", os.path.abspath(".kcache"))
        _precompile(specs, args.layout, args.dtype, args.fused, args.jobs)
    if len(args.shape) % 3:
        ap.error("shapes come as M N K triples")
    for i in range(0, len(args.shape), 3):
        _time_shape(args, specs, *args.shape[i:i + 3])


def _time_shape(args, specs, M, N, K):
    for dtype in args.dtype:
        ref = time_torch(M, N, K, dtype, args.iters)
        for layout in args.layout:
            ak, bk = layout.split("_")[0] == "mk", layout.split("_")[1] == "nk"
            if dtype == "tf32" and not (ak and bk):
                print(f"tf32 {layout}: skipped (tf32 wgmma needs K-major A and B: mk_nk)", flush=True)
                continue
            data = _operands(M, N, K, ak, bk, dtype)
            for spec in specs:
                cfg = parse_config(spec)
                try:
                    tf, err = time_config(cfg, M, N, K, ak, bk, args.iters, dtype, args.fused, data)
                except Exception as e:   # report and go on (a fault poisons the context: later lines fail too)
                    print(f"{dtype} {cfg.name:28s} {layout}: FAILED {type(e).__name__}: "
                          f"{' '.join(str(e).split())[:200]}", flush=True)
                    continue
                ratio = f"  {tf / ref:5.2f}x torch" if ref else ""
                print(f"{dtype} {cfg.name:28s} {layout}{' fused' if args.fused else ''} {M}x{N}x{K}: "
                      f"{tf:7.1f} TFLOP/s  rel_err {err:.2e}{ratio}", flush=True)
        if ref:
            print(f"{dtype} torch.matmul (cuBLAS)        {M}x{N}x{K}: {ref:7.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
