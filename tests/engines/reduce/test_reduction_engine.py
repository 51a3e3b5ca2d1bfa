"""Engines "reduction" and "genstats" through the engine API against the float64 oracle."""
import numpy as np
import pytest

from ncudnn import reference as R
from ncudnn.engines import api, registry
from ncudnn.ir import GenStats, OpGraph, Reduction
from ncudnn.testing import assert_close
from ncudnn.types import cudnnDataType_t as DT, cudnnReduceTensorOp_t as RO, cudnnStatus_t as S

import membound_util as U


def reduction_graph(mode, xd, yd, dtype=U.F32, xs=None, ydt=U.F32):
    x, y = U.t(1, xd, dtype, xs, "x"), U.t(2, yd, ydt, None, "y")
    return OpGraph([Reduction("red", {"X": x}, {"Y": y}, mode=mode)]).finalize(), x, y


CASES = [  # (x dims, x strides or None, y dims): rows, columns (NHWC), full, several axes
    ((3, 70), None, (3, 1)),
    ((4, 6, 3, 2), (36, 1, 12, 6), (1, 6, 1, 1)),
    ((2, 3, 5), None, (1, 1, 1)),
    ((2, 3, 4, 5), None, (2, 1, 4, 1)),
]


@pytest.mark.parametrize("mode", list(RO))
def test_every_mode(rng, mode):
    xd, xs, yd = CASES[int(mode) % len(CASES)]
    g, x, y = reduction_graph(mode, xd, yd, xs=xs)
    a = rng.uniform(0.5, 1.5, xd) * rng.choice([-1, 1], xd)
    if mode == RO.CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS:
        a.reshape(-1)[::3] = 0.0
    out = U.poisoned(y)
    plan = U.run(g, {1: U.upload(a, x), 2: out})
    assert plan.engine_names == ["reduction"]
    assert_close(U.download(out, y), R.reduction(mode, U.cast(a, x.dtype), yd), "float32")


@pytest.mark.parametrize("dtype", [DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_DOUBLE])
def test_half_and_double_io(rng, dtype):
    g, x, y = reduction_graph(RO.CUDNN_REDUCE_TENSOR_NORM2, (4, 96), (4, 1), dtype, ydt=dtype)
    a = rng.uniform(-1, 1, (4, 96))
    out = U.poisoned(y)
    U.run(g, {1: U.upload(a, x), 2: out})
    assert_close(U.download(out, y), R.reduction(RO.CUDNN_REDUCE_TENSOR_NORM2, U.cast(a, dtype), (4, 1)),
                 U.TOLNAME[dtype])


def test_knobs_split_and_block(rng):
    """Every ranked config (auto, hand-picked blocks, SPLIT_K = 1) gives the oracle's result; the auto
    config needs workspace for the split partials, SPLIT_K = 1 none."""
    g, x, y = reduction_graph(RO.CUDNN_REDUCE_TENSOR_ADD, (2, 600), (2, 1))
    a = rng.uniform(-1, 1, (2, 600))
    ecs = [e for e in api.get_heuristics(g) if e.engine.name == "reduction"]
    assert len(ecs) > 4
    ref = R.reduction(RO.CUDNN_REDUCE_TENSOR_ADD, a, (2, 1))
    seen_ws = set()
    split_k = int(registry.by_name("reduction").knobs(None)[1].type)
    picked = [e for e in ecs if e.config.get(split_k) == 1][:2] + [e for e in ecs if e.workspace_size][:2]
    for ec in picked:
        plan = api.build_plan(g, ec)
        assert plan.workspace_size == ec.workspace_size
        seen_ws.add(plan.workspace_size > 0)
        out = U.poisoned(y)
        ws = U.cuda.to_device(np.zeros(max(plan.workspace_size, 1), np.uint8))
        api.execute(plan, {1: U.upload(a, x), 2: out}, ws)
        assert_close(U.download(out, y), ref, "float32")
    assert seen_ws == {True, False}


def test_genstats_nhwc(rng):
    xd, xs = (3, 4, 5, 2), (40, 1, 8, 4)
    x = U.t(1, xd, U.F32, xs, "x")
    s, q = U.t(2, (1, 4, 1, 1), name="sum"), U.t(3, (1, 4, 1, 1), name="sqsum")
    g = OpGraph([GenStats("gs", {"X": x}, {"SUM": s, "SQSUM": q})]).finalize()
    a = rng.uniform(-1, 1, xd)
    os_, oq = U.poisoned(s), U.poisoned(q)
    plan = U.run(g, {1: U.upload(a, x), 2: os_, 3: oq})
    assert plan.engine_names == ["genstats"]
    rs, rq = R.genstats(a)
    assert_close(U.download(os_, s), rs, "float32")
    assert_close(U.download(oq, q), rq, "float32")


def test_unsupported_dtype_is_named():
    g, x, y = reduction_graph(RO.CUDNN_REDUCE_TENSOR_ADD, (2, 8), (2, 1), DT.CUDNN_DATA_INT64, ydt=DT.CUDNN_DATA_INT64)
    sub = api.problem(g)
    st, why = registry.by_name("reduction").check_support(sub, api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE and "'red'" in why and "X" in why
