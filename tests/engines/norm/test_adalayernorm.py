"""pygraph ``adalayernorm`` / ``adalayernorm_backward`` (CUDNN_ADA_LAYER_NORM, adaptive layer norm: SCALE / BIAS
[B, 1, C] per batch entry on X [B, S, C]) as cudnn-frontend users write them: every plan ``build_plans(ALL)``
returns and the heuristics' first run on fresh random inputs with poisoned outputs, against the float64 oracle;
the oracle itself against finite differences; bad shapes refused with the documented status naming the tensor."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.reference import norm_graph as RG
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendNormMode_t as NM, cudnnDataType_t as DT

import membound_util as U

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
FE_DT = {F32: cudnn.data_type.FLOAT, F16: cudnn.data_type.HALF, BF16: cudnn.data_type.BFLOAT16}
TRAIN, INFER = cudnn.norm_forward_phase.TRAINING, cudnn.norm_forward_phase.INFERENCE


def graph(dtype):
    return cudnn.pygraph(io_data_type=FE_DT[dtype], intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def packed(dims):
    st, acc = [], 1
    for d in reversed(dims):
        st.append(acc)
        acc *= d
    return st[::-1]


def t(g, name, dims, dtype=None):
    kw = {} if dtype is None else dict(data_type=FE_DT[dtype])
    return g.tensor(name=name, dim=list(dims), stride=packed(dims), **kw)


def param_dims(xd):
    """[B, 1, C] for X [B, S, C]; rank 4 [B, S, H, W] -> [B, 1, H, W]."""
    return (xd[0], 1) + tuple(xd[2:])


def stat_dims(xd):
    return tuple(xd[:2]) + (1,) * (len(xd) - 2)


def forward(dtype, xd, phase, bias=True, pd=None):
    g = graph(dtype)
    pd = param_dims(xd) if pd is None else pd
    kw = dict(input=t(g, "X", xd), scale=t(g, "scale", pd, F32), epsilon=1e-5, norm_forward_phase=phase,
              name="ada")
    if bias:
        kw["bias"] = t(g, "bias", pd, F32)
    y, mean, inv = g.adalayernorm(**kw)
    y.set_output(True)
    if phase == TRAIN:
        for s in (mean, inv):
            s.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    else:
        assert mean is None and inv is None
    return g, (y, mean, inv)


def backward(dtype, xd, dbias=True):
    g = graph(dtype)
    pd, sd = param_dims(xd), stat_dims(xd)
    dx, ds, db = g.adalayernorm_backward(grad=t(g, "DY", xd), input=t(g, "X", xd), scale=t(g, "scale", pd, F32),
                                         mean=t(g, "mean", sd, F32), inv_variance=t(g, "inv", sd, F32),
                                         name="ada_bwd")
    dx.set_output(True)
    ds.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    if dbias:
        db.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    return g, (dx, ds, db)


def build(g, policy):
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(policy)
    return g.get_execution_plan_count()


def run_plan(g, index, tol, seed, positive=()):
    """Plan ``index`` on fresh random inputs (``positive`` ports drawn in [0.5, 2]) with poisoned outputs; every
    written output against the float64 oracle of the IR node, fed the inputs rounded to their dtypes."""
    vals, pack, outs = U.random_pack(g.ir, np.random.default_rng(seed), positive, span=1.5)
    ws = g._built[index].workspace_size if index in g._built else 0
    g.execute_plan_at_index(pack, cuda.to_device(np.full(max(ws, 1), 0xA5, np.uint8)), index=index)
    descs = U.oracle(g.ir, vals)
    assert outs
    for uid, buf in outs.items():
        d = descs[uid]
        assert_close(U.download(buf, d), vals[uid], tol if d.dtype != F32 else "float32",
                     name=f"plan {index} ({g.get_plan_name_at_index(index)}): {d.name}")


def run_every_plan(g, tol, positive=()):
    count = build(g, cudnn.build_plan_policy.ALL)
    assert count >= 1
    for i in range(count):
        run_plan(g, i, tol, seed=100 + i, positive=positive)
    return count


# B, S, C: C not a multiple of a 16-byte vector (7, 33, 5), a rank-4 X normalized over two dims, B = 1
SHAPES = [(2, 3, 8), (3, 5, 7), (1, 4, 33), (2, 3, 4, 5)]


@pytest.mark.parametrize("xd", SHAPES)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_forward_training(dtype, xd):
    g, _ = forward(dtype, xd, TRAIN)
    run_every_plan(g, U.TOLNAME[dtype])


@pytest.mark.parametrize("dtype,xd,bias", [(F32, (2, 3, 8), False), (F16, (3, 5, 7), True),
                                           (BF16, (2, 3, 4, 5), False)])
def test_forward_inference(dtype, xd, bias):
    g, _ = forward(dtype, xd, INFER, bias=bias)
    run_every_plan(g, U.TOLNAME[dtype])


@pytest.mark.parametrize("xd", SHAPES)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_backward(dtype, xd):
    g, _ = backward(dtype, xd)
    run_every_plan(g, U.TOLNAME[dtype], positive=("INV_VARIANCE",))


def test_backward_without_dbias():
    g, _ = backward(F32, (3, 2, 9), dbias=False)
    run_every_plan(g, "float32", positive=("INV_VARIANCE",))


def test_forward_block_per_row():
    """Rows longer than a warp's (1100 elements): a block per row."""
    g, _ = forward(F32, (2, 2, 1100), TRAIN)
    run_every_plan(g, "float32")


def test_heuristic_default_plan():
    """The heuristics' first plan (HEURISTICS_CHOICE) runs it; the scale really is per batch entry (a
    layer norm with batch entry 0's scale for every entry differs)."""
    for g, bwd in ((forward(F16, (3, 5, 7), TRAIN)[0], False), (backward(F32, (3, 5, 7))[0], True)):
        assert build(g, cudnn.build_plan_policy.HEURISTICS_CHOICE) >= 1
        assert g._candidates[0].config.engine == "norm_rows"
        run_plan(g, 0, U.TOLNAME[F16] if not bwd else "float32", seed=7, positive=("INV_VARIANCE",) if bwd else ())


def test_statistics_shapes():
    g, (y, mean, inv) = forward(F32, (4, 6, 10), TRAIN)
    g.validate()
    assert y.get_dim() == [4, 6, 10] and mean.get_dim() == [4, 6, 1] and inv.get_dim() == [4, 6, 1]
    g, (dx, ds, db) = backward(F32, (4, 6, 10))
    g.validate()
    assert dx.get_dim() == [4, 6, 10] and ds.get_dim() == [4, 1, 10] and db.get_dim() == [4, 1, 10]
    assert ds.get_name() == "ada_bwd::DSCALE" and mean.get_name() == "ada::MEAN"


def test_oracle_is_per_batch_entry(rng):
    """The oracle normalizes each (b, s) row over C and applies entry b's scale / bias; its backward matches
    finite differences of its forward (dscale / dbias summed over S per entry)."""
    x = rng.uniform(-2, 2, (2, 3, 4))
    sc, bi = rng.uniform(0.5, 2, (2, 1, 4)), rng.uniform(-1, 1, (2, 1, 4))
    out = RG.norm_forward(NM.CUDNN_ADA_LAYER_NORM, x, 1e-3, sc, bi)
    m, v = x.mean(-1, keepdims=True), 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    assert_close(out["Y"], (x - m) * v * sc + bi, 1e-12)
    assert out["MEAN"].shape == (2, 3, 1)
    w = rng.uniform(-1, 1, x.shape)
    bwd = RG.norm_backward(NM.CUDNN_ADA_LAYER_NORM, x, w, sc, out["MEAN"], out["INV_VARIANCE"])
    assert bwd["DSCALE"].shape == bwd["DBIAS"].shape == (2, 1, 4)

    def loss(xx=x, ss=sc, bb=bi):
        return np.sum(w * RG.norm_forward(NM.CUDNN_ADA_LAYER_NORM, xx, 1e-3, ss, bb)["Y"])

    def num(f, a, h=1e-6):
        gr = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            a0 = a[i]
            a[i] = a0 + h
            up = f(a)
            a[i] = a0 - h
            gr[i] = (up - f(a)) / (2 * h)
            a[i] = a0
        return gr

    assert_close(bwd["DX"], num(lambda a: loss(xx=a), x.copy()), 1e-6)
    assert_close(bwd["DSCALE"], num(lambda a: loss(ss=a), sc.copy()), 1e-6)
    assert_close(bwd["DBIAS"], num(lambda a: loss(bb=a), bi.copy()), 1e-6)


# ------------------------------------------------------------------------------------------ bad inputs
def _fails(g, status, name):
    with pytest.raises(cudnn.CudnnError) as e:
        g.validate()
    assert e.value.status == status, e.value
    assert name in str(e.value), e.value



@pytest.mark.parametrize("pd,bd,port", [
    ((2, 2, 8), None, "SCALE"),        # S is 3: a scale dim neither 1 nor X's
    ((3, 1, 8), None, "SCALE"),        # batch 2: dim 0 neither 1 nor B
    ((2, 8), None, "SCALE"),           # rank 2 against rank 3
    ((2, 1, 8), (1, 1, 8), "BIAS"),    # bias not shaped like scale
])
def test_forward_bad_shapes(pd, bd, port):
    from ncudnn.types import cudnnStatus_t as ST

    g = graph(F32)
    kw = dict(input=t(g, "X", (2, 3, 8)), scale=t(g, "scale", pd, F32), epsilon=1e-5, name="ada")
    if bd is not None:
        kw["bias"] = t(g, "bias", bd, F32)
    y, m, v = g.adalayernorm(**kw)
    for o in (y, m, v):
        o.set_output(True)
    _fails(g, ST.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, port)


@pytest.mark.parametrize("what", ["mean", "dy", "scale"])
def test_backward_bad_shapes(what):
    from ncudnn.types import cudnnStatus_t as ST

    g = graph(F32)
    xd = (2, 3, 8)
    dx, ds, db = g.adalayernorm_backward(
        grad=t(g, "DY", (2, 3, 7) if what == "dy" else xd), input=t(g, "X", xd),
        scale=t(g, "scale", (2, 3, 2) if what == "scale" else (2, 1, 8), F32),
        mean=t(g, "mean", (2, 1, 1) if what == "mean" else (2, 3, 1), F32), inv_variance=t(g, "inv", (2, 3, 1), F32),
        name="ada_bwd")
    for o in (dx, ds, db):
        o.set_output(True)
    _fails(g, ST.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, {"mean": "MEAN", "dy": "DY", "scale": "SCALE"}[what])


def test_scale_is_required():
    """cudnn-frontend's binding requires scale (bias is optional): a missing one is a TypeError at the call."""
    g = graph(F32)
    with pytest.raises(TypeError, match="scale"):
        g.adalayernorm(input=t(g, "X", (2, 3, 8)), epsilon=1e-5)


def test_integer_input_refused():
    g = graph(F32)
    x = g.tensor(name="X", dim=[2, 3, 8], stride=[24, 8, 1], data_type=cudnn.data_type.INT32)
    y, m, v = g.adalayernorm(input=x, scale=t(g, "scale", (2, 1, 8), F32), epsilon=1e-5, name="ada")
    for o in (y, m, v):
        o.set_output(True)
    with pytest.raises(cudnn.CudnnError) as e:
        g.validate()
    assert "X" in str(e.value)


def test_adaptive_kernels_compile_for_sm90():
    """The adaptive variants of the strided kernels (several row axes, per-entry parameter rows, per-entry
    dscale / dbias) compile for sm_90 within their register budgets, without local memory (no spills)."""
    from ncudnn.kernels.norm import cases  # noqa: F401  (registers the norm family's cases)
    from ncudnn.kernels.runtime import compile_check

    names = [n for n in compile_check.registered_cases() if n.startswith("row_strided_ada_")]
    assert len(names) == 8, names
    results = compile_check.run_compile_check(names, timeout=1200, jobs=2)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed and len(results) == len(names), "\n".join(failed)
