"""Plan build and execute host overhead of the engine layer, on a GPU (skips cleanly without one).

What it measures, for a one-kernel plan (``out = (x + b) * relu(y)``, fused by ``pointwise_fused``):

* plan build, cold vs warm: a fresh process with an EMPTY kernel cache (heuristics + code generation +
  numba JIT) against a fresh process with the cache the first one wrote (cubin loaded from disk, no
  JIT), and a plan-cache hit in a live process. ``import ncudnn`` is reported apart.
* execute host time: wall time per ``execute`` call over many calls (launches are asynchronous; the
  tensors are tiny, so the device never holds the host back), median of several rounds, for a variant
  pack of torch tensors, numba device arrays and raw pointers.
* reference lines measured in the same run: a plain numba launch with torch tensors and with numba
  arrays, and one torch op (``torch.add(a, b, out=c)``).
* CUDA graph capture: the plan captured into a torch CUDA graph, replayed, and checked.

Usage: ``python bench/bench_plan_overhead.py`` (results printed and written to
``plan_overhead-<device>.json`` in ``$NCUDNN_BENCH_OUT``, else ``$OUT``, else the current directory). Target on the H200: <= 15 us host
time per execute of a one-kernel plan.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIMS = (1, 4, 1, 8)  # 32 elements: a launch the device finishes faster than the host issues it


def _graph():
    from ncudnn.ir import OpGraph, Pointwise, TensorDesc, packed_strides
    from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM

    f = DT.CUDNN_DATA_FLOAT
    bd = (1, DIMS[1], 1, 1)
    x, b = TensorDesc(1, DIMS, packed_strides(DIMS), f, name="x"), TensorDesc(2, bd, packed_strides(bd), f, name="b")
    y, o = TensorDesc(3, DIMS, packed_strides(DIMS), f, name="y"), TensorDesc(4, DIMS, packed_strides(DIMS), f, name="out")
    v1, v2 = TensorDesc(10, is_virtual=True), TensorDesc(11, is_virtual=True)
    return OpGraph([Pointwise("add", {"X": x, "B": b}, {"Y": v1}, mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("relu", {"X": y}, {"Y": v2}, mode=PM.CUDNN_POINTWISE_RELU_FWD),
                    Pointwise("mul", {"X": v1, "B": v2}, {"Y": o}, mode=PM.CUDNN_POINTWISE_MUL)],
                   name="bias_relu_mul").finalize()


def _host_arrays():
    import numpy as np

    rng = np.random.default_rng(0)
    return {1: rng.uniform(-1, 1, DIMS).astype(np.float32),
            2: rng.uniform(-1, 1, (1, DIMS[1], 1, 1)).astype(np.float32),
            3: rng.uniform(-1, 1, DIMS).astype(np.float32)}


def _expected(h):
    import numpy as np

    return (h[1].astype(np.float64) + h[2]) * np.maximum(h[3], 0)


# ---------------------------------------------------------------------------------- child: build

def child_build():
    """One fresh process: import, heuristics, build, first execute; prints one JSON line."""
    t0 = time.perf_counter()
    import ncudnn  # noqa: F401  (first: it decides GPU or simulator before numba loads)
    import numpy as np
    from numba import cuda

    from ncudnn.engines import api
    from ncudnn.kernels.runtime import kcache
    from ncudnn.types import cudnnBackendHeurMode_t as HM

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    cuda.current_context()  # CUDA context creation: paid by any first GPU call, not part of a build
    t_ctx = time.perf_counter() - t0
    t0 = time.perf_counter()
    from ncudnn.engines import registry

    registry.engines()  # imports the engine modules (and the kernel modules they use)
    t_engines = time.perf_counter() - t0
    g = _graph()
    t1 = time.perf_counter()
    ec = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0]
    t2 = time.perf_counter()
    plan = api.build_plan(g, ec)
    t3 = time.perf_counter()
    h = _host_arrays()
    pack = {u: cuda.to_device(a) for u, a in h.items()}
    pack[4] = cuda.to_device(np.full(DIMS, np.nan, np.float32))
    cuda.synchronize()
    t4 = time.perf_counter()
    api.execute(plan, pack, None)
    cuda.synchronize()
    t5 = time.perf_counter()
    err = float(np.max(np.abs(pack[4].copy_to_host() - _expected(h))))
    print(json.dumps({"import_s": t_import, "cuda_context_s": t_ctx, "engines_import_s": t_engines,
                      "heuristics_s": t2 - t1, "build_plan_s": t3 - t2,
                      "first_execute_s": t5 - t4, "config": str(ec), "kcache": kcache.stats(), "max_err": err}))


def build_times(cache_dir):
    env = dict(os.environ, NCUDNN_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, __file__, "--child-build"], env=env, capture_output=True, text=True,
                         timeout=900)
    if out.returncode:
        raise RuntimeError(f"child failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------- host timing

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


_AXPY = """
def axpy(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = np.float32(2.0) * x[i] + y[i]
"""


def _axpy_kernel():
    """The reference kernel of the plain-numba-launch lines (module globals: cuda, np)."""
    import numpy as np
    from numba import cuda

    ns = {"cuda": cuda, "np": np}
    exec(_AXPY, ns)
    return cuda.jit(ns["axpy"])


def execute_overhead():
    import numpy as np
    from numba import cuda

    from ncudnn import memory
    from ncudnn.engines import api
    from ncudnn.types import cudnnBackendHeurMode_t as HM

    g = _graph()
    ec = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0]
    api.build_plan(g, ec)
    t0 = time.perf_counter()
    plan = api.build_plan(_graph(), ec)  # the same graph built again: a plan-cache hit
    hit_us = (time.perf_counter() - t0) * 1e6
    h = _host_arrays()
    res = {"plan_cache_hit_us": hit_us, "config": str(ec)}

    nb = {u: cuda.to_device(a) for u, a in h.items()}
    nb[4] = cuda.device_array(DIMS, np.float32)
    res["execute_numba_arrays_us"] = host_us(lambda: api.execute(plan, nb, None), cuda.synchronize)
    raw = {u: memory.device_pointer(a) for u, a in nb.items()}
    res["execute_raw_pointers_us"] = host_us(lambda: api.execute(plan, raw, None), cuda.synchronize)
    res["plan_execute_raw_pointers_us"] = host_us(lambda: plan.execute(raw, None, 0), cuda.synchronize)
    res["max_err_numba"] = float(np.max(np.abs(nb[4].copy_to_host() - _expected(h))))

    axpy = _axpy_kernel()
    xa, ya = cuda.to_device(np.ones(32, np.float32)), cuda.to_device(np.ones(32, np.float32))
    res["ref_numba_launch_numba_arrays_us"] = host_us(lambda: axpy[1, 32](xa, ya), cuda.synchronize)
    try:
        import torch
    except ImportError:
        res["torch"] = "not installed"
        return res, plan, nb
    dev = torch.device("cuda")
    tt = {u: torch.from_numpy(a).to(dev) for u, a in h.items()}
    tt[4] = torch.full(DIMS, float("nan"), device=dev)
    tsync = torch.cuda.synchronize
    res["execute_torch_us"] = host_us(lambda: api.execute(plan, tt, None), tsync)
    res["plan_execute_torch_us"] = host_us(lambda: plan.execute(tt, None, 0), tsync)
    res["max_err_torch"] = float(np.max(np.abs(tt[4].cpu().numpy() - _expected(h))))
    tx, ty = torch.ones(32, device=dev), torch.ones(32, device=dev)
    res["ref_numba_launch_torch_us"] = host_us(lambda: axpy[1, 32](tx, ty), tsync)
    tc = torch.empty(32, device=dev)
    res["ref_torch_add_us"] = host_us(lambda: torch.add(tx, ty, out=tc), tsync)
    res["cuda_graph_capture"] = _graph_capture(plan, tt, h)
    return res, plan, nb


def _graph_capture(plan, tt, h):
    """Capture one execute into a torch CUDA graph on a side stream, replay, check the output."""
    import numpy as np
    import torch

    try:
        s = torch.cuda.Stream()
        tt[4].fill_(float("nan"))
        plan.execute(tt, None, s.cuda_stream)  # bind outside the capture
        torch.cuda.synchronize()
        tt[4].fill_(float("nan"))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            plan.execute(tt, None, s.cuda_stream)
        torch.cuda.synchronize()
        tt[4].fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        err = float(np.max(np.abs(tt[4].cpu().numpy() - _expected(h))))
        return {"ok": bool(err < 1e-5), "max_err": err}
    except Exception as e:  # report, do not hide: the figure is part of the result
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


# ---------------------------------------------------------------------------------- main

def main():
    import ncudnn  # noqa: F401  (selects GPU or simulator)
    from ncudnn.platform import simulator_enabled

    if simulator_enabled():
        print("SKIP bench_plan_overhead: no GPU (CUDA simulator); host-overhead figures need a real device")
        return 0
    from ncudnn.engines import device

    dev = device.current()
    with tempfile.TemporaryDirectory(prefix="ncudnn-bench-cache-") as d:
        cold = build_times(d)
        warm = build_times(d)
    overhead, _, _ = execute_overhead()
    result = {"device": dev.name, "cc": list(dev.cc), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "python": sys.version.split()[0], "dims": list(DIMS),
              "cold_process": cold, "warm_process": warm, "in_process": overhead,
              "target_execute_host_us": 15.0}
    print(f"device: {dev.name}")
    print(f"plan build  cold (empty kernel cache): {cold['build_plan_s'] * 1e3:9.2f} ms   "
          f"(heuristics {cold['heuristics_s'] * 1e3:.3f} ms; apart: import {cold['import_s']:.2f} s, "
          f"CUDA context {cold['cuda_context_s']:.2f} s, engine modules {cold['engines_import_s']:.2f} s)")
    print(f"plan build  warm (cubin from disk):    {warm['build_plan_s'] * 1e3:9.2f} ms   "
          f"(kcache {warm['kcache']})")
    print(f"plan build  plan-cache hit:            {overhead['plan_cache_hit_us']:9.2f} us")
    for k, v in overhead.items():
        if k.endswith("_us") and k != "plan_cache_hit_us":
            print(f"{k:40s} {v:9.2f} us")
    print(f"cuda graph capture: {overhead.get('cuda_graph_capture')}")
    out_dir = Path(os.environ.get("NCUDNN_BENCH_OUT") or os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"plan_overhead-{dev.slug}.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    if "--child-build" in sys.argv:
        child_build()
    else:
        sys.exit(main())
