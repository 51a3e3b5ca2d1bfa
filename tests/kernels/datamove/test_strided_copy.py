"""The strided copy kernels of kernels/datamove/strided_copy.py called directly: slices (element offsets on both
sides), casts on the strided and the tiled path, int32 bit-exact copies, and the normalization that
picks the path (merged dims, word path, tiled transpose)."""
import ml_dtypes
import numpy as np
from numba import cuda

from ncudnn.kernels.datamove import strided_copy as dc
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.testing import poison_value


def _poisoned(n, dt):
    return cuda.to_device(to_storage(np.full(n, poison_value(np.dtype(dt)), dt)))


def _view(flat, dims, strides, offset=0):
    return np.lib.stride_tricks.as_strided(flat[offset:], dims, [s * flat.itemsize for s in strides])


def test_normalize_and_paths():
    n = dc.normalize(dc.CopySpec((2, 1, 3, 4), (12, 12, 4, 1), (12, 12, 4, 1)))
    assert n.dims == (24,) and dc.build_copy(n).word == 2
    assert dc.build_copy(dc.CopySpec((40, 36), (36, 1), (1, 40))).kind == "tiled"
    assert dc.build_copy(dc.CopySpec((40, 36), (36, 1), (36, 1), "float32", "float16")).word == 0


def test_slice_with_offsets(rng):
    """y[1:4, 2:7] of a 6x9 buffer <- x[2:5, 1:6] of a 7x8 buffer (a slice on each side)."""
    x = rng.standard_normal((7, 8)).astype(np.float32)
    y = _poisoned(54, np.float32)
    before = y.copy_to_host()
    spec = dc.CopySpec((3, 5), (8, 1), (9, 1), "float32", "float32", 2 * 8 + 1, 1 * 9 + 2)
    dc.copy_strided(cuda.to_device(x.ravel()), y, spec)
    got = y.copy_to_host().reshape(6, 9)
    np.testing.assert_array_equal(got[1:4, 2:7], x[2:5, 1:6])
    mask = np.ones((6, 9), bool)
    mask[1:4, 2:7] = False
    assert np.array_equal(got[mask].view(np.uint32), before.reshape(6, 9)[mask].view(np.uint32))


def test_tiled_transpose_bf16_to_f32(rng):
    dims = (2, 12, 35)
    x = rng.standard_normal(dims).astype(ml_dtypes.bfloat16)
    ys = (35 * 12, 1, 12)
    y = _poisoned(2 * 12 * 35, np.float32)
    spec = dc.CopySpec(dims, (420, 35, 1), ys, "bfloat16", "float32")
    assert dc.build_copy(spec).kind == "tiled"
    dc.copy_strided(cuda.to_device(to_storage(x.ravel())), y, spec)
    np.testing.assert_array_equal(_view(y.copy_to_host(), dims, ys), x.astype(np.float32))


def test_strided_cast_f32_to_f16_and_int32_copy(rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    y = _poisoned(35, np.float16)
    spec = dc.CopySpec((5, 7), (7, 1), (1, 5), "float32", "float16")   # 7 < 8: strided, not tiled
    assert dc.build_copy(spec).kind == "strided"
    dc.copy_strided(cuda.to_device(x.ravel()), y, spec)
    np.testing.assert_array_equal(_view(from_storage(y.copy_to_host(), "float16"), (5, 7), (1, 5)),
                                  x.astype(np.float16))
    xi = rng.integers(-2 ** 31, 2 ** 31 - 1, (3, 10), dtype=np.int32)
    yi = _poisoned(30, np.int32)
    spec = dc.CopySpec((3, 10), (10, 1), (10, 1), "int32", "int32")
    assert dc.build_copy(spec).word == 2
    dc.copy_strided(cuda.to_device(xi.ravel()), yi, spec)
    np.testing.assert_array_equal(yi.copy_to_host().reshape(3, 10), xi)
