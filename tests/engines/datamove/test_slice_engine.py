"""Engine "data_movement" on the IR Slice node (heuristics -> plan -> execute) against NumPy slicing of
float64 data, fresh random inputs, poisoned outputs: NCHW and NHWC inputs, strides, a dtype cast, the
word path; a slice whose output overlaps its input is refused with BAD_PARAM before any launch."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import memory
from ncudnn.engines import api, registry
from ncudnn.errors import CudnnError
from ncudnn.ir import OpGraph, Slice
from ncudnn.ir.partition import Subgraph
from ncudnn.kernels.datamove import strided_copy as kdm
from ncudnn.types import cudnnDataType_t as DT, cudnnStatus_t as S

import membound_util as U

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
NHWC = lambda d: (d[1] * d[2] * d[3], 1, d[3] * d[1], d[1])  # noqa: E731


def slice_graph(xd, start, limit, steps=None, x_strides=None, dtype=F32, y_dtype=None, y_strides=None):
    x = U.t(1, xd, dtype, x_strides, name="x")
    y = U.t(2, [1] * len(xd), y_dtype or dtype, name="y")
    y.dims = y.strides = None
    if y_strides is not None:
        y.strides = tuple(y_strides)
    g = OpGraph([Slice("sl", {"X": x}, {"Y": y}, start_indices=start, limit_indices=limit, strides=steps)])
    return g.finalize(), x, y


def oracle(a, start, limit, steps=None):
    steps = steps or [1] * len(start)
    return np.asarray(a, np.float64)[tuple(slice(s, e, k) for s, e, k in zip(start, limit, steps))]


CASES = {   # xd, start, limit, steps, x layout
    "nchw-window": ((2, 5, 6, 7), (0, 1, 2, 1), (2, 4, 6, 7), None, None),
    "nchw-strided": ((2, 5, 6, 7), (1, 0, 1, 0), (2, 5, 6, 7), (1, 2, 2, 3), None),
    "nhwc-channels": ((2, 6, 3, 4), (0, 2, 0, 1), (2, 5, 3, 4), None, "nhwc"),
    "nhwc-strided": ((2, 6, 5, 4), (0, 1, 1, 0), (2, 6, 5, 3), (2, 2, 3, 1), "nhwc"),
    "rows-2d": ((9, 16), (3, 0), (8, 16), None, None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_slice_matches_numpy(rng, name):
    xd, start, limit, steps, lay = CASES[name]
    g, x, y = slice_graph(xd, start, limit, steps, NHWC(xd) if lay == "nhwc" else None)
    assert api.problem(g).kind == "slice"
    if lay == "nhwc":
        assert y.stride_order() == x.stride_order()   # Y packed in X's stride order
    a = rng.uniform(-3, 3, xd)
    out = U.poisoned(y)
    plan = U.run(g, {x.uid: U.upload(a, x), y.uid: out})
    assert plan.engine_names == ["data_movement"] and plan.workspace_size == 0
    np.testing.assert_array_equal(U.download(out, y), oracle(U.cast(a, F32), start, limit, steps))


def test_slice_half_to_float_cast(rng):
    xd, start, limit, steps = (3, 8, 5), (1, 1, 0), (3, 8, 5), (1, 3, 2)
    g, x, y = slice_graph(xd, start, limit, steps, dtype=F16, y_dtype=F32)
    a = rng.uniform(-2, 2, xd)
    out = U.poisoned(y)
    U.run(g, {x.uid: U.upload(a, x), y.uid: out})
    np.testing.assert_array_equal(U.download(out, y), oracle(U.cast(a, F16), start, limit, steps))


def test_slice_bf16_rows_take_the_word_path_bit_exact(rng):
    """Whole rows of an even-width bf16 tensor from an even row: 8-byte words (4 elements a lane)."""
    xd, start, limit = (6, 12), (2, 0), (6, 12)
    g, x, y = slice_graph(xd, start, limit, dtype=BF16)
    node = g.nodes[0]
    spec = kdm.CopySpec(tuple(y.dims), node.x_view_strides(), tuple(y.strides), "bfloat16", "bfloat16",
                        node.x_offset(), 0)
    assert kdm.build_copy(spec).word == 4
    a = rng.uniform(-4, 4, xd)
    out = U.poisoned(y)
    U.run(g, {x.uid: U.upload(a, x), y.uid: out})
    np.testing.assert_array_equal(U.download(out, y), oracle(U.cast(a, BF16), start, limit))


def test_slice_onto_its_own_input_is_refused(rng):
    """Y inside X's buffer: the copy would race; BAD_PARAM names the node and both tensors."""
    g, x, y = slice_graph((4, 8), (1, 0), (4, 8))
    buf = U.upload(rng.uniform(-1, 1, (4, 8)), x)
    with pytest.raises(CudnnError) as e:
        U.run(g, {x.uid: buf, y.uid: buf})
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM
    assert "node 'sl'" in str(e.value) and "overlap" in str(e.value) and "X (uid 1)" in str(e.value)


def test_slice_unsupported_layout_reason():
    g, x, y = slice_graph((4, 8), (0, 0), (4, 4))
    x.strides = (8, -1)
    eng = registry.by_name("data_movement")
    st, why = eng.check_support(Subgraph(kind="slice", nodes=list(g.nodes)), api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "node 'sl'" in why and "negative" in why


def _plan(g):
    eng = registry.by_name("data_movement")
    sub = Subgraph(kind=g.nodes[0].OP, nodes=list(g.nodes))
    return eng.build(sub, eng.default_config(sub), api.context())


@pytest.mark.parametrize("shift", [0, 2, 1], ids=["aligned", "8-byte", "4-byte"])
def test_slice_16_byte_path_and_its_misaligned_twin(rng, shift):
    """Whole 16-byte runs (f32, an inner window of 8 from column 4): the 16-byte kernel when X and Y
    start 16-byte aligned, its 8-byte twin when X starts 8 bytes past an aligned address, the
    element-by-element twin when 4 bytes past (an 8-byte access there faults on a GPU); all exact."""
    xd, start, limit = (5, 16), (1, 4), (5, 12)
    g, x, y = slice_graph(xd, start, limit)
    a = rng.uniform(-2, 2, xd)
    host = np.full(88, np.nan, np.float32)
    host[4 + shift:84 + shift] = U.cast(a, F32).ravel()
    whole = cuda.to_device(host)
    assert memory.as_view(whole).ptr % 16 == 0
    xb = whole[4 + shift:4 + shift + 80]
    out = U.poisoned(y)
    plan = _plan(g)
    views = {x.uid: memory.as_view(xb), y.uid: memory.as_view(out)}
    assert [(s.vec16, s.word) for s, _ in plan.selected(views, None)] == [(shift == 0, shift == 2)]
    plan.execute({x.uid: xb, y.uid: out}, None, 0)
    np.testing.assert_array_equal(U.download(out, y), oracle(U.cast(a, F32), start, limit))
