"""Engine "softmax_fused": the softmax / log-softmax forward and backward patterns recognized and run as
one kernel, against the float64 oracle. ir.partition emits "softmax" subgraphs for the ACCURATE and LOG
forward patterns (tested through the API); FAST and backward are exercised on the subgraph directly
(check_support -> build -> prepare -> run), and through the API whatever engines the partition picks."""
import pytest

from ncudnn import memory
from ncudnn import reference as R
from ncudnn.engines import api, registry
from ncudnn.ir import OpGraph, Pointwise, Reduction, TensorDesc
from ncudnn.ir.partition import Subgraph
from ncudnn.testing import assert_close
from ncudnn.types import (cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO,
                          cudnnStatus_t as S)

import membound_util as U

F32 = U.F32


def v(uid, name, dims=None):
    if dims is None:
        return TensorDesc(uid, is_virtual=True, name=name)
    from ncudnn.ir import packed_strides
    return TensorDesc(uid, dims, packed_strides(dims), F32, is_virtual=True, name=name)


def pw(name, mode, out, **ins):
    return Pointwise(name, ins, {"Y": out}, mode=mode)


def red(name, mode, x, out):
    return Reduction(name, {"X": x}, {"Y": out}, mode=mode)


def fwd_graph(dims, stats, strides=None, dtype=F32, algo="accurate"):
    x, y = U.t(1, dims, dtype, strides, "x"), U.t(2, dims, dtype, strides, "y")
    if algo == "fast":
        e, s = v(11, "e"), v(12, "s", stats)
        nodes = [pw("exp", PM.CUDNN_POINTWISE_EXP, e, X=x), red("sum", RO.CUDNN_REDUCE_TENSOR_ADD, e, s),
                 pw("div", PM.CUDNN_POINTWISE_DIV, y, X=e, B=s)]
        return OpGraph(nodes).finalize(), x, y
    m, d, e, s = v(10, "m", stats), v(11, "d"), v(12, "e"), v(13, "s", stats)
    nodes = [red("max", RO.CUDNN_REDUCE_TENSOR_MAX, x, m), pw("sub", PM.CUDNN_POINTWISE_SUB, d, X=x, B=m),
             pw("exp", PM.CUDNN_POINTWISE_EXP, e, X=d), red("sum", RO.CUDNN_REDUCE_TENSOR_ADD, e, s)]
    if algo == "log":
        ls = v(14, "ls")
        nodes += [pw("log", PM.CUDNN_POINTWISE_LOG, ls, X=s), pw("sub2", PM.CUDNN_POINTWISE_SUB, y, X=d, B=ls)]
    else:
        nodes.append(pw("div", PM.CUDNN_POINTWISE_DIV, y, X=e, B=s))
    return OpGraph(nodes).finalize(), x, y


def bwd_graph(dims, stats, log=False):
    y, dy, dx = U.t(1, dims, name="y"), U.t(2, dims, name="dy"), U.t(3, dims, name="dx")
    if log:
        s, ey, t = v(10, "s", stats), v(11, "ey"), v(12, "t")
        nodes = [red("sum", RO.CUDNN_REDUCE_TENSOR_ADD, dy, s), pw("exp", PM.CUDNN_POINTWISE_EXP, ey, X=y),
                 pw("mul", PM.CUDNN_POINTWISE_MUL, t, X=ey, B=s), pw("sub", PM.CUDNN_POINTWISE_SUB, dx, X=dy, B=t)]
    else:
        p, s, q = v(10, "p"), v(11, "s", stats), v(12, "q")
        nodes = [pw("mul", PM.CUDNN_POINTWISE_MUL, p, X=dy, B=y), red("sum", RO.CUDNN_REDUCE_TENSOR_ADD, p, s),
                 pw("sub", PM.CUDNN_POINTWISE_SUB, q, X=dy, B=s), pw("mul_y", PM.CUDNN_POINTWISE_MUL, dx, X=y, B=q)]
    return OpGraph(nodes).finalize(), y, dy, dx


def run_sub(g, arrays, block=None):
    """check_support -> build -> prepare -> run on the pattern as a "softmax" subgraph."""
    eng = registry.by_name("softmax_fused")
    sub = Subgraph(kind="softmax", nodes=list(g.nodes))
    ctx = api.context()
    st, why = eng.check_support(sub, ctx)
    assert st == S.CUDNN_STATUS_SUCCESS, why
    cfg = eng.default_config(sub)
    if block is not None:
        cfg = cfg.with_knob(eng.knobs(sub)[0].type, block)
    assert eng.workspace_size(sub, cfg) == 0
    plan = eng.build(sub, cfg, ctx)
    views = {t.uid: memory.as_view(arrays[t.uid], dims=t.dims, strides=t.strides, dtype=t.dtype)
             for t in arrays["_descs"]}
    plan.prepare(views, None)(0)


def _softmax_ref(x, axes, log=False):
    return R.log_softmax(x, axes) if log else R.softmax(x, axes)


@pytest.mark.parametrize("algo", ["accurate", "fast", "log"])
def test_forward_rows(rng, algo):
    dims, stats = (3, 40), (3, 1)
    g, x, y = fwd_graph(dims, stats, algo=algo)
    a = rng.uniform(-3, 3, dims)
    out = U.poisoned(y)
    run_sub(g, {1: U.upload(a, x), 2: out, "_descs": [x, y]})
    assert_close(U.download(out, y), _softmax_ref(a, (1,), algo == "log"), "float32")


def test_forward_channel_mode_nchw_column_kernel_and_half(rng):
    """CHANNEL mode of NCHW: softmax over C with H*W inner (column kernel); fp16 I/O."""
    dims, stats = (2, 5, 3, 2), (2, 1, 3, 2)
    g, x, y = fwd_graph(dims, stats, dtype=DT.CUDNN_DATA_HALF)
    a = rng.uniform(-2, 2, dims)
    out = U.poisoned(y)
    run_sub(g, {1: U.upload(a, x), 2: out, "_descs": [x, y]})
    assert_close(U.download(out, y), _softmax_ref(U.cast(a, x.dtype), (1,)), "float16")


def test_forward_long_rows_online_path(rng):
    dims, stats = (2, 1100), (2, 1)
    g, x, y = fwd_graph(dims, stats)
    a = rng.uniform(-5, 5, dims)
    out = U.poisoned(y)
    run_sub(g, {1: U.upload(a, x), 2: out, "_descs": [x, y]}, block=32)
    assert_close(U.download(out, y), _softmax_ref(a, (1,)), "float32")


@pytest.mark.parametrize("log", [False, True])
def test_backward(rng, log):
    dims, stats = (4, 24), (4, 1)
    g, y, dy, dx = bwd_graph(dims, stats, log)
    ya = _softmax_ref(rng.uniform(-2, 2, dims), (1,), log)
    da = rng.uniform(-1, 1, dims)
    out = U.poisoned(dx)
    run_sub(g, {1: U.upload(ya, y), 2: U.upload(da, dy), 3: out, "_descs": [y, dy, dx]})
    assert_close(U.download(out, dx), R.softmax_backward(ya, da, (1,), log=log), "float32")


def test_not_a_softmax_pattern_is_named():
    dims, stats = (3, 8), (3, 1)
    x, y = U.t(1, dims, name="x"), U.t(2, dims, name="y")
    m, d = v(10, "m", stats), v(11, "d")
    g = OpGraph([red("max", RO.CUDNN_REDUCE_TENSOR_MAX, x, m), pw("sub", PM.CUDNN_POINTWISE_SUB, d, X=x, B=m),
                 pw("relu", PM.CUDNN_POINTWISE_RELU_FWD, y, X=d)]).finalize()
    st, why = registry.by_name("softmax_fused").check_support(Subgraph(kind="softmax", nodes=list(g.nodes)),
                                                              api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN and "softmax" in why


@pytest.mark.parametrize("algo", ["accurate", "log"])
def test_forward_through_the_api(rng, algo):
    dims, stats = (3, 40), (3, 1)
    g, x, y = fwd_graph(dims, stats, algo=algo)
    assert api.problem(g).kind == "softmax"
    a = rng.uniform(-3, 3, dims)
    out = U.poisoned(y)
    plan = U.run(g, {1: U.upload(a, x), 2: out})
    assert plan.engine_names == ["softmax_fused"] and plan.workspace_size == 0
    assert_close(U.download(out, y), _softmax_ref(a, (1,), algo == "log"), "float32")


def test_fast_and_backward_through_the_api(rng):
    """Patterns the partitioner does not group yet still run (reduction + pointwise engines)."""
    dims, stats = (3, 16), (3, 1)
    g, x, y = fwd_graph(dims, stats, algo="fast")
    a = rng.uniform(-2, 2, dims)
    out = U.poisoned(y)
    U.run(g, {1: U.upload(a, x), 2: out})
    assert_close(U.download(out, y), _softmax_ref(a, (1,)), "float32")
    g, yt, dyt, dxt = bwd_graph(dims, stats)
    ya, da = _softmax_ref(a, (1,)), rng.uniform(-1, 1, dims)
    out = U.poisoned(dxt)
    U.run(g, {1: U.upload(ya, yt), 2: U.upload(da, dyt), 3: out})
    assert_close(U.download(out, dxt), R.softmax_backward(ya, da, (1,)), "float32")


@pytest.mark.parametrize("algo", ["accurate", "log"])
def test_forward_shared_memory_rows_through_the_engine(rng, algo):
    """Rows too long for registers at BLOCK_SIZE 64 stay in dynamic shared memory (the Step's shared
    bytes reach the launch)."""
    dims, stats = (2, 1100), (2, 1)
    g, x, y = fwd_graph(dims, stats, algo=algo)
    eng = registry.by_name("softmax_fused")
    step = eng._step(Subgraph(kind="softmax", nodes=list(g.nodes)),
                     eng.default_config(None).with_knob(eng.knobs(None)[0].type, 64))
    assert step.shared == 1100 * 4
    a = rng.uniform(-5, 5, dims)
    out = U.poisoned(y)
    run_sub(g, {1: U.upload(a, x), 2: out, "_descs": [x, y]}, block=64)
    assert_close(U.download(out, y), _softmax_ref(a, (1,), algo == "log"), "float32")
