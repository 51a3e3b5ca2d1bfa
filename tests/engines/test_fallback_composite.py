"""Every valid graph gets a plan: graphs whose one fused subgraph no engine runs (matmul + a bias of any
broadcast shape, conv-scale-bias-ReLU, conv 3x3 + a reduction of its virtual output, matmul row sums,
silu-and-mul) get the composite fallback plan (pieces that engines run, the crossing virtual tensors in the
workspace), listed after the fused plans where one fuses, and every plan computes the float64 oracle's
answer. A node that no engine implements is refused with a message naming it."""
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.engines import registry
from ncudnn.errors import CudnnError
from ncudnn.testing import assert_close, random

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
from fe_oracle import graph_oracle, to_device_strided  # noqa: E402

F = cudnn.data_type.FLOAT
# tiny shapes for the simulator tests (also on a GPU: every plan of build_plans(ALL) is compiled);
# test_fallback_real_shapes switches to GPU shapes
B_, M, N, K = 2, 5, 6, 3
CONV = dict(n=2, c=4, hw=5, k=3)
REAL = dict(B_=4, M=256, N=384, K=128, CONV=dict(n=8, c=64, hw=28, k=64))


def new_graph():
    return cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F)


def packed(dims):
    return [int(np.prod(dims[i + 1:])) for i in range(len(dims))]


def mm_inputs(g):
    A = g.tensor(name="A", dim=[B_, M, K], stride=packed([B_, M, K]))
    Bm = g.tensor(name="B", dim=[B_, K, N], stride=packed([B_, K, N]))
    return A, Bm


def mm_bias(bshape):
    g = new_graph()
    A, Bm = mm_inputs(g)
    bias = g.tensor(name="bias", dim=bshape, stride=packed(bshape))
    Y = g.add(g.matmul(A, Bm, name="mm"), bias, name="add")
    Y.set_output(True)
    return g, Y


def conv_x_w(g, r=3):
    c = CONV
    X = g.tensor(name="X", dim=[c["n"], c["c"], c["hw"], c["hw"]], stride=packed([c["n"], c["c"], c["hw"], c["hw"]]))
    W = g.tensor(name="W", dim=[c["k"], c["c"], r, r], stride=packed([c["k"], c["c"], r, r]))
    return g.conv_fprop(X, W, padding=[r // 2] * 2, stride=[1, 1], dilation=[1, 1], name="conv")


def conv_scale_bias_relu():
    g = new_graph()
    y = conv_x_w(g)
    k = CONV["k"]
    s = g.tensor(name="scale", dim=[1, k, 1, 1], stride=[k, 1, 1, 1])
    b = g.tensor(name="bias", dim=[1, k, 1, 1], stride=[k, 1, 1, 1])
    Y = g.relu(g.add(g.mul(y, s, name="mul"), b, name="add"), name="relu")
    Y.set_output(True)
    return g, Y


def conv_sum():
    g = new_graph()
    Y = g.reduction(conv_x_w(g), mode=cudnn.reduction_mode.ADD, name="sum")
    Y.set_dim([1, CONV["k"], 1, 1]).set_output(True)
    return g, Y


def mm_rowsum():
    g = new_graph()
    A, Bm = mm_inputs(g)
    Y = g.reduction(g.matmul(A, Bm, name="mm"), mode=cudnn.reduction_mode.ADD, name="rowsum")
    Y.set_dim([B_, M, 1]).set_output(True)
    return g, Y


def silu_and_mul(b_from_matmul):
    g = new_graph()
    A, Bm = mm_inputs(g)
    if b_from_matmul:
        Bg = g.tensor(name="Bg", dim=[B_, K, N], stride=packed([B_, K, N]))
        gate = g.matmul(A, Bg, name="mm_gate")
    else:
        gate = g.tensor(name="gate", dim=[B_, M, N], stride=packed([B_, M, N]))
    Y = g.mul(g.swish(g.matmul(A, Bm, name="mm"), name="silu"), gate, name="mul")
    Y.set_output(True)
    return g, Y


def bias_shape(kind):
    """The bias dims of a broadcast kind: 'b', 'm', 'n' name the dims it spans (others are 1)."""
    return [B_ if "b" in kind else 1, M if "m" in kind else 1, N if "n" in kind else 1]


BIAS_KINDS = ["scalar", "b", "m", "bm", "n", "bn", "mn", "bmn"]
CASES = {f"mm_bias_{k}": (lambda k=k: mm_bias(bias_shape(k))) for k in BIAS_KINDS}
CASES.update(conv_scale_bias_relu=conv_scale_bias_relu, conv3x3_sum=conv_sum, mm_rowsum=mm_rowsum,
             silu_and_mul=lambda: silu_and_mul(False), silu_and_mul_two_matmuls=lambda: silu_and_mul(True))


def run_and_check(g, Y, rng, indices):
    """Execute plan ``i`` for each index on fresh inputs and a poisoned output (with guard elements past
    its end) and compare with the float64 oracle."""
    ins = [t for t in g.ir.tensors().values() if not t.is_virtual and t.uid != Y.get_uid()]
    for i in indices:
        vals = {t.uid: random(rng, t.dims) for t in ins}
        pack = {t.uid: to_device_strided(vals[t.uid], t.strides, np.float32) for t in ins}
        dims, strides = Y.get_dim(), Y.get_stride()
        span = 1 + sum((d - 1) * s for d, s in zip(dims, strides))
        out = cuda.to_device(np.full(span + 7, np.nan, np.float32))
        pack[Y.get_uid()] = out
        plan = g._built[i] if i in g._built else None
        ws = plan.workspace_size if plan is not None else 0
        g.execute_plan_at_index(pack, cuda.device_array(max(ws, 1), np.uint8), index=i)
        host = out.copy_to_host()
        assert np.isnan(host[span:]).all(), f"plan {i} wrote past the output"
        got = np.lib.stride_tricks.as_strided(host, dims, [s * 4 for s in strides]).copy()
        want = graph_oracle(g, vals)[Y.get_uid()]
        assert_close(got, want, "float32", name=f"plan {i} ({g.get_plan_name_at_index(i)})")


def plans(g, modes):
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans(modes)
    assert g.get_execution_plan_count() >= 1
    return g


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("mode", ["FALLBACK", "A"])
def test_first_plan_of_mode_runs(case, mode, rng):
    g, Y = CASES[case]()
    plans(g, [getattr(cudnn.heur_mode, mode)])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    run_and_check(g, Y, rng, [0])


@pytest.mark.parametrize("case", list(CASES))
def test_every_plan_runs(case, rng):
    g, Y = CASES[case]()
    plans(g, [cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.build_plans(cudnn.build_plan_policy.ALL)
    names = [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]
    assert any("composite" in n for n in names), names
    run_and_check(g, Y, rng, sorted(g._built))


def test_fused_plan_comes_before_the_composite():
    g, _ = mm_bias(bias_shape("n"))
    plans(g, [cudnn.heur_mode.A])
    names = [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]
    comp = [i for i, n in enumerate(names) if "composite" in n]
    assert comp and comp[0] > 0 and all("composite" not in n for n in names[:comp[0]]), names


def test_fallback_workspace_holds_the_intermediate():
    g, _ = mm_bias(bias_shape("mn"))
    plans(g, [cudnn.heur_mode.FALLBACK])
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    assert "composite" in g.get_plan_name_at_index(0)
    assert g.get_workspace_size() >= B_ * M * N * 4


@pytest.fixture
def no_reduction_engine():
    registry._load()
    saved = registry._ENGINES
    registry._ENGINES = {k: e for k, e in saved.items() if "reduction" not in e.kinds}
    registry.generation += 1
    try:
        yield
    finally:
        registry._ENGINES = saved
        registry.generation += 1


def test_unimplemented_node_is_named(no_reduction_engine):
    g, _ = mm_rowsum()
    g.validate()
    g.build_operation_graph()
    with pytest.raises(CudnnError) as ei:
        g.create_execution_plans([cudnn.heur_mode.FALLBACK])
        g.check_support()
    msg = str(ei.value)
    assert "node 'rowsum' (op reduction" in msg and "no engine implements it" in msg, msg


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["mm_bias_scalar", "mm_bias_b", "mm_bias_bm", "mm_bias_bmn", "conv_scale_bias_relu",
                                  "conv3x3_sum", "mm_rowsum", "silu_and_mul"])
def test_fallback_real_shapes(case, rng, monkeypatch):
    for k, v in REAL.items():
        monkeypatch.setitem(globals(), k, v)
    g, Y = CASES[case]()
    plans(g, [cudnn.heur_mode.FALLBACK])
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    run_and_check(g, Y, rng, [0])


def test_fallback_config_round_trips_through_json(rng):
    """A fallback plan's config (its pieces' engines and knobs) rebuilt from JSON runs the same pieces."""
    from ncudnn.engines import api
    from ncudnn.types import cudnnBackendHeurMode_t as HM

    g, Y = conv_scale_bias_relu()
    g.validate()
    g.build_operation_graph()
    ecs = [ec for ec in api.get_heuristics(g.ir, HM.CUDNN_HEUR_MODE_FALLBACK) if ec.engine.name == "composite"]
    assert ecs and len(ecs[0].parts) >= 2
    again = api.engine_config_from_json(ecs[0].to_json(), g.ir)
    assert again.ident() == ecs[0].ident() and again.workspace_size == ecs[0].workspace_size
    plan = api.build_plan(g.ir, again)
    assert plan.engine_names == [p.engine.name for p in ecs[0].parts]
