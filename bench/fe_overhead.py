"""cudnn-frontend's plan build and execute host overhead, for the graph bench_plan_overhead.py gives ncudnn.

The graph: ``out = (x + b) * relu(y)`` on FP32 tensors of dims (1, 4, 1, 8), channels-last -- tiny, so the device
never holds the host back and wall time per call is host time. Run in a fresh process:

* plan build, cold: the first graph built in this process (cuDNN loaded, heuristics, engine finalize,
  runtime compilation of the fused kernel); warm: the same graph built again, and, where cuDNN builds it
  (a kernel cache turns on dynamic shapes, which its pointwise fusion engines refuse on cuDNN 9.19), with
  a kernel cache (``create_kernel_cache``) the previous build filled;
* execute host time: mean wall time per ``execute`` over 2000 calls, median of 7 rounds, torch tensors,
  beside one torch op (``torch.add(a, b, out=c)``) measured the same way.

Usage: ``python bench/fe_overhead.py`` (GPU + torch + nvidia-cudnn-frontend; otherwise it says what is
missing and exits 0). Results printed and written to ``bench/results/fe_overhead-<device>.json``.
"""
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIMS = (1, 4, 1, 8)
NHWC = (DIMS[1] * DIMS[2] * DIMS[3], 1, DIMS[3] * DIMS[1], DIMS[1])


def host_us(fn, sync, calls=2000, rounds=7):
    """Median over rounds of the mean host wall time per call, microseconds."""
    for _ in range(200):
        fn()
    sync()
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        per.append((t1 - t0) / calls * 1e6)
    return statistics.median(per)


def build_graph(cudnn, handle, kernel_cache=None):
    """(graph, X, B, Y, O, build seconds) for out = (x + b) * relu(y)."""
    t0 = time.perf_counter()
    kw = {"kernel_cache": kernel_cache} if kernel_cache is not None else {}
    f = cudnn.data_type.FLOAT
    g = cudnn.pygraph(handle=handle, io_data_type=f, intermediate_data_type=f, compute_data_type=f, **kw)
    st = list(NHWC)   # channels-last: cuDNN 9.19's runtime-fusion pointwise engines refused this graph packed NCHW
    X = g.tensor(name="x", dim=list(DIMS), stride=st, data_type=f)
    B = g.tensor(name="b", dim=[1, 4, 1, 1], stride=[4, 1, 1, 1], data_type=f)
    Y = g.tensor(name="y", dim=list(DIMS), stride=st, data_type=f)
    O = g.mul(a=g.add(a=X, b=B), b=g.relu(input=Y))
    O.set_output(True).set_dim(list(DIMS)).set_stride(st).set_data_type(f)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    return g, X, B, Y, O, time.perf_counter() - t0


def main():
    missing = []
    try:
        import torch
    except ImportError:
        torch = None
        missing.append("torch")
    if torch is not None and not torch.cuda.is_available():
        missing.append("a GPU")
    try:
        t_import = time.perf_counter()
        import cudnn
        t_import = time.perf_counter() - t_import
    except Exception as e:
        missing.append(f"nvidia-cudnn-frontend ({type(e).__name__}: {e})")
    if missing:
        print(f"SKIP fe_overhead: missing {', '.join(missing)}")
        return 0
    dev = torch.device("cuda")
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    g, X, B, Y, O, cold = build_graph(cudnn, handle)
    _, _, _, _, _, warm = build_graph(cudnn, handle)
    # a kernel cache turns on cuDNN's dynamic-shape mode, which its runtime-fusion pointwise engines
    # refuse (H200, cuDNN 9.19: "does not support dynamic shape"): measured only where it builds
    warm_cache, cache_error = None, None
    if hasattr(cudnn, "create_kernel_cache"):
        try:
            cache = cudnn.create_kernel_cache()
            build_graph(cudnn, handle, cache)
            warm_cache = build_graph(cudnn, handle, cache)[-1]
        except Exception as e:  # noqa: BLE001 - any refusal is a result, recorded as such
            cache_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    gen = torch.Generator(device=dev).manual_seed(0)
    cl = torch.channels_last
    x = (torch.rand(DIMS, device=dev, generator=gen) * 2 - 1).contiguous(memory_format=cl)
    b = torch.rand((1, 4, 1, 1), device=dev, generator=gen) * 2 - 1
    y = (torch.rand(DIMS, device=dev, generator=gen) * 2 - 1).contiguous(memory_format=cl)
    o = torch.full(DIMS, float("nan"), device=dev).contiguous(memory_format=cl)
    assert tuple(x.stride()) == NHWC and tuple(o.stride()) == NHWC
    ws = torch.empty(max(g.get_workspace_size(), 1), device=dev, dtype=torch.uint8)
    pack = {X: x, B: b, Y: y, O: o}
    g.execute(pack, ws, handle=handle)
    torch.cuda.synchronize()
    err = float(((x + b) * torch.relu(y) - o).abs().max().item())
    sync = torch.cuda.synchronize
    res = {
        "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cudnn_frontend": getattr(cudnn, "__version__", None), "cudnn_backend": cudnn.backend_version(),
        "torch": torch.__version__, "dims": list(DIMS), "import_s": t_import,
        "build_cold_ms": cold * 1e3, "build_warm_ms": warm * 1e3,
        "build_warm_kernel_cache_ms": warm_cache * 1e3 if warm_cache is not None else None,
        "kernel_cache_error": cache_error, "max_err": err,
        "execute_torch_us": host_us(lambda: g.execute(pack, ws, handle=handle), sync),
    }
    tc = torch.empty(32, device=dev)
    ta, tb = torch.ones(32, device=dev), torch.ones(32, device=dev)
    res["ref_torch_add_us"] = host_us(lambda: torch.add(ta, tb, out=tc), sync)
    for k, v in res.items():
        print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = "".join(ch if ch.isalnum() else "-" for ch in res["device"].lower()).strip("-")
    (out_dir / f"fe_overhead-{slug}.json").write_text(json.dumps(res, indent=1))
    return 0 if err < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
