"""reference.lrn against a direct channel loop and finite differences."""
import numpy as np
import pytest

from ncudnn.reference import lrn_backward, lrn_forward


@pytest.mark.parametrize("n", [1, 3, 4, 5])
def test_forward_loop_and_backward_fd(n, rng):
    x = rng.uniform(-2, 2, size=(2, 6, 3))
    alpha, beta, k = 0.7, 0.75, 1.5
    y = lrn_forward(x, n, alpha, beta, k)
    lb = (n - 1) // 2
    for b, c, s in np.ndindex(*x.shape):
        js = [j for j in range(c - lb, c - lb + n) if 0 <= j < 6]
        d = k + alpha / n * sum(float(x[b, j, s]) ** 2 for j in js)
        assert y[b, c, s] == pytest.approx(x[b, c, s] * d ** -beta, rel=1e-13)
    dy = rng.uniform(-1, 1, size=x.shape)
    dx = lrn_backward(x, dy, n, alpha, beta, k)
    h = 1e-6
    for i in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        fd = (np.vdot(lrn_forward(xp, n, alpha, beta, k), dy)
              - np.vdot(lrn_forward(xm, n, alpha, beta, k), dy)) / (2 * h)
        assert dx[i] == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_hand_case():
    # n = 4: window of channel 0 is [-1, 2] -> channels 0, 1, 2
    x = np.array([[[1.0], [2.0], [3.0], [4.0]]])
    y = lrn_forward(x, 4, 4.0, 1.0, 1.0)
    assert y[0, 0, 0] == pytest.approx(1.0 / (1 + 1 + 4 + 9))
    assert y[0, 3, 0] == pytest.approx(4.0 / (1 + 9 + 16))
