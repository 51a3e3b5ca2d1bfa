"""Strided deterministic reductions and GENSTATS against the float64 oracle."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.reduce import strided as rd
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.kernels.pointwise.fused import contiguous_strides as cs
from ncudnn.testing import assert_close
from ncudnn.types import cudnnReduceTensorOp_t as RO


def _perm_strides(shape, order):
    """Strides of a buffer laid out with dims in ``order`` (outermost first)."""
    strides, acc = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def _gather(buf, shape, strides):
    idx = np.zeros(shape, np.int64)
    for d, s in enumerate(strides):
        sh = [1] * len(shape)
        sh[d] = shape[d]
        idx = idx + np.arange(shape[d]).reshape(sh) * s
    return np.asarray(buf).reshape(-1)[idx]


def _poisoned(n, dtype):
    """A device array of n NaNs in the storage form of ``dtype``."""
    return cuda.to_device(to_storage(np.full(n, np.nan, np.float32).astype(_host_type(dtype))))


def _host_type(dtype):
    import ml_dtypes
    return getattr(ml_dtypes, dtype, None) or np.dtype(dtype)


def _run(mode, x_host, shape, x_strides, out_shape, out_dtype="float32", x_dtype="float32", **kw):
    out = _poisoned(int(np.prod(out_shape)), out_dtype)
    rd.reduce_tensor(mode, cuda.to_device(to_storage(x_host)), out, shape, x_dtype, x_strides,
                     out_shape, out_dtype, cs(out_shape), **kw)
    return from_storage(out.copy_to_host(), out_dtype).reshape(out_shape)


ALL_OPS = list(RO)


@pytest.mark.parametrize("mode", ALL_OPS, ids=[m.name[20:] for m in ALL_OPS])
def test_ops_row_reduce_last_axis(rng, mode):
    shape = (3, 150)   # > one unrolled step (4 x 32) of the row kernel, plus a tail
    x = rng.uniform(0.5, 1.5, shape).astype(np.float32) * rng.choice([-1, 1], shape)
    if mode == RO.CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS:
        x[:, ::7] = 0
    if mode in (RO.CUDNN_REDUCE_TENSOR_MUL, RO.CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS):
        x = x[:, :20].copy()
        shape = x.shape
    out = _run(mode, x, shape, cs(shape), (3, 1))
    assert_close(out, ref.reduction(mode, x, (3, 1)), "float32", name=mode.name)


@pytest.mark.parametrize("mode", [RO.CUDNN_REDUCE_TENSOR_ADD, RO.CUDNN_REDUCE_TENSOR_MAX,
                                  RO.CUDNN_REDUCE_TENSOR_NORM2])
def test_column_reduce_outer_axis_with_split(rng, mode):
    """Reduced axis outermost (column kernel) with the range split over blocks + combine pass."""
    shape = (50, 37)
    x = rng.standard_normal(shape).astype(np.float32)
    k = rd.build_reduce(rd.reduce_spec(mode, shape, "float32", cs(shape), (1, 37), "float32",
                                       (37, 1), split=3))
    assert not k.row and k.split == 3 and k.combine is not None
    out = _run(mode, x, shape, cs(shape), (1, 37), split=3)
    assert_close(out, ref.reduction(mode, x, (1, 37)), "float32")


def test_interleaved_axes_permuted_layout_fp16_in_bf16_out(rng):
    shape = (4, 3, 5, 6)
    order = (0, 2, 3, 1)   # NHWC memory
    st = _perm_strides(shape, order)
    buf = rng.standard_normal(int(np.prod(shape))).astype(np.float16)
    x = _gather(buf, shape, st)
    out_shape = (1, 3, 5, 1)
    out = _run(RO.CUDNN_REDUCE_TENSOR_AVG, buf, shape, st, out_shape, out_dtype="bfloat16",
               x_dtype="float16")
    assert_close(out, ref.reduction(RO.CUDNN_REDUCE_TENSOR_AVG, x, out_shape), "bfloat16")


def test_many_short_rows_take_the_column_kernel(rng):
    shape = (70, 5)
    x = rng.standard_normal(shape).astype(np.float32)
    spec = rd.reduce_spec(RO.CUDNN_REDUCE_TENSOR_NORM1, shape, "float32", cs(shape), (70, 1),
                          "float32", (1, 1))
    assert not rd.build_reduce(spec).row
    out = _run(RO.CUDNN_REDUCE_TENSOR_NORM1, x, shape, cs(shape), (70, 1))
    assert_close(out, ref.reduction(RO.CUDNN_REDUCE_TENSOR_NORM1, x, (70, 1)), "float32")


def test_nothing_reduced_is_a_copy(rng):
    shape = (3, 4)
    x = rng.standard_normal(shape).astype(np.float32)
    out = _run(RO.CUDNN_REDUCE_TENSOR_ADD, x, shape, cs(shape), (3, 4))
    np.testing.assert_array_equal(out, x)


def test_full_reduction_to_scalar_split(rng):
    shape = (6, 40)
    x = rng.standard_normal(shape).astype(np.float32)
    out = _run(RO.CUDNN_REDUCE_TENSOR_ADD, x, shape, cs(shape), (1, 1), split=4)
    assert_close(out, ref.reduction(RO.CUDNN_REDUCE_TENSOR_ADD, x, (1, 1)), "float32")


def test_grouped_axis(rng):
    shape = (2, 12, 8)
    x = rng.standard_normal(shape).astype(np.float32)
    out = _run(RO.CUDNN_REDUCE_TENSOR_MAX, x, shape, cs(shape), (2, 3, 1))
    assert_close(out, ref.reduction(RO.CUDNN_REDUCE_TENSOR_MAX, x, (2, 3, 1)), "float32")


def test_float64_and_nan_propagation(rng):
    shape = (4, 33)
    x = rng.standard_normal(shape)
    x[1, 5] = np.nan
    out = _run(RO.CUDNN_REDUCE_TENSOR_MAX, x, shape, cs(shape), (4, 1), "float64", "float64")
    expected = ref.reduction(RO.CUDNN_REDUCE_TENSOR_MAX, x, (4, 1))
    assert np.isnan(out[1, 0]) and np.isnan(expected[1, 0])
    assert_close(out, expected, "float64")


def test_deterministic_bitwise(rng):
    shape = (3, 500)
    x = (rng.standard_normal(shape) * 1e3).astype(np.float32)
    a = _run(RO.CUDNN_REDUCE_TENSOR_ADD, x, shape, cs(shape), (3, 1), split=2)
    b = _run(RO.CUDNN_REDUCE_TENSOR_ADD, x, shape, cs(shape), (3, 1), split=2)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_genstats(rng, layout):
    shape = (3, 5, 4, 6)
    st = cs(shape) if layout == "nchw" else _perm_strides(shape, (0, 2, 3, 1))
    buf = rng.standard_normal(int(np.prod(shape))).astype(np.float32) + 0.5
    x = _gather(buf, shape, st)
    s, q = _poisoned(5, "float32"), _poisoned(5, "float32")
    rd.genstats(cuda.to_device(buf), s, q, shape, "float32", st, channel_axis=1)
    es, eq = ref.genstats(x, channel_axis=1)
    assert_close(s.copy_to_host().reshape(es.shape), es, "float32")
    assert_close(q.copy_to_host().reshape(eq.shape), eq, "float32")


@pytest.mark.parametrize("split", [0, 1, 2])
def test_genstats_nchw_two_level_rows(rng, split):
    """NCHW GENSTATS: the row kernel walks N in a loop and HW with the threads (no per-element
    division); the split is over N."""
    shape = (3, 4, 5, 8)   # HW = 40 >= the simulator's 32-thread block
    spec = rd.genstats_spec(shape, "float32", cs(shape), split=split)
    k = rd.build_reduce(spec)
    assert k.row and "while qi < qhi" in k.source and "//" not in k.source.split("while r")[1]
    assert k.split <= 3
    x = (rng.standard_normal(shape) + 0.5).astype(np.float32)
    s, q = _poisoned(4, "float32"), _poisoned(4, "float32")
    rd.genstats(cuda.to_device(x), s, q, shape, "float32", cs(shape), split=split)
    es, eq = ref.genstats(x, channel_axis=1)
    assert_close(s.copy_to_host().reshape(es.shape), es, "float32")
    assert_close(q.copy_to_host().reshape(eq.shape), eq, "float32")


@pytest.mark.parametrize("mode", [RO.CUDNN_REDUCE_TENSOR_AMAX, RO.CUDNN_REDUCE_TENSOR_AVG,
                                  RO.CUDNN_REDUCE_TENSOR_NORM1])
def test_two_level_rows_over_outer_and_inner_axes(rng, mode):
    shape = (2, 3, 36)
    x = rng.uniform(-2, 2, shape).astype(np.float32)
    k = rd.build_reduce(rd.reduce_spec(mode, shape, "float32", cs(shape), (1, 3, 1), "float32", cs((1, 3, 1))))
    assert k.row and "while qi < qhi" in k.source
    out = _run(mode, x, shape, cs(shape), (1, 3, 1))
    assert_close(out, ref.reduction(mode, x, (1, 3, 1)), "float32", name=mode.name)
