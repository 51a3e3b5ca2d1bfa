"""reference.resample: pooling against explicit loops, hand cases, PyTorch-formula bilinear,
adjoint identities and finite differences for the backward."""
from fractions import Fraction
import math

import numpy as np
import pytest

from ncudnn.reference import resample_backward, resample_forward, resample_output_shape

F = Fraction


def loop_pool(x, kind, w, s, pre, post, pad_mode):
    """Direct loops over output positions and window taps, with explicit bounds handling."""
    D = x.ndim - 2
    out = [(x.shape[2 + d] + pre[d] + post[d] - w[d]) // s[d] + 1 for d in range(D)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for n, c in np.ndindex(*x.shape[:2]):
        for o in np.ndindex(*out):
            vals, inside = [], []
            for t in np.ndindex(*w):
                p = [o[d] * s[d] - pre[d] + t[d] for d in range(D)]
                ok = all(0 <= p[d] < x.shape[2 + d] for d in range(D))
                if ok:
                    vals.append(x[(n, c) + tuple(p)])
                elif pad_mode == "ZERO":
                    vals.append(0.0)
                elif pad_mode == "NEG_INF":
                    vals.append(-math.inf)
                else:
                    q = tuple(min(max(p[d], 0), x.shape[2 + d] - 1) for d in range(D))
                    vals.append(x[(n, c) + q])
                inside.append(ok)
            if kind == "max":
                y[(n, c) + o] = max(vals)
            elif kind == "avg_in":
                y[(n, c) + o] = sum(vals) / len(vals)
            else:
                iv = [v for v, k in zip(vals, inside) if k]
                y[(n, c) + o] = sum(iv) / len(iv) if iv else 0.0
    return y


CASES = [  # x shape, window, stride, pre, post
    ((2, 2, 7, 6), (3, 2), (2, 2), (1, 0), (1, 1)),
    ((1, 2, 5, 5), (2, 2), (1, 1), (1, 1), (1, 1)),
    ((1, 1, 4, 5, 6), (2, 3, 2), (2, 1, 2), (0, 1, 1), (1, 1, 0)),
    ((2, 3, 9), (4,), (3,), (2,), (2,)),
]
MODES = {"max": "MAXPOOL", "avg_in": "AVGPOOL_INCLUDE_PADDING", "avg_ex": "AVGPOOL_EXCLUDE_PADDING"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c[0]))
@pytest.mark.parametrize("kind", sorted(MODES))
@pytest.mark.parametrize("pad", ["ZERO", "NEG_INF", "EDGE"])
def test_pooling_matches_loops(case, kind, pad, rng):
    xs, w, s, pre, post = case
    x = rng.uniform(-1, 1, size=xs)
    pm = {"ZERO": "CUDNN_ZERO_PAD", "NEG_INF": "CUDNN_NEG_INF_PAD", "EDGE": "CUDNN_EDGE_VAL_PAD"}
    r = resample_forward(x, MODES[kind], w, s, pre, post, padding_mode=pm[pad])
    want = loop_pool(x, kind, w, s, pre, post, pad)
    if kind == "max":
        y, idx = r
        assert idx.shape == y.shape and idx.dtype == np.int64
        assert idx.min() >= 0 and idx.max() < np.prod(w)
        # the index names a window tap holding the max
        for n, c, *o in zip(*[a.ravel() for a in np.indices(y.shape)]):
            t = np.unravel_index(idx[(n, c) + tuple(o)], w)
            p = [o[d] * s[d] - pre[d] + t[d] for d in range(len(w))]
            if all(0 <= p[d] < xs[2 + d] for d in range(len(w))):
                assert x[(n, c) + tuple(p)] == y[(n, c) + tuple(o)]
    else:
        y = r
    np.testing.assert_allclose(y, want, rtol=1e-13)


def test_hand_cases():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    y, idx = resample_forward(x, "MAXPOOL", 2, 2, 0, 0)
    np.testing.assert_array_equal(y[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(idx[0, 0], [[3, 3], [3, 3]])
    y = resample_forward(x, "AVGPOOL", 2, 2, 0, 0)
    np.testing.assert_array_equal(y[0, 0], [[2.5, 4.5], [10.5, 12.5]])
    # 1-D pad 1: windows [pad,0], [1,2], [3,pad]
    x1 = np.array([[[2.0, 4.0, 6.0, 8.0]]])
    np.testing.assert_array_equal(resample_forward(x1, "AVGPOOL_INCLUDE_PADDING", 2, 2, 1, 1)[0, 0],
                                  [1.0, 5.0, 4.0])
    np.testing.assert_array_equal(resample_forward(x1, "AVGPOOL_EXCLUDE_PADDING", 2, 2, 1, 1)[0, 0],
                                  [2.0, 5.0, 8.0])
    # nearest, integer stride: subsampling
    np.testing.assert_array_equal(resample_forward(x, "NEAREST", 1, 2, 0, 0)[0, 0],
                                  [[0, 2], [8, 10]])
    # nearest 2x upsampling (stride 1/2, pre 1/4, post 1/4) repeats each element twice
    y = resample_forward(x1, "NEAREST", 1, F(1, 2), F(1, 4), F(1, 4))
    np.testing.assert_array_equal(y[0, 0], [2, 2, 4, 4, 6, 6, 8, 8])
    # bilinear, integer stride 1, window 2: the mean of neighbours
    np.testing.assert_array_equal(resample_forward(x1, "BILINEAR", 2, 1, 0, 0)[0, 0], [3, 5, 7])
    assert resample_output_shape((1, 1, 10, 7), (3, 2), (2, 2), (1, 0), (1, 1)) == (1, 1, 5, 4)


def torch_bilinear_up2(x):
    """PyTorch's align_corners=False bilinear upsampling by 2 (its published formula), 2-D."""
    N, C, H, W = x.shape
    y = np.zeros((N, C, 2 * H, 2 * W))

    def src(o, n):
        r = max((o + 0.5) / 2 - 0.5, 0.0)
        i0 = int(math.floor(r))
        return i0, min(i0 + 1, n - 1), r - i0
    for oh in range(2 * H):
        h0, h1, lh = src(oh, H)
        for ow in range(2 * W):
            w0, w1, lw = src(ow, W)
            y[:, :, oh, ow] = ((1 - lh) * ((1 - lw) * x[:, :, h0, w0] + lw * x[:, :, h0, w1])
                               + lh * ((1 - lw) * x[:, :, h1, w0] + lw * x[:, :, h1, w1]))
    return y


def test_bilinear_upsampling_matches_pytorch_formula(rng):
    x = rng.uniform(-1, 1, size=(2, 2, 3, 5))
    y = resample_forward(x, "BILINEAR", 2, F(1, 2), F(3, 4), F(3, 4),
                         padding_mode="CUDNN_EDGE_VAL_PAD")
    np.testing.assert_allclose(y, torch_bilinear_up2(x), rtol=1e-13, atol=1e-15)


def test_maxpool_nan_propagation():
    x = np.array([[[1.0, np.nan, 3.0, 2.0]]])
    y, idx = resample_forward(x, "MAXPOOL", 2, 2, 0, 0)
    np.testing.assert_array_equal(y[0, 0], [1.0, 3.0])
    y, idx = resample_forward(x, "MAXPOOL", 2, 2, 0, 0, nan_propagation="CUDNN_PROPAGATE_NAN")
    assert np.isnan(y[0, 0, 0]) and idx[0, 0, 0] == 1 and y[0, 0, 1] == 3.0


LINEAR = [  # mode, x shape, window, stride, pre, post, padding
    ("AVGPOOL_INCLUDE_PADDING", (1, 2, 5, 6), (2, 3), (2, 1), (1, 1), (1, 0), "CUDNN_ZERO_PAD"),
    ("AVGPOOL_INCLUDE_PADDING", (1, 2, 5, 6), (2, 3), (2, 1), (1, 1), (1, 0), "CUDNN_EDGE_VAL_PAD"),
    ("AVGPOOL_EXCLUDE_PADDING", (2, 1, 4, 3, 5), (2, 2, 3), (1, 2, 2), (1, 0, 1), (0, 1, 1),
     "CUDNN_ZERO_PAD"),
    ("NEAREST", (1, 2, 3, 4), (1, 1), (F(1, 2), F(1, 3)), (F(1, 4), 0), (F(3, 4), F(2, 3)),
     "CUDNN_ZERO_PAD"),
    ("BILINEAR", (1, 2, 3, 4), (2, 2), (F(1, 2), F(1, 2)), (F(3, 4),) * 2, (F(3, 4),) * 2,
     "CUDNN_EDGE_VAL_PAD"),
    ("BILINEAR", (1, 1, 3, 3, 4), (2, 2, 2), (F(1, 2), 1, F(2, 3)), (F(3, 4), 1, 0), (1, 0, 1),
     "CUDNN_ZERO_PAD"),
]


@pytest.mark.parametrize("case", LINEAR, ids=lambda c: f"{c[0]}-{c[-1]}")
def test_linear_modes_backward_is_adjoint(case, rng):
    mode, xs, w, s, pre, post, pad = case
    x = rng.uniform(-1, 1, size=xs)
    y = resample_forward(x, mode, w, s, pre, post, padding_mode=pad)
    dy = rng.uniform(-1, 1, size=y.shape)
    dx = resample_backward(dy, mode, w, s, pre, post, xs, padding_mode=pad)
    assert dx.shape == xs
    assert np.vdot(x, dx) == pytest.approx(np.vdot(y, dy), rel=1e-12)
    e = np.zeros(xs)
    i = tuple(int(rng.integers(0, n)) for n in xs)
    e[i] = 1.0
    assert dx[i] == pytest.approx(np.vdot(resample_forward(e, mode, w, s, pre, post,
                                                           padding_mode=pad), dy), abs=1e-13)


@pytest.mark.parametrize("pad", ["CUDNN_ZERO_PAD", "CUDNN_NEG_INF_PAD", "CUDNN_EDGE_VAL_PAD"])
def test_maxpool_backward_finite_difference(pad, rng):
    xs, w, s, pre, post = (2, 1, 5, 4), (3, 2), (2, 1), (1, 1), (1, 0)
    x = rng.uniform(-1, 1, size=xs)
    y, idx = resample_forward(x, "MAXPOOL", w, s, pre, post, padding_mode=pad)
    dy = rng.uniform(-1, 1, size=y.shape)
    dx = resample_backward(dy, "MAXPOOL", w, s, pre, post, xs, padding_mode=pad, index=idx)
    np.testing.assert_array_equal(
        dx, resample_backward(dy, "MAXPOOL", w, s, pre, post, xs, padding_mode=pad, x=x))
    h = 1e-7
    for i in np.ndindex(*xs):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        fd = (np.vdot(resample_forward(xp, "MAXPOOL", w, s, pre, post, padding_mode=pad)[0], dy)
              - np.vdot(resample_forward(xm, "MAXPOOL", w, s, pre, post, padding_mode=pad)[0],
                        dy)) / (2 * h)
        assert dx[i] == pytest.approx(fd, abs=1e-6)


def test_nearest_with_given_output_shape(rng):
    x = rng.uniform(-1, 1, size=(1, 1, 3))
    # stride 1/2, no padding: the formula gives 5 outputs; asking for 6 continues the grid
    y = resample_forward(x, "NEAREST", 1, F(1, 2), 0, 0, y_shape=(1, 1, 6),
                         padding_mode="CUDNN_EDGE_VAL_PAD")
    np.testing.assert_array_equal(y[0, 0], x[0, 0][[0, 1, 1, 2, 2, 2]])
    dy = rng.uniform(-1, 1, size=y.shape)
    dx = resample_backward(dy, "NEAREST", 1, F(1, 2), 0, 0, x.shape,
                           padding_mode="CUDNN_EDGE_VAL_PAD")
    assert np.vdot(dx, x) == pytest.approx(np.vdot(dy, y), rel=1e-13)
