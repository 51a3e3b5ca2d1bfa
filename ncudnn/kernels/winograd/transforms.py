"""Winograd F(m x m, r x r) transform matrices, derived from interpolation points as exact fractions.

The 1-D minimal filtering algorithm F(m, r) computes m outputs of an r-tap correlation
``y[i] = sum_k g[k] d[i + k]`` from ``alpha = m + r - 1`` inputs with alpha multiplications:

    y = A^T [ (G g) * (B^T d) ]

It is the transpose of the Toom-Cook linear convolution of an r-term and an m-term polynomial:
evaluate both at ``alpha - 1`` finite points and at infinity (the leading coefficient), multiply
pointwise, interpolate. With the evaluation matrix ``V[j, l] = p_j^l`` (row ``[0 .. 0 1]`` at
infinity) the interpolation is ``V^-1``; the diagonal ``D_j = 1 / prod_{l != j}(p_j - p_l)`` (1 at
infinity) is moved from the interpolation into G so that B^T stays integer for integer points:

* ``A^T[i, j] = p_j^i`` (infinity column: 1 in the last row),
* ``G[j, k] = D_j p_j^k`` (infinity row: 1 in the last column),
* ``B^T = (V^-1 D^-1)^T``.

In 2-D the algorithm nests: ``Y = A^T [ (G g G^T) * (B^T d B) ] A`` on an alpha x alpha input tile.
Points: F(2, 3) uses 0, 1, -1; F(4, 3) uses 0, 1, -1, 2, -2 (both with infinity); other point
sets can be passed to :func:`derive`. Everything is ``fractions.Fraction``; :func:`as_float`
converts for kernels and tests.
"""
from fractions import Fraction

import numpy as np

__all__ = ["WinogradTransform", "derive", "transform", "POINTS", "as_float"]

#: finite interpolation points per output tile size m (r = 3): alpha - 1 = m + 1 of them
POINTS = {
    2: (0, 1, -1),
    4: (0, 1, -1, 2, -2),
}


class WinogradTransform:
    """``m``, ``r``, ``alpha`` and the exact matrices ``BT`` (alpha x alpha), ``G`` (alpha x r),
    ``AT`` (m x alpha) as tuples of tuples of Fractions."""

    def __init__(self, m, r, points, BT, G, AT):
        self.m, self.r, self.alpha, self.points = m, r, m + r - 1, tuple(points)
        self.BT, self.G, self.AT = BT, G, AT

    def __repr__(self):
        return f"<F({self.m}x{self.m}, {self.r}x{self.r}) points {self.points} + inf>"


def _inverse(M):
    """Exact inverse of a square Fraction matrix (Gauss-Jordan)."""
    n = len(M)
    a = [list(row) + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(M)]
    for col in range(n):
        piv = next(r for r in range(col, n) if a[r][col] != 0)
        a[col], a[piv] = a[piv], a[col]
        inv = 1 / a[col][col]
        a[col] = [v * inv for v in a[col]]
        for r in range(n):
            if r != col and a[r][col] != 0:
                f = a[r][col]
                a[r] = [v - f * w for v, w in zip(a[r], a[col])]
    return [row[n:] for row in a]


def derive(m, r, points):
    """The F(m, r) matrices for ``alpha - 1`` distinct finite ``points`` (plus infinity)."""
    alpha = m + r - 1
    pts = [Fraction(p) for p in points]
    if len(pts) != alpha - 1 or len(set(pts)) != len(pts):
        raise ValueError(f"F({m}, {r}) needs {alpha - 1} distinct finite points, got {points}")
    V = [[p ** l for l in range(alpha)] for p in pts] + [[Fraction(int(l == alpha - 1)) for l in range(alpha)]]
    D = []
    for j, p in enumerate(pts):
        n = Fraction(1)
        for l, q in enumerate(pts):
            if l != j:
                n *= p - q
        D.append(1 / n)
    D.append(Fraction(1))
    Vi = _inverse(V)                               # columns: interpolation weights per point
    C = [[Vi[i][j] / D[j] for j in range(alpha)] for i in range(alpha)]   # V^-1 D^-1
    BT = tuple(tuple(C[i][j] for i in range(alpha)) for j in range(alpha))
    G = tuple(tuple(D[j] * p ** k for k in range(r)) for j, p in enumerate(pts)) + \
        (tuple(Fraction(int(k == r - 1)) for k in range(r)),)
    AT = tuple(tuple(p ** i for p in pts) + (Fraction(int(i == m - 1)),) for i in range(m))
    return WinogradTransform(m, r, pts, BT, G, AT)


_MEMO = {}


def transform(m, r=3):
    """The F(m x m, r x r) transform the kernels use (points from :data:`POINTS`)."""
    key = (m, r)
    if key not in _MEMO:
        if r != 3 or m not in POINTS:
            raise ValueError(f"F({m}, {r}): only F(2, 3) and F(4, 3) are provided")
        _MEMO[key] = derive(m, r, POINTS[m])
    return _MEMO[key]


def as_float(mat, dtype=np.float64):
    return np.array([[float(v) for v in row] for row in mat], dtype=dtype)
