"""Philox4x32-10 RNG kernel: bit-exact against the oracle stream (reference.rng), NumPy Philox with
known answers, statistics."""
import math

import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.rng import philox
from ncudnn.kernels.runtime.dtypes import from_storage, storage_dtype
from ncudnn.reference import rng as ref_rng
from ncudnn.testing import assert_close
from ncudnn.types import cudnnRngDistribution_t as RD

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF


def np_philox(ctr, key):
    """Philox4x32-10 on uint64 arrays holding 32-bit words: ctr (4, n), key (2,)."""
    c = [np.asarray(v, np.uint64) for v in ctr]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for r in range(10):
        p0 = np.uint64(M0) * c[0]
        p1 = np.uint64(M1) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & np.uint64(MASK),
             (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & np.uint64(MASK)]
        k0 = (k0 + np.uint64(W0)) & np.uint64(MASK)
        k1 = (k1 + np.uint64(W1)) & np.uint64(MASK)
    return c


def test_numpy_philox_known_answers():
    """Random123's published Philox4x32-10 test vectors."""
    zero = np_philox([[0], [0], [0], [0]], (0, 0))
    assert [int(v[0]) for v in zero] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    ones = np_philox([[MASK]] * 4, (MASK, MASK))
    assert [int(v[0]) for v in ones] == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def _fill(n, dist, seed, offset, dtype="float32", **kw):
    out = cuda.to_device(np.zeros(n, storage_dtype(dtype)) if dist == philox.RAW_BITS else
                         np.full(n, np.nan, storage_dtype(dtype)))
    philox.rng_fill(out, n, dist, seed, offset, out_dtype=dtype, block=32, **kw)
    return out.copy_to_host()


@pytest.mark.parametrize("offset", [0, 5, 2 ** 33 + 2], ids=["aligned", "odd", "high-word"])
def test_raw_words_match_the_oracle_stream(rng, offset):
    seed = int(rng.integers(0, 2 ** 64, dtype=np.uint64))
    n = 203   # a ragged tail, several grid-stride passes in the simulator
    got = _fill(n, philox.RAW_BITS, seed, offset, "uint32")
    np.testing.assert_array_equal(got, ref_rng.philox_words(seed, offset, n))
    blocks = np.arange(offset // 4, offset // 4 + 60, dtype=np.uint64)
    words = np.stack(np_philox([blocks & np.uint64(MASK), blocks >> np.uint64(32),
                                np.zeros(60, np.uint64), np.zeros(60, np.uint64)],
                               (seed & MASK, seed >> 32)), 1).reshape(-1)
    np.testing.assert_array_equal(got[:100], words[offset % 4:offset % 4 + 100])


@pytest.mark.parametrize("offset", [0, 3])
def test_uniform_bit_exact(rng, offset):
    seed = int(rng.integers(0, 2 ** 63))
    n = 257
    got = _fill(n, RD.CUDNN_RNG_DISTRIBUTION_UNIFORM, seed, offset, low=-2.0, high=3.0)
    expected = ref_rng.rng_generate((n,), RD.CUDNN_RNG_DISTRIBUTION_UNIFORM, seed, offset,
                                    uniform_min=-2.0, uniform_max=3.0)
    np.testing.assert_array_equal(got, expected.astype(np.float32))
    assert got.min() >= -2.0 and got.max() <= 3.0


@pytest.mark.parametrize("offset", [0, 7], ids=["even", "odd-straddles-blocks"])
def test_normal_matches_oracle_and_statistics(rng, offset):
    seed = int(rng.integers(0, 2 ** 63))
    n = 2049
    a = _fill(n, RD.CUDNN_RNG_DISTRIBUTION_NORMAL, seed, offset, mean=1.5, std=2.0)
    expected = ref_rng.rng_generate((n,), RD.CUDNN_RNG_DISTRIBUTION_NORMAL, seed, offset,
                                    normal_mean=1.5, normal_std=2.0)
    assert_close(a, expected, "float32")
    assert abs(a.mean() - 1.5) < 5 * 2.0 / math.sqrt(n)
    assert abs(a.std() - 2.0) < 0.15
    b = _fill(n, RD.CUDNN_RNG_DISTRIBUTION_NORMAL, seed, offset + n + 1, mean=1.5, std=2.0)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.15   # a disjoint part of the stream: unrelated
    np.testing.assert_array_equal(a, _fill(n, RD.CUDNN_RNG_DISTRIBUTION_NORMAL, seed, offset,
                                           mean=1.5, std=2.0))   # deterministic


def test_bernoulli_fp16(rng):
    seed = int(rng.integers(0, 2 ** 63))
    n = 4096
    got = from_storage(_fill(n, RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI, seed, 3, "float16",
                             prob=0.3), "float16").astype(np.float64)
    assert set(np.unique(got)) <= {0.0, 1.0}
    assert abs(got.mean() - 0.3) < 5 * math.sqrt(0.3 * 0.7 / n)
    expected = ref_rng.rng_generate((n,), RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI, seed, 3,
                                    bernoulli_probability=0.3)
    np.testing.assert_array_equal(got, expected)
