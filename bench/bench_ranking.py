"""How long ``get_heuristics`` takes to rank a graph (heuristic mode A), per op family.

What it measures, for each case (pointwise, matmul 4096^3, conv+bias+relu on ResNet-50 layers, layer
norm, softmax):

* ``cold_us``: ranking a graph of a NEW shape (a shape no earlier call saw, so no memo can answer),
  after one first-ever call of the family has warmed module-level state (imports, knob tables). The op
  graph is built and partitioned outside the timed region (that is graph finalization, not ranking).
  Median over ``--reps`` new shapes.
* ``repeat_us``: ranking a freshly built graph of a shape ranked before (same problem signature,
  another graph object): the bounded memo by signature answers. Median over ``--reps`` graphs.
* ``cold_cpu_us``: the same cold rankings in process CPU time (``time.process_time``): on a loaded
  host the wall clock counts time the process waited for a core, the CPU time does not.
* ``calls``: Python function calls per cold ranking (cProfile's count, 3 more new shapes).
* ``configs``: how many (engine, config) pairs the ranking returned; ``best``: the first one.

Ranking needs no GPU: it runs the same in the CUDA simulator (the nominal H200 properties) and on the
GPU machine (the queried device). Host-side wall time, ``time.perf_counter``.

Usage: ``python bench/bench_ranking.py [--reps 15] [--out ranking.json] [--profile CASE]``.
Target: cold < 0.4 ms for conv and matmul, < 0.2 ms for pointwise / norm / softmax; repeat < 0.1 ms.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ncudnn  # noqa: E402,F401  (first: decides GPU or simulator)
from ncudnn.ir import (ConvFprop, Matmul, NormFwd, OpGraph, Pointwise, Reduction, TensorDesc,  # noqa: E402
                       packed_strides)
from ncudnn.types import (cudnnBackendHeurMode_t as HM, cudnnBackendNormFwdPhase_t as PH,  # noqa: E402
                          cudnnBackendNormMode_t as NM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM,
                          cudnnReduceTensorOp_t as RO)

F32 = DT.CUDNN_DATA_FLOAT

#: ResNet-50 conv layers (N, C, H, W, K, R, stride, pad) at batch 32
RESNET = [(32, 64, 56, 56, 64, 3, 1, 1), (32, 128, 28, 28, 128, 3, 1, 1), (32, 256, 14, 14, 256, 3, 1, 1),
          (32, 512, 7, 7, 512, 3, 1, 1), (32, 64, 56, 56, 256, 1, 1, 0), (32, 256, 56, 56, 128, 3, 2, 1),
          (32, 3, 224, 224, 64, 7, 2, 3)]


def _t(uid, dims, name="", dtype=F32, nhwc=False):
    if nhwc and len(dims) == 4:
        n, c, h, w = dims
        strides = (h * w * c, 1, w * c, c)
    else:
        strides = packed_strides(dims)
    return TensorDesc(uid, tuple(dims), strides, dtype, name=name or f"t{uid}")


def _v(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def pointwise(i):
    dims = (8, 64, 56, 56 + i)
    x, b, y, o = _t(1, dims), _t(2, (1, 64, 1, 1)), _t(3, dims), _t(4, dims)
    v1, v2 = _v(10), _v(11)
    return OpGraph([Pointwise("add", {"X": x, "B": b}, {"Y": v1}, mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("relu", {"X": y}, {"Y": v2}, mode=PM.CUDNN_POINTWISE_RELU_FWD),
                    Pointwise("mul", {"X": v1, "B": v2}, {"Y": o}, mode=PM.CUDNN_POINTWISE_MUL)],
                   name="pointwise")


def matmul(i):
    m, n, k = 4096 + 8 * i, 4096, 4096
    a, b, c = _t(1, (1, m, k)), _t(2, (1, k, n)), _t(3, (1, m, n))
    return OpGraph([Matmul("mm", {"A": a, "B": b}, {"C": c})], name="matmul")


def conv_bias_relu(i, layer=0):
    n, c, h, w, k, r, s, pad = RESNET[layer % len(RESNET)]
    n += i  # a new batch size: a new problem of the same layer
    p = (h + 2 * pad - r) // s + 1
    x, wt = _t(1, (n, c, h, w), nhwc=True), _t(2, (k, c, r, r), nhwc=True)
    b, y = _t(3, (1, k, 1, 1), nhwc=True), _t(4, (n, k, p, p), nhwc=True)
    v1, v2 = _v(10), _v(11)
    conv = ConvFprop("conv", {"X": x, "W": wt}, {"Y": v1}, spatial_dims=2, stride=(s, s),
                     pre_padding=(pad, pad), post_padding=(pad, pad), dilation=(1, 1))
    return OpGraph([conv, Pointwise("bias", {"X": v1, "B": b}, {"Y": v2}, mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("relu", {"X": v2}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)],
                   name=f"conv_bias_relu_{layer}")


def norm(i):
    rows, hidden = 4096 + i, 1024
    x, sc, bi, y = _t(1, (rows, hidden, 1, 1)), _t(2, (1, hidden, 1, 1)), _t(3, (1, hidden, 1, 1)), \
        _t(4, (rows, hidden, 1, 1))
    eps = TensorDesc(5, (1, 1, 1, 1), (1, 1, 1, 1), F32, is_by_value=True, value=1e-5, name="eps")
    return OpGraph([NormFwd("ln", {"X": x, "SCALE": sc, "BIAS": bi, "EPSILON": eps}, {"Y": y},
                            mode=NM.CUDNN_LAYER_NORM, phase=PH.CUDNN_NORM_FWD_INFERENCE)], name="layernorm")


def softmax(i):
    rows, cols = 4096 + i, 1024
    x, y = _t(1, (rows, cols, 1, 1)), _t(2, (rows, cols, 1, 1))
    m = TensorDesc(3, (rows, 1, 1, 1), packed_strides((rows, 1, 1, 1)), F32, is_virtual=True)
    z = TensorDesc(6, (rows, 1, 1, 1), packed_strides((rows, 1, 1, 1)), F32, is_virtual=True)
    s, e = _v(4), _v(5)
    return OpGraph([Reduction("max", {"X": x}, {"Y": m}, mode=RO.CUDNN_REDUCE_TENSOR_MAX),
                    Pointwise("sub", {"X": x, "B": m}, {"Y": s}, mode=PM.CUDNN_POINTWISE_SUB),
                    Pointwise("exp", {"X": s}, {"Y": e}, mode=PM.CUDNN_POINTWISE_EXP),
                    Reduction("sum", {"X": e}, {"Y": z}, mode=RO.CUDNN_REDUCE_TENSOR_ADD),
                    Pointwise("div", {"X": e, "B": z}, {"Y": y}, mode=PM.CUDNN_POINTWISE_DIV)],
                   io_dtype=F32, intermediate_dtype=F32, compute_dtype=F32, name="softmax")


def cases():
    out = {"pointwise": pointwise, "matmul_4096": matmul, "norm": norm, "softmax": softmax}
    for layer, (n, c, h, w, k, r, s, pad) in enumerate(RESNET):
        out[f"conv_bias_relu_c{c}k{k}r{r}s{s}_{h}"] = (lambda i, layer=layer: conv_bias_relu(i, layer))
    return out


def _ready(make, i):
    from ncudnn.engines import api

    g = make(i).finalize()
    api.problem(g)  # partitioning belongs to graph finalization, not to ranking
    return g


def measure(name, make, reps, shift):
    """(cold_us, repeat_us, configs, best): medians over ``reps`` new shapes / repeated graphs."""
    from ncudnn.engines import api

    api.get_heuristics(_ready(make, 0), HM.CUDNN_HEUR_MODE_A)  # first-ever call of the family
    cold, cold_cpu, configs, best = [], [], 0, ""
    for j in range(reps):
        g = _ready(make, shift + j + 1)
        c0, t0 = time.process_time(), time.perf_counter()
        ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
        cold.append(time.perf_counter() - t0)
        cold_cpu.append(time.process_time() - c0)
        configs, best = len(ecs), (str(ecs[0]) if ecs else "-")
    rep = []
    for j in range(reps):
        g = _ready(make, shift + j + 1)  # the same signature as a cold one above, a new graph object
        t0 = time.perf_counter()
        api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
        rep.append(time.perf_counter() - t0)
    med = lambda xs: statistics.median(xs) * 1e6  # noqa: E731
    return med(cold), med(cold_cpu), med(rep), configs, best, calls(make, shift + 10 * reps)


def calls(make, start, n=3):
    """Python function calls per cold ranking (cProfile's count over ``n`` new shapes): a figure a
    loaded host does not disturb."""
    import cProfile
    import pstats

    from ncudnn.engines import api

    graphs = [_ready(make, start + j) for j in range(n)]
    pr = cProfile.Profile()
    pr.enable()
    for g in graphs:
        api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    pr.disable()
    return round(pstats.Stats(pr).total_calls / n)


def profile(make, reps, shift):
    import cProfile
    import pstats

    from ncudnn.engines import api

    api.get_heuristics(_ready(make, 0), HM.CUDNN_HEUR_MODE_A)
    graphs = [_ready(make, shift + j + 1) for j in range(reps)]
    pr = cProfile.Profile()
    pr.enable()
    for g in graphs:
        api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(35)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--only", default=None, help="substring of the case names to run")
    ap.add_argument("--profile", default=None, help="cProfile the cold rankings of this case")
    args = ap.parse_args(argv)
    from ncudnn.engines import device

    allc = cases()
    shift = 0  # rankings are memoized per process only: every process starts cold
    if args.profile:
        profile(allc[args.profile], args.reps, shift)
        return 0
    dev = device.current()
    rows = []
    print(f"get_heuristics mode A on {dev.name}{'' if dev.nominal else ' (queried)'}, "
          f"median of {args.reps}")
    print(f"{'case':40s} {'cold us':>9s} {'cold cpu':>9s} {'repeat us':>10s} {'calls':>6s} {'configs':>8s}  best")
    for name, make in allc.items():
        if args.only and args.only not in name:
            continue
        cold, cpu, rep, n, best, ncalls = measure(name, make, args.reps, shift)
        rows.append({"case": name, "cold_us": round(cold, 1), "cold_cpu_us": round(cpu, 1), "repeat_us": round(rep, 1),
                     "calls": ncalls, "configs": n, "best": best})
        print(f"{name:40s} {cold:9.1f} {cpu:9.1f} {rep:10.1f} {ncalls:6d} {n:8d}  {best}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": dev.name, "nominal": dev.nominal, "reps": args.reps,
                                              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                              "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
