"""Engine "data_movement": concat and reshape (logical, transposing, view-only) through the engine API
(heuristics -> plan -> execute) against ncudnn.reference.ops (float64), fresh random inputs, poisoned
outputs; the NOT_SUPPORTED reason for a reshape that no common shape expresses."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import memory
from ncudnn.engines import api, registry
from ncudnn.engines.datamove.engine import common_shape
from ncudnn.ir import Concat, OpGraph, Reshape
from ncudnn.ir.partition import Subgraph
from ncudnn.reference.ops import run_node
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendReshapeMode_t as RM, cudnnDataType_t as DT, cudnnStatus_t as S

import membound_util as U

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16


def strides_for(dims, order):
    """Packed strides with ``order`` listing the dims outermost -> innermost."""
    st, s = [0] * len(dims), 1
    for d in reversed(order):
        st[d] = s
        s *= dims[d]
    return tuple(st)


def concat_graph(shapes, axis, dtype=F32, y_dtype=None, in_place=None, y_order=None):
    xs = [U.t(i + 1, d, dtype, name=f"x{i}") for i, d in enumerate(shapes)]
    yd = list(shapes[0])
    yd[axis] = sum(d[axis] for d in shapes)
    ys = strides_for(yd, y_order) if y_order else None
    y = U.t(50, yd, y_dtype or dtype, ys, name="y")
    node = Concat("cat", {f"X{i}": x for i, x in enumerate(xs)}, {"Y": y}, axis=axis, in_place_index=in_place)
    return OpGraph([node]).finalize(), xs, y


def reshape_graph(xd, yd, x_strides=None, y_strides=None, mode=RM.CUDNN_RESHAPE_LOGICAL, dtype=F32):
    x = U.t(1, xd, dtype, x_strides, name="x")
    y = U.t(2, yd, dtype, y_strides, name="y")
    return OpGraph([Reshape("rs", {"X": x}, {"Y": y}, mode=mode)]).finalize(), x, y


def expected(g, inputs):
    node = g.nodes[0]
    return run_node(node, inputs)["Y"]


@pytest.mark.parametrize("axis", [0, 1, 3])
def test_concat_axes(rng, axis):
    shapes = [[2, 3, 4, 6], [2, 3, 4, 6]]
    shapes[1][axis] = 2 + axis   # unequal slabs
    g, xs, y = concat_graph(shapes, axis)
    assert api.problem(g).kind == "concat"
    a = [rng.uniform(-3, 3, s) for s in shapes]
    out = U.poisoned(y)
    plan = U.run(g, {**{x.uid: U.upload(v, x) for x, v in zip(xs, a)}, y.uid: out})
    assert plan.engine_names == ["data_movement"] and plan.workspace_size == 0
    ref = expected(g, {f"X{i}": U.cast(v, F32) for i, v in enumerate(a)})
    np.testing.assert_array_equal(U.download(out, y), ref)


def test_concat_three_inputs_half_to_float_channels_last_output(rng):
    """A dtype cast (fp16 in, fp32 out) and an NHWC output: the pieces are strided (not word) copies."""
    shapes = [[2, 3, 2, 5], [2, 1, 2, 5], [2, 4, 2, 5]]
    g, xs, y = concat_graph(shapes, 1, F16, F32, y_order=(0, 2, 3, 1))
    a = [rng.uniform(-2, 2, s) for s in shapes]
    out = U.poisoned(y)
    U.run(g, {**{x.uid: U.upload(v, x) for x, v in zip(xs, a)}, y.uid: out})
    ref = expected(g, {f"X{i}": U.cast(v, F16) for i, v in enumerate(a)})
    np.testing.assert_array_equal(U.download(out, y), ref)


@pytest.mark.parametrize("aliased", [True, False], ids=["in-place", "separate-buffer"])
def test_concat_in_place_index(rng, aliased):
    """Input 1 already in Y's memory at its slab is not copied; given elsewhere it is copied."""
    shapes = [[3, 4], [5, 4]]
    g, xs, y = concat_graph(shapes, 0, in_place=1)
    a = [rng.uniform(-1, 1, s) for s in shapes]
    host = np.full(32, np.nan, np.float32)
    if aliased:
        host[12:] = a[1].astype(np.float32).ravel()
    out = cuda.to_device(host)
    x1 = out[12:] if aliased else U.upload(a[1], xs[1])
    U.run(g, {xs[0].uid: U.upload(a[0], xs[0]), xs[1].uid: x1, y.uid: out})
    ref = expected(g, {"X0": U.cast(a[0], F32), "X1": U.cast(a[1], F32)})
    np.testing.assert_array_equal(U.download(out, y), ref)


def _launch_count(g, views):
    eng = registry.by_name("data_movement")
    sub = Subgraph(kind=g.nodes[0].OP, nodes=list(g.nodes))
    plan = eng.build(sub, eng.default_config(sub), api.context())
    return len(plan.launches(views, None))


def test_in_place_input_and_view_are_not_launched():
    g, xs, y = concat_graph([[3, 4], [5, 4]], 0, in_place=1)
    yb = cuda.device_array(32, np.float32)
    v = {y.uid: memory.as_view(yb), xs[0].uid: memory.as_view(cuda.device_array(12, np.float32))}
    assert _launch_count(g, {**v, xs[1].uid: memory.as_view(yb[12:])}) == 1
    assert _launch_count(g, {**v, xs[1].uid: memory.as_view(cuda.device_array(20, np.float32))}) == 2
    g, x, y = reshape_graph((4, 6), (2, 12), mode=RM.CUDNN_RESHAPE_VIEW_ONLY)
    b = cuda.device_array(24, np.float32)
    assert _launch_count(g, {x.uid: memory.as_view(b), y.uid: memory.as_view(b)}) == 0
    assert _launch_count(g, {x.uid: memory.as_view(b), y.uid: memory.as_view(cuda.device_array(24, np.float32))}) == 1


CASES = {
    "flatten": ((2, 3, 4), (6, 4), None, None),
    "split-dims": ((6, 10), (2, 3, 5, 2), None, None),
    "transpose-2d-tiled": ((70, 20), (70, 20), None, (1, 70)),     # two tiles along y's inner dim
    "transpose-2d-tiled-b": ((20, 70), (20, 70), None, (1, 20)),   # two tiles along x's inner dim
    "transpose-batched-tiled": ((2, 33, 12), (2, 33, 12), None, strides_for((2, 33, 12), (0, 2, 1))),
    "nchw-to-nhwc": ((2, 3, 4, 5), (2, 3, 4, 5), None, strides_for((2, 3, 4, 5), (0, 2, 3, 1))),
    "from-transposed": ((5, 6), (3, 10), (1, 5), None),
    "strided-input": ((3, 4), (12,), (8, 2), None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reshape_logical(rng, name):
    xd, yd, xs, ys = CASES[name]
    g, x, y = reshape_graph(xd, yd, xs, ys)
    a = rng.uniform(-4, 4, xd)
    out = U.poisoned(y)
    plan = U.run(g, {x.uid: U.upload(a, x), y.uid: out})
    assert plan.engine_names == ["data_movement"]
    np.testing.assert_array_equal(U.download(out, y), expected(g, {"X": U.cast(a, F32)}))


def test_reshape_bf16_transpose_is_bit_exact(rng):
    g, x, y = reshape_graph((9, 16), (9, 16), None, (1, 9), dtype=BF16)
    a = rng.uniform(-4, 4, (9, 16))
    out = U.poisoned(y)
    U.run(g, {x.uid: U.upload(a, x), y.uid: out})
    np.testing.assert_array_equal(U.download(out, y), U.cast(a, BF16))


def test_reshape_view_only_separate_buffer_copies(rng):
    g, x, y = reshape_graph((4, 6), (2, 3, 4), mode=RM.CUDNN_RESHAPE_VIEW_ONLY)
    a = rng.uniform(-1, 1, (4, 6))
    out = U.poisoned(y)
    U.run(g, {x.uid: U.upload(a, x), y.uid: out})
    assert_close(U.download(out, y), expected(g, {"X": U.cast(a, F32)}), "float32")


def test_common_shape_and_the_unsupported_reason():
    assert common_shape((2, 3, 4), (12, 4, 1), (6, 4), (4, 1)) == (((24,), (1,), (1,)), "")
    assert common_shape((6, 10), (10, 1), (2, 3, 5, 2), (30, 10, 2, 1))[0] == ((60,), (1,), (1,))
    assert common_shape((4, 6), (1, 4), (2, 12), (12, 1))[0] == ((4, 6), (1, 4), (6, 1))
    g, x, y = reshape_graph((2, 3), (3, 2), (1, 2), (1, 3))
    eng = registry.by_name("data_movement")
    st, why = eng.check_support(Subgraph(kind="reshape", nodes=list(g.nodes)), api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE and "node 'rs'" in why and "divide" in why
