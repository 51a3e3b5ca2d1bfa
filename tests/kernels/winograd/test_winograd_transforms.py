"""Winograd transform matrices: exact fractions derived from the interpolation points, checked to
reproduce the direct 3x3 correlation of a tile (exactly in rational arithmetic, to float64 rounding
in floating point); the generated transform kernels registered for the sm_90 compile check."""
from fractions import Fraction

import numpy as np
import pytest

from ncudnn.kernels.winograd import kernels as wk
from ncudnn.kernels.winograd.transforms import as_float, derive, transform


def _mat(a, b):
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def _t(a):
    return [list(r) for r in zip(*a)]


@pytest.mark.parametrize("m", [2, 4])
def test_exact_in_rationals(rng, m):
    t = transform(m)
    a = t.alpha
    d = [[Fraction(int(v), 7) for v in row] for row in rng.integers(-50, 50, (a, a))]
    g = [[Fraction(int(v), 3) for v in row] for row in rng.integers(-50, 50, (3, 3))]
    U = _mat(_mat(t.G, g), _t(t.G))
    V = _mat(_mat(t.BT, d), _t(t.BT))
    Mx = [[U[i][j] * V[i][j] for j in range(a)] for i in range(a)]
    Y = _mat(_mat(t.AT, Mx), _t(t.AT))
    direct = [[sum(g[r][s] * d[i + r][j + s] for r in range(3) for s in range(3)) for j in range(m)]
              for i in range(m)]
    assert Y == direct


@pytest.mark.parametrize("m", [2, 4])
def test_float64_tile_matches_direct_correlation(rng, m):
    t = transform(m)
    BT, G, AT = (as_float(getattr(t, n)) for n in ("BT", "G", "AT"))
    d, g = rng.standard_normal((t.alpha, t.alpha)), rng.standard_normal((3, 3))
    Y = AT @ ((G @ g @ G.T) * (BT @ d @ BT.T)) @ AT.T
    direct = np.array([[(d[i:i + 3, j:j + 3] * g).sum() for j in range(m)] for i in range(m)])
    np.testing.assert_allclose(Y, direct, rtol=0, atol=1e-12 * np.abs(d).max() * np.abs(g).max() * 9 * 64)


def test_known_entries_and_shapes():
    t2, t4 = transform(2), transform(4)
    assert (len(t2.BT), len(t2.G), len(t2.AT)) == (4, 4, 2)
    assert (len(t4.BT), len(t4.G), len(t4.AT)) == (6, 6, 4)
    # F(4x4, 3x3) with points 0, +-1, +-2: the 1/4, 1/6, 1/24 filter weights and integer B^T
    assert t4.G[0][0] == Fraction(1, 4) and Fraction(1, 24) in t4.G[3]
    assert all(v.denominator == 1 for row in t4.BT for v in row)
    assert t4.AT[3] == tuple(Fraction(v) for v in (0, 1, -1, 8, -8, 1))


def test_derive_validates_points():
    with pytest.raises(ValueError):
        derive(2, 3, (0, 1))
    with pytest.raises(ValueError):
        derive(2, 3, (0, 1, 1))
    # any distinct points give a correct (if less accurate) algorithm
    t = derive(2, 3, (0, 2, -Fraction(1, 2)))
    d, g = np.arange(16.0).reshape(4, 4) % 5, np.array([[1.0, -2, 3], [0, 1, 1], [2, 0, -1]])
    BT, G, AT = (as_float(getattr(t, n)) for n in ("BT", "G", "AT"))
    Y = AT @ ((G @ g @ G.T) * (BT @ d @ BT.T)) @ AT.T
    direct = np.array([[(d[i:i + 3, j:j + 3] * g).sum() for j in range(2)] for i in range(2)])
    np.testing.assert_allclose(Y, direct, atol=1e-12)


def test_generated_source_skips_zero_terms():
    src = wk.input_source(2, False)
    assert "* float32(" not in src                   # F(2x2, 3x3) input transform: adds only
    assert src.count("ld(x,") == 16
    assert wk.filter_source(4).count("u[uint64(") == 36


@pytest.mark.slow
def test_transform_kernels_compile_for_sm90():
    from ncudnn.kernels.runtime import compile_check
    from ncudnn.kernels.winograd import cases  # noqa: F401  (registers)

    names = [n for n in compile_check.registered_cases() if n.startswith("wino")]
    assert len(names) == 18
    res = compile_check.run_compile_check(names, jobs=4, timeout=1800)
    bad = [r.summary() for r in res if not r.ok]
    assert not bad, "\n".join(bad)
    assert all(r.spill_stores == 0 and r.stack_frame == 0 for r in res if r.cubin_info)
