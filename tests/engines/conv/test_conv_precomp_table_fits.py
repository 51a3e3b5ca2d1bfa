"""The IMPLICIT_PRECOMP_GEMM support verdict decided in closed form (conv_common.table_fits) equals
the one building the offset table gives (verdict and reason), on random geometries drawn fresh each
run: 1-3 spatial dims, strides, dilations past the 10-bit tap coordinates, element strides past
int32, negative strides, fprop / dgrad (crs / rsc order) / wgrad."""
from types import SimpleNamespace

from ncudnn.engines.conv.common import table_fits, table_fits_built
from ncudnn.kernels.conv import geometry


def _draw(rng):
    nsp = int(rng.integers(1, 4))
    N, G = int(rng.integers(1, 4)), int(rng.choice([1, 1, 2]))
    C, K = G * int(rng.integers(1, 5)), G * int(rng.integers(1, 5))
    F = [int(rng.choice([1, 2, 3, 5])) for _ in range(nsp)]
    dil = [int(rng.choice([1, 2, 300, 600])) for _ in range(nsp)]
    stride = [int(rng.choice([1, 2, 3, 400, 1100])) for _ in range(nsp)]
    pad = [int(rng.integers(0, 3)) for _ in range(nsp)]
    S = [max(int(rng.integers(1, 9)), (f - 1) * d + 1 - 2 * p) + int(rng.integers(0, 2400) if rng.random() < 0.3 else 0)
         for f, d, p in zip(F, dil, pad)]
    big = lambda: int(rng.choice([1, 7, 1 << 20, 1 << 28, 3 << 29])) * int(rng.choice([1, 1, -1]))  # noqa: E731
    x_dims, w_dims = (N, C, *S), (K, C // G, *F)
    g = geometry(x_dims, w_dims, stride=stride, pre_pad=pad, post_pad=pad, dilation=dil, groups=G,
                 cross_correlation=bool(rng.integers(2)), x_strides=[big() for _ in x_dims],
                 w_strides=[big() for _ in w_dims], y_strides=[big() for _ in range(nsp + 2)])
    return g


def test_closed_form_equals_the_built_table(rng):
    seen = set()
    n = 0
    while n < 300:
        try:
            g = _draw(rng)
        except ValueError:
            continue
        if g.N * g.C * g.taps * 3 > 200_000 or g.N * g.K * int(__import__("math").prod(g.OPQ)) > 200_000:
            continue
        n += 1
        for kind in ("fprop", "dgrad", "wgrad"):
            for order in (("crs", "rsc") if kind != "wgrad" else ("crs",)):
                p = SimpleNamespace(g=g, kind=kind, order=order)
                want = table_fits_built(p)
                assert table_fits(p) == want, (g, kind, order)
                seen.add(want[1].split(" ")[1] if not want[0] else "ok")
    assert {"ok", "coordinates", "offsets"} <= seen, seen
