"""reference.paged: paged cache gather against an element loop and a hand case."""
import numpy as np
import pytest

from ncudnn.reference import paged_cache_load


def test_hand_case():
    cont = np.arange(3 * 1 * 2 * 1, dtype=float).reshape(3, 1, 2, 1)  # page p holds 2p, 2p+1
    y = paged_cache_load(cont, [[2, 0], [1, 1]], [3, 2])
    np.testing.assert_array_equal(y[0, 0, :, 0], [4, 5, 0, 0])
    np.testing.assert_array_equal(y[1, 0, :, 0], [2, 3, 0, 0])


def test_matches_loop(rng):
    P, H, page, D, B, maxp = 7, 2, 3, 4, 3, 3
    cont = rng.uniform(-1, 1, size=(P, H, page, D))
    table = rng.integers(0, P, size=(B, 1, maxp, 1))
    seq = np.array([9, 4, 1]).reshape(B, 1, 1, 1)
    y = paged_cache_load(cont, table, seq)
    assert y.shape == (B, H, maxp * page, D)
    for b, h, s in np.ndindex(B, H, maxp * page):
        want = cont[table[b, 0, s // page, 0], h, s % page] if s < seq.ravel()[b] else 0.0
        np.testing.assert_array_equal(y[b, h, s], want)
    with pytest.raises(ValueError):
        paged_cache_load(cont, np.full((B, maxp), P), seq)
