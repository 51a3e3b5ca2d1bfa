"""Convolution geometry on the host: shapes, element strides and parameters padded to 3 spatial dims.

1-D and 2-D problems become 3-D ones with leading size-1 spatial dims, so one set of loaders serves
every rank. Logical layouts are those of ncudnn.reference.conv: x (N, C, *S), w (K, C/groups, *F),
y (N, K, *O); physical layouts (NCHW, NHWC, anything else) are just the element strides.
"""
from dataclasses import dataclass


def _tup(v, n, name):
    t = (int(v),) * n if isinstance(v, int) else tuple(int(x) for x in v)
    if len(t) != n:
        raise ValueError(f"{name}: expected {n} values, got {t}")
    return t


def _pad3(t, fill):
    return (fill,) * (3 - len(t)) + tuple(t)


def packed_strides(shape, layout="nchw"):
    """Element strides of a packed tensor of logical shape (N, C, *S) stored NC*S or N*SC."""
    n = len(shape)
    if layout == "nchw":
        order = list(range(n))
    elif layout == "nhwc":
        order = [0] + list(range(2, n)) + [1]
    else:
        raise ValueError(layout)
    strides = [0] * n
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


@dataclass(frozen=True)
class ConvGeometry:
    N: int
    C: int
    K: int
    G: int
    DHW: tuple       # input spatial (D, H, W)
    TRS: tuple       # filter spatial (T, R, S)
    OPQ: tuple       # output spatial (O, P, Q)
    stride: tuple
    pad: tuple       # pre-padding (post-padding only shapes OPQ)
    dil: tuple
    flip: bool       # True: CONVOLUTION mode (filter flipped), False: CROSS_CORRELATION
    x_strides: tuple  # (n, c, d, h, w)
    w_strides: tuple  # (k, c, t, r, s)
    y_strides: tuple  # (n, k, o, p, q)

    @property
    def Cg(self):
        return self.C // self.G

    @property
    def Kg(self):
        return self.K // self.G

    @property
    def taps(self):
        T, R, S = self.TRS
        return T * R * S

    def gemm_fprop(self):
        """(M, N, K) of the per-group implicit GEMM of fprop."""
        O, P, Q = self.OPQ
        return self.N * O * P * Q, self.Kg, self.Cg * self.taps

    def gemm_dgrad(self):
        D, H, W = self.DHW
        return self.N * D * H * W, self.Cg, self.Kg * self.taps

    def gemm_wgrad(self):
        O, P, Q = self.OPQ
        return self.Kg, self.Cg * self.taps, self.N * O * P * Q


def geometry(x_shape, w_shape, *, stride=1, pre_pad=0, post_pad=0, dilation=1, groups=1,
             cross_correlation=True, x_strides=None, w_strides=None, y_strides=None):
    """A :class:`ConvGeometry` for logical shapes x (N, C, *S), w (K, C/groups, *F) with 1-3 spatial
    dims; strides in elements (default packed NC*S). Raises ValueError on inconsistent input."""
    x_shape, w_shape = tuple(int(v) for v in x_shape), tuple(int(v) for v in w_shape)
    nsp = len(x_shape) - 2
    if nsp not in (1, 2, 3) or len(w_shape) != len(x_shape):
        raise ValueError(f"x {x_shape} / w {w_shape}: need 1-3 spatial dims and equal rank")
    N, C = x_shape[:2]
    K, Cg = w_shape[:2]
    if groups < 1 or C % groups or K % groups or Cg != C // groups:
        raise ValueError(f"channels: x C={C}, w {w_shape}, groups={groups}")
    s, pre, post, d = (_tup(v, nsp, n) for v, n in ((stride, "stride"), (pre_pad, "pre_pad"),
                                                     (post_pad, "post_pad"), (dilation, "dilation")))
    if min(s) < 1 or min(d) < 1 or min(pre) < 0 or min(post) < 0:
        raise ValueError("strides/dilations must be >= 1 and paddings >= 0")
    out = []
    for i in range(nsp):
        o = (x_shape[2 + i] + pre[i] + post[i] - ((w_shape[2 + i] - 1) * d[i] + 1)) // s[i] + 1
        if o < 1:
            raise ValueError(f"spatial dim {i}: empty output")
        out.append(o)
    y_shape = (N, K) + tuple(out)
    xs = x_strides or packed_strides(x_shape)
    ws = w_strides or packed_strides(w_shape)
    ys = y_strides or packed_strides(y_shape)

    def st(t):
        t = tuple(int(v) for v in t)
        if len(t) != nsp + 2:
            raise ValueError(f"strides {t}: expected {nsp + 2} values")
        return t[:2] + _pad3(t[2:], 0)

    return ConvGeometry(N, C, K, int(groups), _pad3(x_shape[2:], 1), _pad3(w_shape[2:], 1),
                        _pad3(out, 1), _pad3(s, 1), _pad3(pre, 0), _pad3(d, 1),
                        not cross_correlation, st(xs), st(ws), st(ys))


def output_shape(g, nsp):
    return (g.N, g.K) + g.OPQ[3 - nsp:]


def extent(shape, strides):
    """Elements a strided tensor spans (max offset + 1)."""
    return sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + 1
