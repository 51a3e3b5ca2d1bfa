"""The GEMM-family epilogue fuses any binary float pointwise mode with one broadcast operand (issue #24): a
per-channel / per-column vector, a one-element tensor (offset 0 whatever the channel) or a per-batch value,
under MUL (dequantization / folded BN scale), ADD, SUB in both operand orders, MAX, MIN, DIV. For conv fprop
(NHWC and NCHW) and matmul (FP32 and FP16) the default plan is a fused one (no composite), the fused plans
come first, and every plan build_plans(ALL) returns computes the float64 oracle's answer (poisoned output
with guard elements, fresh random inputs)."""
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.testing import TOL, assert_close
from ncudnn.types import cudnnPointwiseMode_t as PM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
from fe_oracle import graph_oracle, to_device_strided  # noqa: E402

DT = cudnn.data_type
NP = {DT.FLOAT: np.float32, DT.HALF: np.float16}
NAME = {DT.FLOAT: "float32", DT.HALF: "float16"}
CONV = dict(n=2, c=4, hw=4, k=8)
B_, M, N, K = 2, 5, 6, 4


def packed(dims):
    return [int(np.prod(dims[i + 1:])) for i in range(len(dims))]


def nhwc(dims):
    n, c, h, w = dims
    return [h * w * c, 1, w * c, c]


def new_graph(io):
    return cudnn.pygraph(io_data_type=io, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)


def conv_graph(layout, ops):
    g = new_graph(DT.FLOAT)
    c = CONV
    r = 1 if layout.endswith("1x1") else 3
    xd, wd = [c["n"], c["c"], c["hw"], c["hw"]], [c["k"], c["c"], r, r]
    st = nhwc if layout.startswith("nhwc") else packed
    x = g.tensor(name="X", dim=xd, stride=st(xd))
    w = g.tensor(name="W", dim=wd, stride=st(wd))
    y = g.conv_fprop(x, w, padding=[r // 2] * 2, stride=[1, 1], dilation=[1, 1], name="conv")
    return finish(g, y, ops, lambda kind: [1, c["k"] if kind == "vec" else 1, 1, 1])


def mm_graph(io, ops):
    g = new_graph(io)
    a = g.tensor(name="A", dim=[B_, M, K], stride=packed([B_, M, K]))
    b = g.tensor(name="B", dim=[B_, K, N], stride=packed([B_, K, N]))
    y = g.matmul(a, b, name="mm")
    return finish(g, y, ops, lambda kind: {"vec": [1, 1, N], "row": [1, M, 1], "scalar": [1, 1, 1],
                                           "batch": [B_, 1, 1]}[kind])


def finish(g, y, ops, dims_of):
    for i, (op, kind, swap) in enumerate(ops):
        if op == "relu":
            y = g.relu(y, name=f"relu{i}")
            continue
        d = dims_of(kind)
        v = g.tensor(name=f"v{i}", dim=d, stride=packed(d))
        y = getattr(g, op)(*((v, y) if swap else (y, v)), name=f"{op}{i}")
    y.set_output(True)
    return g, y


#: pattern name -> ops: (frontend method, operand kind, operand first)
PATTERNS = {
    "mul_vec": [("mul", "vec", False)],
    "mul_vec_swapped": [("mul", "vec", True)],
    "sub_vec": [("sub", "vec", False)],
    "sub_vec_swapped": [("sub", "vec", True)],
    "max_vec_relu": [("max", "vec", False), ("relu", None, None)],
    "min_vec": [("min", "vec", True)],
    "div_vec": [("div", "vec", False)],
    "add_scalar": [("add", "scalar", False)],
    "mul_scalar_relu": [("mul", "scalar", False), ("relu", None, None)],
    "sub_scalar_swapped": [("sub", "scalar", True)],
}
MM_ONLY = {"mul_batch": [("mul", "batch", False)], "sub_row_swapped": [("sub", "row", True)]}


def build(g, policy):
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(policy)
    return [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]


def run_and_check(g, Y, rng, indices, io):
    ins = [t for t in g.ir.tensors().values() if not t.is_virtual and t.uid != Y.get_uid()]
    dt = NP[io]
    for i in indices:
        # operands of DIV away from 0; every input rounded to the I/O type before the oracle sees it
        vals = {t.uid: rng.uniform(0.5, 1.5, t.dims).astype(dt) if t.name.startswith("v")
                else rng.uniform(-1, 1, t.dims).astype(dt) for t in ins}
        pack = {t.uid: to_device_strided(vals[t.uid], t.strides, dt) for t in ins}
        dims, strides = Y.get_dim(), Y.get_stride()
        span = 1 + sum((d - 1) * s for d, s in zip(dims, strides))
        out = cuda.to_device(np.full(span + 7, np.nan, dt))
        pack[Y.get_uid()] = out
        ws = g._built[i].workspace_size if i in g._built else 0
        g.execute_plan_at_index(pack, cuda.device_array(max(ws, 1), np.uint8), index=i)
        host = out.copy_to_host()
        assert np.isnan(host[span:]).all(), f"plan {i} wrote past the output"
        got = np.lib.stride_tricks.as_strided(host, dims, [s * host.itemsize for s in strides]).copy()
        want = graph_oracle(g, vals)[Y.get_uid()]
        assert_close(got.astype(np.float64), want, TOL[NAME[io]], name=f"plan {i} ({g.get_plan_name_at_index(i)})")


def check_fused(names):
    assert "composite" not in names[0], names
    comp = [i for i, n in enumerate(names) if "composite" in n]
    first = comp[0] if comp else len(names)
    assert first > 0 and all("composite" in n for n in names[first:]), names


CASES = [(f"conv_{lay}", p) for lay in ("nhwc", "nchw") for p in PATTERNS] + \
        [("conv_nhwc1x1", p) for p in ("mul_vec", "sub_vec_swapped", "mul_scalar_relu")] + \
        [(f"mm_{io}", p) for io in ("fp32", "fp16") for p in list(PATTERNS) + list(MM_ONLY)]


def make(where, pattern):
    return make_graph(where, {**PATTERNS, **MM_ONLY}[pattern])


def make_graph(where, ops):
    """(graph, output, I/O type) of ``ops`` after a conv ("conv_nhwc", "conv_nchw", "conv_nhwc1x1") or a
    matmul ("mm_fp32", "mm_fp16")."""
    if where.startswith("conv"):
        return conv_graph(where[5:], ops) + (DT.FLOAT,)
    io = DT.FLOAT if where == "mm_fp32" else DT.HALF
    return mm_graph(io, ops) + (io,)


@pytest.mark.parametrize("where,pattern", CASES)
def test_default_plan_fuses(where, pattern, rng):
    g, Y, io = make(where, pattern)
    names = build(g, cudnn.build_plan_policy.HEURISTICS_CHOICE)
    check_fused(names)
    run_and_check(g, Y, rng, [0], io)


@pytest.mark.parametrize("where,pattern", [c for c in CASES if c[1] in ("sub_vec_swapped", "mul_scalar_relu",
                                                                        "mul_batch", "div_vec")] + [("conv_nhwc1x1", "mul_scalar_relu")])
def test_every_plan_runs(where, pattern, rng):
    g, Y, io = make(where, pattern)
    names = build(g, cudnn.build_plan_policy.ALL)
    check_fused(names)
    run_and_check(g, Y, rng, sorted(g._built), io)


def test_add_bias_spec_unchanged():
    """A unit ADD without swap stays the ``bias(axis)`` step: the specs and kernel cache keys of what fused
    before are unchanged."""
    assert ep.vector("col", PM.CUDNN_POINTWISE_ADD) == ep.bias("col") == ("bias", "col")
    assert ep.vector("row", PM.CUDNN_POINTWISE_ADD, alpha2=2.0)[0] == "vector"
    assert ep.vector("col", PM.CUDNN_POINTWISE_SUB, swap=True)[4] is True


def test_vector_step_source():
    spec = ep.EpilogueSpec((ep.vector("scalar", PM.CUDNN_POINTWISE_SUB, swap=True, alpha2=0.5),))
    src = ep.source(spec)
    assert "bv = ld_bias(bias, 0)" in src and "(bv - (0.5" in src.replace("float32(0.5)", "0.5"), src
    with pytest.raises(ValueError):
        ep.vector("col", PM.CUDNN_POINTWISE_RELU_FWD)
    with pytest.raises(ValueError):
        ep.bias("diag")


def test_second_broadcast_operand_on_another_axis_is_refused():
    """Two broadcast operands on different axes (per column, then per row) do not pack into one operand
    (test_epilogue_packed.py: the ones that do); the composite plan still runs it."""
    g, Y = mm_graph(DT.FLOAT, [("mul", "vec", False), ("add", "row", False)])
    names = build(g, cudnn.build_plan_policy.HEURISTICS_CHOICE)
    assert all("composite" in n for n in names), names
