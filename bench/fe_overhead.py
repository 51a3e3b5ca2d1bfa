"""cudnn-frontend's plan build and execute host overhead, beside ncudnn's on the very same graph.

cuDNN does not build every small graph (on the H200 with cuDNN 9.19 its runtime-fusion pointwise
engines refused the packed-NCHW pointwise graph: NOT_SUPPORTED_LAYOUT; with a kernel cache, which
turns on dynamic shapes, they refused it again). So the script tries the graph variants of
:data:`VARIANTS` in order and measures the first that cuDNN builds, runs and gets right; every
attempt, and why it failed, is in the output:

1. ``pointwise_nhwc``: ``out = (x + b) * relu(y)``, FP32, dims (1, 4, 1, 8) channels-last, static shape
   (the graph bench_plan_overhead.py gives ncudnn);
2. ``pointwise_nhwc_c32``: the same with 32 channels (dims (1, 32, 4, 4)): wider vector alignment;
3. ``relu_nhwc_c32``: a single ReLU on (1, 32, 4, 4) channels-last;
4. ``conv_bias_relu_nhwc``: conv 3x3 (C = K = 32, 8x8, pad 1) + bias + ReLU, channels-last: ConvBiasAct,
   the fusion every cuDNN release builds.

For the variant that runs:

* plan build, cold: the first graph built in this process (cuDNN loaded, heuristics, engine finalize,
  runtime compilation of a fused kernel); warm: the same graph built again, and, where cuDNN builds it,
  with a kernel cache (``create_kernel_cache``) the previous build filled (an error there is recorded);
* execute host time: mean wall time per ``execute`` over 2000 calls, median of 7 rounds, torch tensors,
  beside one torch op (``torch.add(a, b, out=c)``) measured the same way;
* ncudnn on the same graph (``import ncudnn as cudnn``, the drop-in pygraph): build (first and again) and
  execute host time, measured the same way, so the two columns compare like with like.

Usage: ``python bench/fe_overhead.py [--print-only]`` (GPU + torch + nvidia-cudnn-frontend; otherwise it says what is
missing). It always exits 0 (a refusal is a result, not a failure of the benchmark run); the JSON
(printed last, and written to ``fe_overhead-<device>.json`` in ``$NCUDNN_BENCH_OUT``, else ``$OUT``, else the current
directory, unless ``--print-only``) has
``variant`` (None when no variant ran), ``attempts`` and ``ok``.
"""
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

DIMS = (1, 4, 1, 8)


def nhwc_strides(dims):
    n, c, h, w = dims
    return [h * w * c, 1, w * c, c]


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


# ------------------------------------------------------------------------------ graph variants
# Each: name, dims of the image tensor, and a builder ``declare(mod, g) -> (inputs {role: tensor},
# output tensor)`` plus ``expected(torch, t) -> tensor`` (float64) and the relative tolerance of the check.

def _pointwise(mod, g, dims):
    f = mod.data_type.FLOAT
    st = nhwc_strides(dims)
    c = dims[1]
    X = g.tensor(name="x", dim=list(dims), stride=st, data_type=f)
    B = g.tensor(name="b", dim=[1, c, 1, 1], stride=[c, 1, 1, 1], data_type=f)
    Y = g.tensor(name="y", dim=list(dims), stride=st, data_type=f)
    O = g.mul(a=g.add(a=X, b=B), b=g.relu(input=Y))
    O.set_output(True).set_dim(list(dims)).set_stride(st).set_data_type(f)
    return {"x": X, "b": B, "y": Y}, O


def _relu(mod, g, dims):
    f = mod.data_type.FLOAT
    st = nhwc_strides(dims)
    X = g.tensor(name="x", dim=list(dims), stride=st, data_type=f)
    O = g.relu(input=X)
    O.set_output(True).set_dim(list(dims)).set_stride(st).set_data_type(f)
    return {"x": X}, O


def _conv_bias_relu(mod, g, dims):
    f = mod.data_type.FLOAT
    n, c, h, w = dims
    k = c
    X = g.tensor(name="x", dim=list(dims), stride=nhwc_strides(dims), data_type=f)
    W = g.tensor(name="w", dim=[k, c, 3, 3], stride=nhwc_strides((k, c, 3, 3)), data_type=f)
    B = g.tensor(name="b", dim=[1, k, 1, 1], stride=[k, 1, 1, 1], data_type=f)
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1], compute_data_type=f)
    O = g.relu(input=g.bias(input=conv, bias=B))
    od = (n, k, h, w)
    O.set_output(True).set_dim(list(od)).set_stride(nhwc_strides(od)).set_data_type(f)
    return {"x": X, "w": W, "b": B}, O


def _shapes(name, dims):
    """role -> (dims, memory format 'cl' or 'vec') of the inputs, and the output dims."""
    c = dims[1]
    if name.startswith("pointwise"):
        return {"x": (dims, "cl"), "b": ((1, c, 1, 1), "vec"), "y": (dims, "cl")}, dims
    if name.startswith("relu"):
        return {"x": (dims, "cl")}, dims
    return {"x": (dims, "cl"), "w": ((c, c, 3, 3), "cl"), "b": ((1, c, 1, 1), "vec")}, dims


def _expected(name, torch, t):
    d = {r: v.double() for r, v in t.items()}
    if name.startswith("pointwise"):
        return (d["x"] + d["b"]) * torch.relu(d["y"])
    if name.startswith("relu"):
        return torch.relu(d["x"])
    return torch.relu(torch.nn.functional.conv2d(d["x"], d["w"], d["b"].reshape(-1), padding=1))


# (name, dims, declare, rel. tolerance: the conv may run on TF32 tensor cores)
VARIANTS = (
    ("pointwise_nhwc", DIMS, _pointwise, 1e-6),
    ("pointwise_nhwc_c32", (1, 32, 4, 4), _pointwise, 1e-6),
    ("relu_nhwc_c32", (1, 32, 4, 4), _relu, 1e-6),
    ("conv_bias_relu_nhwc", (1, 32, 8, 8), _conv_bias_relu, 5e-3),
)


def build_graph(mod, handle, variant, kernel_cache=None, fe=True):
    """(graph, inputs, output, build seconds) of ``variant`` in ``mod`` (cudnn-frontend or ncudnn)."""
    name, dims, declare, _ = variant
    t0 = time.perf_counter()
    kw = {"kernel_cache": kernel_cache} if kernel_cache is not None else {}
    f = mod.data_type.FLOAT
    g = mod.pygraph(handle=handle, io_data_type=f, intermediate_data_type=f, compute_data_type=f, **kw)
    ins, out = declare(mod, g, dims)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([mod.heur_mode.A, mod.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    return g, ins, out, time.perf_counter() - t0


def _tensors(torch, variant, seed=0):
    name, dims, _, _ = variant
    shapes, odims = _shapes(name, dims)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    t = {}
    for role, (d, fmt) in shapes.items():
        v = torch.rand(d, device="cuda", generator=gen) * 2 - 1
        t[role] = v.contiguous(memory_format=torch.channels_last) if fmt == "cl" else v
    o = torch.full(odims, float("nan"), device="cuda").contiguous(memory_format=torch.channels_last)
    return t, o


def _short(e):
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:240] if msg else ''}"


def try_variant(mod, handle, variant, torch):
    """Build, run once on NaN-poisoned output, check; returns a dict (``ok`` and the figures, or ``error``)."""
    name, _, _, tol = variant
    rec = {"variant": name}
    try:
        g, ins, out, cold = build_graph(mod, handle, variant)
        rec["build_first_ms"] = cold * 1e3
        rec["build_again_ms"] = build_graph(mod, handle, variant)[-1] * 1e3
        t, o = _tensors(torch, variant)
        pack = {ins[r]: v for r, v in t.items()}
        pack[out] = o
        ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
        g.execute(pack, ws, handle=handle)
        torch.cuda.synchronize()
        ref = _expected(name, torch, t)
        err = float((o.double() - ref).norm() / ref.norm())
        rec["rel_err"] = err
        if not err <= tol:   # NaN fails too
            rec["error"] = f"wrong result: rel err {err:.3e} > {tol:.0e}"
            return rec, None
        rec["execute_torch_us"] = host_us(lambda: g.execute(pack, ws, handle=handle), torch.cuda.synchronize)
        rec["ok"] = True
        return rec, (g, ins, out)
    except Exception as e:  # noqa: BLE001 - a refusal is a result: recorded, the next variant is tried
        rec["error"] = _short(e)
        rec["trace_tail"] = traceback.format_exc(limit=3)[-600:]
        return rec, None


def kernel_cache_build(cudnn, handle, variant):
    """Warm build with a kernel cache filled by a first build (ms), or the error."""
    if not hasattr(cudnn, "create_kernel_cache"):
        return None, "cudnn-frontend has no create_kernel_cache"
    try:
        cache = cudnn.create_kernel_cache()
        build_graph(cudnn, handle, variant, cache)
        return build_graph(cudnn, handle, variant, cache)[-1] * 1e3, None
    except Exception as e:  # noqa: BLE001 - dynamic shapes refused by some engines: recorded
        return None, _short(e)


def ncudnn_same_graph(torch, variant):
    """ncudnn (the drop-in pygraph) on the variant cuDNN ran: build first / again, execute host time."""
    try:
        import ncudnn

        h = ncudnn.create_handle()
        ncudnn.set_stream(h, torch.cuda.current_stream().cuda_stream)
        rec, _ = try_variant(ncudnn, h, variant, torch)
        return rec
    except Exception as e:  # noqa: BLE001
        return {"variant": variant[0], "error": _short(e)}


def measure():
    """The result dict (never raises for a refusal)."""
    missing = []
    try:
        import torch
    except ImportError:
        return {"ok": False, "skipped": "missing torch", "variant": None, "attempts": []}
    if not torch.cuda.is_available():
        missing.append("a GPU")
    try:
        t_import = time.perf_counter()
        import cudnn
        t_import = time.perf_counter() - t_import
    except Exception as e:  # noqa: BLE001
        missing.append(f"nvidia-cudnn-frontend ({_short(e)})")
    if missing:
        return {"ok": False, "skipped": f"missing {', '.join(missing)}", "variant": None, "attempts": []}
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "cudnn_frontend": getattr(cudnn, "__version__", None), "cudnn_backend": cudnn.backend_version(),
           "torch": torch.__version__, "import_s": t_import, "variant": None, "attempts": [], "ok": False}
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    for variant in VARIANTS:
        rec, _ = try_variant(cudnn, handle, variant, torch)
        res["attempts"].append(rec)
        print(f"cudnn-frontend {variant[0]:22s} " + ("ok" if rec.get("ok") else f"refused: {rec['error']}"),
              flush=True)
        if rec.get("ok"):
            res.update(variant=variant[0], dims=list(variant[1]), ok=True,
                       build_cold_ms=rec["build_first_ms"], build_warm_ms=rec["build_again_ms"],
                       execute_torch_us=rec["execute_torch_us"], max_err=rec["rel_err"])
            res["build_warm_kernel_cache_ms"], res["kernel_cache_error"] = kernel_cache_build(cudnn, handle, variant)
            res["ncudnn_same_graph"] = ncudnn_same_graph(torch, variant)
            break
    tc = torch.empty(32, device="cuda")
    ta, tb = torch.ones(32, device="cuda"), torch.ones(32, device="cuda")
    res["ref_torch_add_us"] = host_us(lambda: torch.add(ta, tb, out=tc), torch.cuda.synchronize)
    return res


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        res = measure()
    except Exception as e:  # noqa: BLE001 - never fail the bench run that called us
        res = {"ok": False, "variant": None, "attempts": [], "error": _short(e),
               "trace_tail": traceback.format_exc(limit=4)[-1000:]}
    if res.get("skipped"):
        print(f"SKIP fe_overhead: {res['skipped']}")
        return 0
    for k, v in res.items():
        if k in ("attempts", "ncudnn_same_graph"):
            continue
        print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    nc = res.get("ncudnn_same_graph") or {}
    if nc:
        print("ncudnn, same graph: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in nc.items() if k != "trace_tail"))
    text = json.dumps(res, indent=1, default=str)
    print("json: " + json.dumps({k: v for k, v in res.items()}, default=str))
    if "--print-only" in argv:
        return 0
    slug = "".join(ch if ch.isalnum() else "-" for ch in str(res.get("device", "unknown")).lower()).strip("-")
    out_dir = Path(os.environ.get("NCUDNN_BENCH_OUT") or os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"fe_overhead-{slug}.json").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
