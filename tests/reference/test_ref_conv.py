"""reference.conv: hand cases, an independent direct-loop convolution, and the adjoint identities."""
import numpy as np
import pytest

from ncudnn.reference import conv_dgrad, conv_fprop, conv_output_shape, conv_wgrad


def direct_conv(x, w, stride, pre, dil, groups, out, xcorr=True):
    """Plain loops with bounds checks (no padding arrays): y[n,k,o] = sum w * x[o*s + f*d - pre]."""
    N, C = x.shape[:2]
    K, Cg = w.shape[:2]
    F = w.shape[2:]
    y = np.zeros((N, K) + tuple(out))
    for n in range(N):
        for k in range(K):
            g = k // (K // groups)
            for o in np.ndindex(*out):
                acc = 0.0
                for c in range(Cg):
                    for f in np.ndindex(*F):
                        pos = [o[i] * stride[i] + f[i] * dil[i] - pre[i] for i in range(len(F))]
                        if all(0 <= p < x.shape[2 + i] for i, p in enumerate(pos)):
                            ff = f if xcorr else tuple(F[i] - 1 - f[i] for i in range(len(F)))
                            acc += w[(k, c) + ff] * x[(n, g * Cg + c) + tuple(pos)]
                y[(n, k) + o] = acc
    return y


CASES = [  # x shape, w shape, stride, pre, post, dilation, groups
    ((2, 3, 7), (4, 3, 3), (2,), (1,), (2,), (1,), 1),
    ((1, 4, 6, 5), (6, 2, 3, 2), (1, 2), (1, 0), (0, 1), (2, 1), 2),
    ((2, 2, 5, 6), (2, 2, 2, 3), (2, 1), (0, 2), (1, 1), (1, 2), 1),
    ((1, 4, 4, 3, 5), (4, 1, 2, 2, 3), (1, 2, 1), (1, 1, 0), (0, 1, 2), (1, 1, 2), 4),
    ((1, 3, 5, 5), (2, 3, 1, 1), (3, 2), (0, 0), (0, 0), (1, 1), 1),
]


def _kw(case):
    _, _, s, pre, post, d, g = case
    return dict(stride=s, pre_pad=pre, post_pad=post, dilation=d, groups=g)


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c[0]))
@pytest.mark.parametrize("xcorr", [True, False])
def test_fprop_matches_direct_loops(case, xcorr, rng):
    xs, ws, s, pre, post, d, g = case
    x, w = rng.uniform(-1, 1, size=xs), rng.uniform(-1, 1, size=ws)
    y = conv_fprop(x, w, cross_correlation=xcorr, **_kw(case))
    out = [(xs[2 + i] + pre[i] + post[i] - (ws[2 + i] - 1) * d[i] - 1) // s[i] + 1
           for i in range(len(s))]
    assert y.shape == (xs[0], ws[0]) + tuple(out)
    np.testing.assert_allclose(y, direct_conv(x, w, s, pre, d, g, out, xcorr), rtol=1e-12,
                               atol=1e-13)


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c[0]))
@pytest.mark.parametrize("xcorr", [True, False])
def test_adjoint_identities(case, xcorr, rng):
    xs, ws = case[:2]
    kw = dict(_kw(case), cross_correlation=xcorr)
    x, w = rng.uniform(-1, 1, size=xs), rng.uniform(-1, 1, size=ws)
    ys = conv_output_shape(xs, ws, **_kw(case))
    dy = rng.uniform(-1, 1, size=ys)
    lhs = np.vdot(conv_fprop(x, w, **kw), dy)
    dx = conv_dgrad(dy, w, xs, **kw)
    dw = conv_wgrad(x, dy, ws, **kw)
    assert dx.shape == xs and dw.shape == ws
    assert np.vdot(x, dx) == pytest.approx(lhs, rel=1e-12)
    assert np.vdot(w, dw) == pytest.approx(lhs, rel=1e-12)
    # and element-wise: dgrad/wgrad are linear maps, so probe single entries as well
    e = np.zeros(xs)
    idx = tuple(int(rng.integers(0, n)) for n in xs)
    e[idx] = 1.0
    assert dx[idx] == pytest.approx(np.vdot(conv_fprop(e, w, **kw), dy), rel=1e-12, abs=1e-14)


def test_hand_case_1d_and_2d():
    # 1-D: x = [1,2,3,4], w = [1,0,-1], pad 1 both sides, stride 1 -> [-2,-2,-2,3]
    y = conv_fprop(np.array([[[1.0, 2, 3, 4]]]), np.array([[[1.0, 0, -1]]]), pre_pad=1, post_pad=1)
    np.testing.assert_array_equal(y[0, 0], [-2.0, -2.0, -2.0, 3.0])
    # convolution mode flips: w = [1,0,-1] flipped is [-1,0,1]
    y = conv_fprop(np.array([[[1.0, 2, 3, 4]]]), np.array([[[1.0, 0, -1]]]), pre_pad=1,
                   post_pad=1, cross_correlation=False)
    np.testing.assert_array_equal(y[0, 0], [2.0, 2.0, 2.0, -3.0])
    # 2-D, 3x3 input, 2x2 ones filter, stride 1, no pad: sums of 2x2 blocks
    x = np.arange(9.0).reshape(1, 1, 3, 3)
    y = conv_fprop(x, np.ones((1, 1, 2, 2)))
    np.testing.assert_array_equal(y[0, 0], [[8.0, 12.0], [20.0, 24.0]])
    # stride 2, dilation 2 on 5 wide: positions 0,2,4 -> only o=0 -> x0 + x2 + x4
    y = conv_fprop(np.array([[[1.0, 2, 3, 4, 5]]]), np.ones((1, 1, 3)), stride=2, dilation=2)
    np.testing.assert_array_equal(y, [[[9.0]]])
    # dgrad of that: each tapped position gets dy
    dx = conv_dgrad(np.array([[[2.0]]]), np.ones((1, 1, 3)), (1, 1, 5), stride=2, dilation=2)
    np.testing.assert_array_equal(dx[0, 0], [2.0, 0, 2.0, 0, 2.0])


def test_output_shape_errors():
    with pytest.raises(ValueError):
        conv_output_shape((1, 3, 2, 2), (1, 3, 3, 3))  # filter larger than input
    with pytest.raises(ValueError):
        conv_output_shape((1, 4, 5, 5), (2, 3, 3, 3), groups=2)
    assert conv_output_shape((1, 4, 5, 5), (6, 2, 3, 3), groups=2, pre_pad=1, post_pad=1,
                             stride=2) == (1, 6, 3, 3)
