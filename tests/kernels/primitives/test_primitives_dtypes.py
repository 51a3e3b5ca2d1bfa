"""dtypes: load to float32 and store with round-to-nearest-even, bit-exact against ml_dtypes."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.runtime import dtypes as dt
from ncudnn.testing import poison_value

NAMES = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32", "float64"]


def _np_type(name):
    return getattr(ml_dtypes, name, None) or np.dtype(name)


@np.errstate(over="ignore")
def _specials(rng, name):
    fin = float(ml_dtypes.finfo(_np_type(name)).max) if name not in ("float32", "float64") \
        else 1e30
    tiny = float(ml_dtypes.finfo(_np_type(name)).smallest_subnormal) \
        if name not in ("float32", "float64") else 1e-40
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, fin, -fin, fin * 1.03, fin * 1.2, 3 * fin,
            tiny, tiny * 0.5, tiny * 1.5, tiny * 2.5, -tiny * 3.5, tiny * 0.49]
    normal = rng.standard_normal(40) * rng.choice([1e-3, 1.0, 30.0], 40)
    return np.concatenate([vals, normal]).astype(np.float32)


def _store_kernel(name, saturate=False):
    load = dt.loader("float32")
    store = dt.storer(name, saturate)

    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            store(out, i, load(x, i))
    return k


def _load_kernel(name):
    load = dt.loader(name)
    store = dt.storer("float32")

    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            store(out, i, load(x, i))
    return k


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")   # the simulator's fp16 cast
@pytest.mark.parametrize("name", NAMES)
def test_store_rounds_like_ml_dtypes(rng, name):
    x = _specials(rng, name)
    out = np.full(x.size, poison_value(dt.storage_dtype(name)), dt.storage_dtype(name))
    _store_kernel(name)[1, x.size](x, out)
    with np.errstate(over="ignore"):
        rounded = x.astype(_np_type(name))
    expected = dt.to_storage(rounded)
    got, exp = dt.from_storage(out, name).astype(np.float64), rounded.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    ok = ~np.isnan(exp)
    np.testing.assert_array_equal(out[ok], expected[ok], err_msg=str(x[ok][out[ok] != expected[ok]]))


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_saturating_store(rng, name):
    fin = float(ml_dtypes.finfo(_np_type(name)).max)
    x = np.array([fin * 2, -fin * 2, np.inf, -np.inf, np.nan, 1.0], np.float32)
    out = np.zeros(x.size, np.uint8)
    _store_kernel(name, saturate=True)[1, x.size](x, out)
    vals = dt.from_storage(out, name).astype(np.float64)
    np.testing.assert_array_equal(vals[:4], [fin, -fin, fin, -fin])
    assert np.isnan(vals[4]) and vals[5] == 1.0


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float16"])
def test_load_every_code(rng, name):
    """Every bit pattern (all 256 fp8 codes; a random sample of 16-bit ones) decodes exactly."""
    if name.startswith("float8"):
        bits = np.arange(256, dtype=np.uint8)
    else:
        bits = rng.integers(0, 1 << 16, 200).astype(np.uint16)
        bits[:4] = [0x7F80, 0xFF80, 0x0001, 0x8001] if name == "bfloat16" else \
            [0x7C00, 0xFC00, 0x0001, 0x8001]
    x = bits if name != "float16" else bits.view(np.float16)
    out = np.full(bits.size, np.nan, np.float32)
    _load_kernel(name)[2, 128](x, out)
    expected = dt.from_storage(bits, name).astype(np.float32) if name != "float16" else \
        x.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    ok = ~np.isnan(expected)
    np.testing.assert_array_equal(out[ok], expected[ok])


def test_names_and_compute_type():
    assert dt.dtype_name(ml_dtypes.bfloat16) == "bfloat16"
    assert dt.storage_dtype("bfloat16") == np.uint16
    assert dt.storage_dtype(ml_dtypes.float8_e5m2) == np.uint8
    assert dt.compute_type(["float64", np.float64]) == "float64"
    assert dt.compute_type(["float64", "float16"]) == "float32"
    with pytest.raises(ValueError):
        dt.dtype_name("complex64")
