"""reference.softmax against scalar math per row, hand values and finite differences."""
import math

import numpy as np
import pytest

from ncudnn.reference import log_softmax, softmax, softmax_backward


def test_hand_values():
    np.testing.assert_allclose(softmax([[0.0, math.log(3.0)]], 1), [[0.25, 0.75]], rtol=1e-15)
    np.testing.assert_allclose(log_softmax([0.0, 0.0], 0), [-math.log(2)] * 2, rtol=1e-15)
    # huge inputs do not overflow
    np.testing.assert_allclose(softmax([1000.0, 1000.0], -1), [0.5, 0.5])


@pytest.mark.parametrize("axis", [1, -1, (1, 2), 0])
def test_forward_matches_scalar_loop(axis, rng):
    x = rng.uniform(-4, 4, size=(2, 3, 4))
    y, ly = softmax(x, axis), log_softmax(x, axis)
    ax = tuple(a % 3 for a in np.atleast_1d(axis))
    keep = [d for d in range(3) if d not in ax]
    for idx in np.ndindex(*[x.shape[d] for d in keep]):
        sl = [slice(None)] * 3
        for d, i in zip(keep, idx):
            sl[d] = i
        vals = x[tuple(sl)].ravel()
        den = sum(math.exp(float(v)) for v in vals)
        np.testing.assert_allclose(y[tuple(sl)].ravel(), [math.exp(float(v)) / den for v in vals],
                                   rtol=1e-13)
        np.testing.assert_allclose(ly[tuple(sl)].ravel(),
                                   [float(v) - math.log(den) for v in vals], rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("axis", [-1, (0, 2)])
def test_backward_finite_difference(log, axis, rng):
    x = rng.uniform(-2, 2, size=(3, 2, 4))
    w = rng.uniform(-1, 1, size=x.shape)
    f = log_softmax if log else softmax
    dx = softmax_backward(f(x, axis), w, axis, log=log)
    h = 1e-6
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        fd = (np.sum(w * f(xp, axis)) - np.sum(w * f(xm, axis))) / (2 * h)
        assert dx[idx] == pytest.approx(fd, rel=1e-6, abs=1e-8)
