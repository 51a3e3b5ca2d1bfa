"""reference.spatial_tf: identity / shift cases, a scalar bilinear loop and finite differences."""
import math

import numpy as np
import pytest

from ncudnn import reference as R

IDENT = np.array([[[1.0, 0, 0], [0, 1.0, 0]]])


def test_identity_and_shift(rng):
    x = rng.uniform(-1, 1, size=(1, 2, 4, 5))
    grid = R.spatial_tf_grid_forward(IDENT, 4, 5)
    assert grid.shape == (1, 4, 5, 2)
    assert grid[0, 0, 0].tolist() == [-1.0, -1.0] and grid[0, 3, 4].tolist() == [1.0, 1.0]
    np.testing.assert_allclose(R.spatial_tf_sampler_forward(x, grid), x, rtol=1e-14, atol=1e-15)
    # shift right by one pixel in x: 2 / (W - 1) normalized units; last column reads outside -> 0
    th = IDENT.copy()
    th[0, 0, 2] = 2.0 / 4
    y = R.spatial_tf_sampler_forward(x, R.spatial_tf_grid_forward(th, 4, 5))
    np.testing.assert_allclose(y[..., :4], x[..., 1:], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(y[..., 4], 0.0, atol=1e-15)


def test_sampler_matches_scalar_loop(rng):
    x = rng.uniform(-1, 1, size=(2, 2, 3, 4))
    grid = rng.uniform(-1.3, 1.3, size=(2, 2, 3, 2))
    y = R.spatial_tf_sampler_forward(x, grid)
    for n, c, h, w in np.ndindex(*y.shape):
        ix = (grid[n, h, w, 0] + 1) / 2 * 3
        iy = (grid[n, h, w, 1] + 1) / 2 * 2
        x0, y0 = math.floor(ix), math.floor(iy)
        acc = 0.0
        for yy in (y0, y0 + 1):
            for xx in (x0, x0 + 1):
                if 0 <= yy < 3 and 0 <= xx < 4:
                    acc += (1 - abs(ix - xx)) * (1 - abs(iy - yy)) * x[n, c, yy, xx]
        assert y[n, c, h, w] == pytest.approx(acc, rel=1e-13, abs=1e-15)


def _fd(f, a, h=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(*a.shape):
        ap, am = a.copy(), a.copy()
        ap[i] += h
        am[i] -= h
        g[i] = (f(ap) - f(am)) / (2 * h)
    return g


def test_backward_finite_difference(rng):
    x = rng.uniform(-1, 1, size=(2, 2, 3, 4))
    theta = IDENT.repeat(2, 0) + rng.uniform(-0.3, 0.3, size=(2, 2, 3))
    grid = R.spatial_tf_grid_forward(theta, 3, 3)
    dy = rng.uniform(-1, 1, size=(2, 2, 3, 3))
    dx, dgrid = R.spatial_tf_sampler_backward(x, grid, dy)
    np.testing.assert_allclose(
        dx, _fd(lambda a: np.vdot(R.spatial_tf_sampler_forward(a, grid), dy), x), rtol=1e-6,
        atol=1e-8)
    np.testing.assert_allclose(
        dgrid, _fd(lambda a: np.vdot(R.spatial_tf_sampler_forward(x, a), dy), grid), rtol=1e-5,
        atol=1e-7)
    dtheta = R.spatial_tf_grid_backward(dgrid)
    np.testing.assert_allclose(
        dtheta, _fd(lambda a: np.vdot(R.spatial_tf_sampler_forward(
            x, R.spatial_tf_grid_forward(a, 3, 3)), dy), theta), rtol=1e-5, atol=1e-7)
