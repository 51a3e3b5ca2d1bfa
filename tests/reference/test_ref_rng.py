"""reference.rng: Philox4x32-10 known answers (Random123) and the stream / distribution contract."""
import math

import numpy as np
import pytest

from ncudnn.reference import philox4x32_10, philox_uniform, philox_words, rng_generate

KAT = [  # counter, key, result: the Random123 kat_vectors for philox4x32 with 10 rounds
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_philox_known_answers(ctr, key, want):
    got = philox4x32_10(ctr, key)
    assert got.dtype == np.uint32
    assert [int(v) for v in got] == want


def test_batched_philox_equals_single_calls(rng):
    ctr = rng.integers(0, 2 ** 32, size=(5, 4), dtype=np.uint64)
    key = rng.integers(0, 2 ** 32, size=(5, 2), dtype=np.uint64)
    batch = philox4x32_10(ctr, key)
    for i in range(5):
        np.testing.assert_array_equal(batch[i], philox4x32_10(ctr[i], key[i]))


def test_word_stream_layout(rng):
    seed = int(rng.integers(0, 2 ** 63))
    w = philox_words(seed, 0, 12)
    key = [seed & 0xFFFFFFFF, seed >> 32]
    for blk in range(3):
        np.testing.assert_array_equal(w[4 * blk:4 * blk + 4], philox4x32_10([blk, 0, 0, 0], key))
    off = int(rng.integers(0, 1000))
    np.testing.assert_array_equal(philox_words(seed, off, 9)[3:], philox_words(seed, off + 3, 6))
    # the counter carries into its second word past 2^32 blocks
    big = philox_words(seed, 4 * 2 ** 32, 4)
    np.testing.assert_array_equal(big, philox4x32_10([0, 1, 0, 0], key))


def test_uniform_mapping():
    u = philox_uniform(np.array([0, 1, 2 ** 31, 2 ** 32 - 1], dtype=np.uint32))
    assert u[0] == np.float32(2.0 ** -33)
    assert u[1] == np.float32(1.5 * 2.0 ** -32)
    assert u[2] == 0.5  # float32 rounding of 0.5 + 2^-33
    assert u[3] == 1.0  # rounds up to 1: curand_uniform's range is (0, 1]


def test_distributions(rng):
    seed, off = int(rng.integers(0, 2 ** 40)), int(rng.integers(0, 100))
    n = 40000
    u = rng_generate((200, 200), "UNIFORM", seed, off, uniform_min=-2.0, uniform_max=3.0)
    words = philox_words(seed, off, n)
    np.testing.assert_array_equal(u.ravel(), -2.0 + 5.0 * philox_uniform(words))
    assert abs(u.mean() - 0.5) < 0.05 and u.min() > -2.0 and u.max() <= 3.0
    b = rng_generate((n,), "CUDNN_RNG_DISTRIBUTION_BERNOULLI", seed, off, bernoulli_probability=0.3)
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
    np.testing.assert_array_equal(b, philox_uniform(words) <= 0.3)
    assert rng_generate((50,), "BERNOULLI", seed, bernoulli_probability=0.0).sum() == 0
    assert rng_generate((50,), "BERNOULLI", seed, bernoulli_probability=1.0).sum() == 50
    z = rng_generate((n + 1,), "NORMAL", seed, off, normal_mean=1.0, normal_std=2.0)
    assert abs(z.mean() - 1.0) < 0.05 and abs(z.std() - 2.0) < 0.05
    w = philox_words(seed, off, 4)
    s = math.sqrt(-2 * math.log(float(np.float32((int(w[2]) + 0.5) * 2.0 ** -32))))
    ang = (int(w[3]) + 0.5) * 2.0 ** -32 * 2 * math.pi
    assert z[2] == pytest.approx(1.0 + 2.0 * s * math.sin(ang), rel=1e-14)
    assert z[3] == pytest.approx(1.0 + 2.0 * s * math.cos(ang), rel=1e-14)
