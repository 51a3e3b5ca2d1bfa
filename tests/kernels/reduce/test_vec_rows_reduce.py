"""Vector row reduction kernel (16-byte loads, warp or block per row, split + block combine) vs the
float64 oracle."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.reduce import strided as rd
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.kernels.pointwise.fused import contiguous_strides as cs
from ncudnn.testing import assert_close, poison_value, size
from ncudnn.types import cudnnReduceTensorOp_t as RO


def _host(dtype):
    import ml_dtypes
    return getattr(ml_dtypes, dtype, None) or np.dtype(dtype)


def _run(spec, x):
    out = cuda.to_device(to_storage(np.full(int(np.prod(spec.out_shape)), poison_value(np.float32),
                                            np.float32).astype(_host(spec.outputs[0][0]))))
    k = rd.build_reduce(spec)
    k.launch([cuda.to_device(to_storage(x.reshape(-1)))], [out])
    return k, from_storage(out.copy_to_host(), spec.outputs[0][0]).reshape(spec.out_shape)


@pytest.mark.parametrize("rows, block", [(1, 64), (2, 64)], ids=["block_per_row", "warp_per_row"])
@pytest.mark.parametrize("mode", [RO.CUDNN_REDUCE_TENSOR_ADD, RO.CUDNN_REDUCE_TENSOR_AMAX,
                                  RO.CUDNN_REDUCE_TENSOR_NORM2])
def test_krd_rows(rng, mode, rows, block):
    shape = size((5, 300), (4096, 8192))   # 75 vectors a row: two unrolled trips and a tail
    x = rng.standard_normal(shape).astype(np.float32)
    spec = rd.reduce_spec(mode, shape, "float32", cs(shape), (shape[0], 1), "float32", (1, 1),
                          block=block, vec=0, rows=rows, unroll=2, split=1)
    k, out = _run(spec, x)
    assert k.vec == 4 and k.rows == rows and k.split == 1
    assert_close(out, ref.reduction(mode, x, (shape[0], 1)), "float32")


@pytest.mark.parametrize("mode", [RO.CUDNN_REDUCE_TENSOR_AMAX, RO.CUDNN_REDUCE_TENSOR_ADD,
                                  RO.CUDNN_REDUCE_TENSOR_MIN])
def test_krd_full_split_block_combine(rng, mode):
    shape = size((6, 200), (2048, 32768))
    x = rng.standard_normal(shape).astype(np.float32)
    spec = rd.reduce_spec(mode, shape, "float32", cs(shape), (1, 1), "float32", (1, 1),
                          vec=0, split=size(5, 0))
    k, out = _run(spec, x)
    assert k.vec == 4 and k.split > 1 and k.combine_grid == 1
    assert_close(out, ref.reduction(mode, x, (1, 1)), "float32")


def test_krd_nan_propagates_through_split_amax(rng):
    shape = (4, 64)
    x = rng.standard_normal(shape).astype(np.float32)
    x[3, 17] = np.nan
    spec = rd.reduce_spec(RO.CUDNN_REDUCE_TENSOR_AMAX, shape, "float32", cs(shape), (1, 1),
                          "float32", (1, 1), vec=0, split=3)
    _, out = _run(spec, x)
    assert np.isnan(out).all()


def test_krd_bf16_rows_strided_kept_dim(rng):
    """bf16 (8 elements a vector), rows of a padded buffer (row stride > row length)."""
    rows, cols, pitch = 3, 96, 104
    buf = rng.standard_normal(rows * pitch).astype(_host("bfloat16"))
    x = buf.reshape(rows, pitch)[:, :cols].astype(np.float64)
    spec = rd.reduce_spec(RO.CUDNN_REDUCE_TENSOR_AVG, (rows, cols), "bfloat16", (pitch, 1),
                          (rows, 1), "float32", (1, 1), vec=0)
    k = rd.build_reduce(spec)
    assert k.vec == 8
    out = cuda.to_device(np.full(rows, np.nan, np.float32))
    k.launch([cuda.to_device(to_storage(buf))], [out])
    assert_close(out.copy_to_host().reshape(rows, 1), ref.reduction(RO.CUDNN_REDUCE_TENSOR_AVG, x,
                                                                     (rows, 1)), "float32")


def test_krd_layouts_without_vectors_use_the_element_kernel():
    # odd row length, and a reduced axis that is not innermost: no 16-byte path
    odd = rd.reduce_spec(RO.CUDNN_REDUCE_TENSOR_ADD, (4, 130), "float32", cs((4, 130)), (4, 1),
                         "float32", (1, 1), vec=0)
    assert rd.build_reduce(odd).vec == 2
    col = rd.reduce_spec(RO.CUDNN_REDUCE_TENSOR_ADD, (64, 8), "float32", cs((64, 8)), (1, 8),
                         "float32", (8, 1), vec=0)
    assert rd.build_reduce(col).vec == 1 and not rd.build_reduce(col).row
