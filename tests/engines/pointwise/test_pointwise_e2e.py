"""End to end through the engine API: IR graph -> heuristics -> plan -> execute on device arrays,
checked against the float64 oracle; variant-pack forms, bindings and the plan cache."""
import numpy as np
import pytest

from ncudnn import memory
from ncudnn.engines import api, plancache
from ncudnn.errors import CudnnError
from ncudnn.handle import cudnnCreate, cudnnDestroy
from ncudnn.ir import OpGraph, TensorDesc
from ncudnn.reference.pointwise import pointwise as ref_pw
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S

import engine_graphs as G

DIMS = (2, 3, 4, 5)


def inputs(rng, dims=DIMS, dtype=np.float32):
    x = rng.uniform(-1, 1, dims).astype(dtype)
    b = rng.uniform(-1, 1, (1, dims[1]) + (1,) * (len(dims) - 2)).astype(dtype)
    y = rng.uniform(-1, 1, dims).astype(dtype)
    return x, b, y


def reference(x, b, y):
    return ref_pw(PM.CUDNN_POINTWISE_MUL, ref_pw(PM.CUDNN_POINTWISE_ADD, x, b), ref_pw(PM.CUDNN_POINTWISE_RELU_FWD, y))


def test_bias_relu_mul_end_to_end(rng):
    g = G.bias_relu_mul(DIMS)
    ec = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0]
    plan = api.build_plan(g, ec)
    x, b, y = inputs(rng)
    out = G.poisoned(DIMS)
    api.execute(plan, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out}, None)
    assert_close(out.copy_to_host(), reference(x, b, y), "float32")


@pytest.mark.parametrize("dtype,tol", [(np.float16, "float16"), (np.float64, "float64")])
def test_other_dtypes(rng, dtype, tol):
    cudnn = {np.float16: DT.CUDNN_DATA_HALF, np.float64: DT.CUDNN_DATA_DOUBLE}[dtype]
    g = G.bias_relu_mul((2, 3, 2, 2), dtype=cudnn)
    plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])
    x, b, y = inputs(rng, (2, 3, 2, 2), dtype)
    out = G.poisoned((2, 3, 2, 2), dtype)
    api.execute(plan, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out})
    assert_close(out.copy_to_host(), reference(x, b, y), tol)


def test_channels_last_output_and_a_second_config(rng):
    dims = (2, 3, 2, 2)
    nhwc = (12, 1, 6, 3)
    x, b, y = inputs(rng, dims)
    g = G.bias_relu_mul(dims, finalize=False)
    g.nodes[2].outputs["Y"].strides = nhwc
    g.finalize()
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    ec = next(e for e in ecs if e.config != ecs[0].config)
    plan = api.build_plan(g, ec)
    buf = G.poisoned(24)  # the NHWC output's storage, passed as a raw device pointer
    api.execute(plan, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: memory.device_pointer(buf)})
    flat = buf.copy_to_host()
    assert not np.isnan(flat).any(), f"{np.isnan(flat).sum()} of 24 output elements not written"
    got = np.lib.stride_tricks.as_strided(flat, dims, tuple(4 * s for s in nhwc))
    assert_close(got.copy(), reference(x, b, y), "float32")


def test_by_value_scalar_and_pack_override(rng):
    x_t = G.t(1, (3, 4), name="x")
    s_t = TensorDesc(2, (1, 1), (1, 1), DT.CUDNN_DATA_FLOAT, is_by_value=True, value=2.5, name="s")
    o_t = G.t(3, (3, 4), name="out")
    g = OpGraph([G.pw("scale", PM.CUDNN_POINTWISE_MUL, o_t, X=x_t, B=s_t)]).finalize()
    plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])
    x = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    out = G.poisoned((3, 4))
    api.execute(plan, {1: G.device(x), 3: out})
    assert_close(out.copy_to_host(), x * 2.5, "float32")
    api.execute(plan, {1: G.device(x), 2: -0.5, 3: out})
    assert_close(out.copy_to_host(), x * -0.5, "float32")


def test_bindings_are_reused_and_refreshed(rng):
    g = G.bias_relu_mul(DIMS)
    plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])
    plan.forget_bindings()  # the plan may come from the process-wide cache, used by other tests
    x, b, y = inputs(rng)
    dx, db, dy, out = G.device(x), G.device(b), G.device(y), G.poisoned(DIMS)
    pack = {1: dx, 2: db, 3: dy, 4: out}
    api.execute(plan, pack)
    api.execute(plan, pack)
    assert len(plan._bindings) == 1
    # raw integer pointers (unchecked, as in cuDNN) get a binding of their own, reused on repeat: a
    # binding made for self-describing buffers is keyed by their dtype, shape and strides as well
    raw = {u: memory.device_pointer(a) for u, a in pack.items()}
    api.execute(plan, raw)
    api.execute(plan, dict(raw))
    assert len(plan._bindings) == 2
    x2 = rng.uniform(-1, 1, DIMS).astype(np.float32)
    out2 = G.poisoned(DIMS)
    api.execute(plan, {1: G.device(x2), 2: db, 3: dy, 4: out2})
    assert len(plan._bindings) == 3
    assert_close(out2.copy_to_host(), reference(x2, b, y), "float32")
    assert_close(out.copy_to_host(), reference(x, b, y), "float32")


def test_bad_variant_packs():
    g = G.bias_relu_mul(DIMS)
    plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])
    arrays = {1: G.poisoned(DIMS), 2: G.poisoned((1, 3, 1, 1)), 3: G.poisoned(DIMS), 4: G.poisoned(DIMS)}
    with pytest.raises(CudnnError) as ei:
        api.execute(plan, {k: a for k, a in arrays.items() if k != 3})
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM and "3" in ei.value.message
    small = {**arrays, 1: G.poisoned((2, 3, 4, 4))}
    with pytest.raises(CudnnError) as ei:
        api.execute(plan, small)
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT and "'x'" in ei.value.message
    with pytest.raises(CudnnError) as ei:
        api.execute(plan, {**arrays, 4: 0})
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER


def test_plan_cache_per_process_and_per_handle():
    g = G.bias_relu_mul(DIMS)
    ec = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0]
    cache = plancache.cache_for(None)
    p1 = api.build_plan(g, ec)
    hits = cache.hits
    p2 = api.build_plan(G.bias_relu_mul(DIMS), ec)  # the same graph built again
    assert p1 is p2 and cache.hits == hits + 1
    assert api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[1]) is not p1
    st, h = cudnnCreate()
    assert st == S.CUDNN_STATUS_SUCCESS
    try:
        ph = api.build_plan(g, ec, h)
        assert ph is not p1 and api.build_plan(G.bias_relu_mul(DIMS), ec, h) is ph
        assert h.caches["plans"].hits == 1 and len(h.caches["plans"]) == 1
    finally:
        cudnnDestroy(h)


def test_execute_on_the_handle_stream(rng):
    st, h = cudnnCreate()
    try:
        g = G.bias_relu_mul(DIMS)
        plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A, h)[0], h)
        x, b, y = inputs(rng)
        out = G.poisoned(DIMS)
        api.execute(plan, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out}, None, handle=h)
        h.synchronize()
        assert_close(out.copy_to_host(), reference(x, b, y), "float32")
    finally:
        cudnnDestroy(h)


class _CAI:
    """A bare producer: only __cuda_array_interface__."""

    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = {"data": (memory.device_pointer(arr), False), "shape": arr.shape,
                                         "strides": None, "typestr": arr.dtype.str, "version": 3}


def test_variant_pack_producer_kinds(rng):
    g = G.bias_relu_mul(DIMS)
    plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])
    x, b, y = inputs(rng)
    dx, db, dy, out = G.device(x), G.device(b), G.device(y), G.poisoned(DIMS)
    pack = {1: _CAI(dx), 2: memory.as_view(db), 3: memory.device_pointer(dy), 4: _CAI(out)}
    api.execute(plan, pack)
    assert_close(out.copy_to_host(), reference(x, b, y), "float32")


def test_comparison_writes_booleans(rng):
    dims = (2, 3, 4)
    x_t, b_t = G.t(1, dims, name="x"), G.t(2, (1, 3, 1), name="b")
    o_t = G.t(3, dims, DT.CUDNN_DATA_BOOLEAN, name="gt")
    g = OpGraph([G.pw("gt", PM.CUDNN_POINTWISE_CMP_GT, o_t, X=x_t, B=b_t)]).finalize()
    plan = api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])
    x, b = rng.uniform(-1, 1, dims).astype(np.float32), rng.uniform(-1, 1, (1, 3, 1)).astype(np.float32)
    ref = ref_pw(PM.CUDNN_POINTWISE_CMP_GT, x, b)
    out = G.device(~ref)  # poisoned: every element starts wrong
    api.execute(plan, {1: G.device(x), 2: G.device(b), 3: out})
    got = out.copy_to_host()
    assert got.dtype == np.bool_ and np.array_equal(got, ref) and ref.any() and not ref.all()
