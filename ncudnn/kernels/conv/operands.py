"""Implicit-GEMM loaders: the A/B operands and outputs that turn the GEMM mainloop into a conv.

The GEMM reduction index ``kidx`` walks (channel, t, r, s) in ORDER "crs" (channel slowest: packed
NCHW / KCRS friendly) or "rsc" (channel fastest: NHWC / KRSC friendly). ``tap`` splits it. With
PRECOMP a host table (see table.py) holds, per kidx, ``[act_delta, t*dil_d, r*dil_h, s*dil_w,
w_delta]`` and replaces every division of the split; without it they are computed in the loader
(IMPLICIT_GEMM).

fprop (M = N*O*P*Q, N = K/G, K = C/G*T*R*S): A = x gathered at (o*stride - pad + t*dil), B = w.
dgrad (M = N*D*H*W, N = C/G, K = K/G*T*R*S): A = dy gathered where (d + pad - t*dil) is a
  multiple of the stride (STRIDE is compile-time), B = w; this gather form is exact for any stride.
wgrad (M = K/G, N = C/G*T*R*S, K = N*O*P*Q): A = dy, B = x gathered.
The batch index z of the block kernel is the group. Filter flip (CONVOLUTION mode) is applied to
the filter offsets: taps (t, r, s) read w at (T-1-t, R-1-r, S-1-s).
"""
from numba import cuda, float32, float64, int64, uint64

from ..runtime import dtypes
from ..gemm.operands import Operand, Output
from .table import BITS, ENTRY

MASK = (1 << BITS) - 1

_CACHE = {}


def _cached(key, build):
    if key not in _CACHE:
        _CACHE[key] = build()
    return _CACHE[key]


@cuda.jit(device=True, inline=True)
def unpack3(v):
    """pack3 word -> (d, h, w) as int64."""
    v = int64(v)
    return v >> (2 * BITS), (v >> BITS) & MASK, v & MASK


@cuda.jit(device=True, inline=True)
def split4(m, A, B, C):
    """m = ((n*A + a)*B + b)*C + c -> (n, a, b, c)."""
    c = m % C
    m = m // C
    b = m % B
    m = m // B
    a = m % A
    return m // A, a, b, c


def make_tap(order):
    CRS = order == "crs"

    @cuda.jit(device=True, inline=True)
    def tap(kidx, CH, T, R, S):
        """kidx -> (channel, t, r, s)."""
        if CRS:
            return split4(kidx, T, R, S)
        t, r, s, ch = split4(kidx, R, S, CH)     # kidx = ((t*R + r)*S + s)*CH + ch
        return ch, t, r, s
    return tap


def _acc(ftype):
    return float64 if ftype == "float64" else float32


# ---------------------------------------------------------------- fprop
def fprop_x(dtype, ftype, fast, order, precomp):
    """A of fprop. a = (x, table, sx_n, sx_c, sx_d, sx_h, sx_w, D, H, W, O, P, Q, str_d, str_h,
    str_w, pad_d, pad_h, pad_w, Cg, T, R, S, dil_d, dil_h, dil_w); state (offset, d0, h0, w0)."""
    def build():
        ld, ACC, tap = dtypes.loader(dtype, ftype), _acc(ftype), make_tap(order)

        @cuda.jit(device=True, inline=True)
        def setup(a, z, m):
            n, o, p, q = split4(m, a[10], a[11], a[12])
            d0 = o * a[13] - a[16]
            h0 = p * a[14] - a[17]
            w0 = q * a[15] - a[18]
            off = n * a[2] + z * a[19] * a[3] + d0 * a[4] + h0 * a[5] + w0 * a[6]
            return (int64(off), int64(d0), int64(h0), int64(w0))

        @cuda.jit(device=True, inline=True)
        def load(a, off, d0, h0, w0, kidx):
            if precomp:
                tab = a[1]
                e = uint64(kidx * ENTRY)
                delta = int64(tab[e])
                td, tr, ts = unpack3(tab[e + uint64(1)])
                d = d0 + td
                h = h0 + tr
                w = w0 + ts
            else:
                c, t, r, s = tap(kidx, a[19], a[20], a[21], a[22])
                dt, dr, ds = t * a[23], r * a[24], s * a[25]
                d, h, w = d0 + dt, h0 + dr, w0 + ds
                delta = c * a[3] + dt * a[4] + dr * a[5] + ds * a[6]
            if 0 <= d < a[7] and 0 <= h < a[8] and 0 <= w < a[9]:
                return ld(a[0], uint64(off + delta))
            return ACC(0)
        return Operand(("conv_fprop_x", dtype, ftype, fast, order, precomp), fast, setup, load)
    return _cached(("fprop_x", dtype, ftype, fast, order, precomp), build)


def filter_operand(dtype, ftype, fast, order, precomp):
    """B of fprop and dgrad: w at (outer channel, kidx). b = (w, table, s_outer, s_outer_group,
    s_ch, s_t, s_r, s_s, CH, T, R, S, flip, OUTER_G); s_outer is the stride of the GEMM N index
    (w's k for fprop, c for dgrad), s_ch that of the channel in kidx; OUTER_G = outer per group."""
    def build():
        ld, tap = dtypes.loader(dtype, ftype), make_tap(order)

        @cuda.jit(device=True, inline=True)
        def setup(b, z, n):
            return (int64(n * b[2] + z * b[13] * b[3]), int64(0), int64(0), int64(0))

        @cuda.jit(device=True, inline=True)
        def load(b, off, s1, s2, s3, kidx):
            if precomp:
                return ld(b[0], uint64(off + b[1][uint64(kidx * ENTRY + 2)]))
            ch, t, r, s = tap(kidx, b[8], b[9], b[10], b[11])
            if b[12]:
                t, r, s = b[9] - 1 - t, b[10] - 1 - r, b[11] - 1 - s
            return ld(b[0], uint64(off + ch * b[4] + t * b[5] + r * b[6] + s * b[7]))
        return Operand(("conv_filter", dtype, ftype, fast, order, precomp), fast, setup, load)
    return _cached(("filter", dtype, ftype, fast, order, precomp), build)


# ---------------------------------------------------------------- dgrad
def dgrad_dy(dtype, ftype, fast, order, precomp, stride):
    """A of dgrad. a = (dy, table, sdy_n, sdy_k, sdy_o, sdy_p, sdy_q, O, P, Q, D, H, W, pad_d,
    pad_h, pad_w, Kg, T, R, S, dil_d, dil_h, dil_w); state (offset, d+pad_d, h+pad_h, w+pad_w).
    Output position d reads dy at o = (d + pad - t*dil) / stride when that is an integer in range."""
    SD, SH, SW = stride

    def build():
        ld, ACC, tap = dtypes.loader(dtype, ftype), _acc(ftype), make_tap(order)

        @cuda.jit(device=True, inline=True)
        def setup(a, z, m):
            n, d, h, w = split4(m, a[10], a[11], a[12])
            off = n * a[2] + z * a[16] * a[3]
            return (int64(off), int64(d + a[13]), int64(h + a[14]), int64(w + a[15]))

        @cuda.jit(device=True, inline=True)
        def load(a, off, d1, h1, w1, kidx):
            if precomp:
                tab = a[1]
                e = uint64(kidx * ENTRY)
                delta = int64(tab[e])
                td, tr, ts = unpack3(tab[e + uint64(1)])
                od = d1 - td
                oh = h1 - tr
                ow = w1 - ts
            else:
                k, t, r, s = tap(kidx, a[16], a[17], a[18], a[19])
                delta = k * a[3]
                od = d1 - t * a[20]
                oh = h1 - r * a[21]
                ow = w1 - s * a[22]
            if od < 0 or oh < 0 or ow < 0:
                return ACC(0)
            if SD != 1 and od % SD != 0:
                return ACC(0)
            if SH != 1 and oh % SH != 0:
                return ACC(0)
            if SW != 1 and ow % SW != 0:
                return ACC(0)
            o, p, q = od // SD, oh // SH, ow // SW
            if o < a[7] and p < a[8] and q < a[9]:
                return ld(a[0], uint64(off + delta + o * a[4] + p * a[5] + q * a[6]))
            return ACC(0)
        return Operand(("conv_dgrad_dy", dtype, ftype, fast, order, precomp, stride), fast, setup, load)
    return _cached(("dgrad_dy", dtype, ftype, fast, order, precomp, stride), build)


# ---------------------------------------------------------------- wgrad
def wgrad_dy(dtype, ftype, fast, precomp=False):
    """A of wgrad: dy at (k, kidx = (n, o, p, q)). a = (dy, sdy_n, sdy_k, sdy_o, sdy_p, sdy_q,
    O, P, Q, Kg, table); with PRECOMP the table row of kidx holds dy's (n, o, p, q) offset."""
    def build():
        ld = dtypes.loader(dtype, ftype)

        @cuda.jit(device=True, inline=True)
        def setup(a, z, k):
            return (int64((z * a[9] + k) * a[2]), int64(0), int64(0), int64(0))

        @cuda.jit(device=True, inline=True)
        def load(a, off, s1, s2, s3, kidx):
            if precomp:
                return ld(a[0], uint64(off + a[10][uint64(kidx * ENTRY)]))
            n, o, p, q = split4(kidx, a[6], a[7], a[8])
            return ld(a[0], uint64(off + n * a[1] + o * a[3] + p * a[4] + q * a[5]))
        return Operand(("conv_wgrad_dy", dtype, ftype, fast, precomp), fast, setup, load)
    return _cached(("wgrad_dy", dtype, ftype, fast, precomp), build)


def wgrad_x(dtype, ftype, fast, order, precomp=False):
    """B of wgrad: x at (crs, kidx = (n, o, p, q)). b = (x, sx_n, sx_c, sx_d, sx_h, sx_w, D, H, W,
    O, P, Q, str_d, str_h, str_w, pad_d, pad_h, pad_w, Cg, T, R, S, dil_d, dil_h, dil_w, table);
    state (offset of channel and tap, t*dil_d - pad_d, r*dil_h - pad_h, s*dil_w - pad_w). With
    PRECOMP the table row of kidx holds [dy offset, x offset of (n, o*str, p*str, q*str),
    pack3(o*str_d, p*str_h, q*str_w)] and no division is left in the loader."""
    def build():
        ld, ACC, tap = dtypes.loader(dtype, ftype), _acc(ftype), make_tap(order)

        @cuda.jit(device=True, inline=True)
        def setup(b, z, crs):
            c, t, r, s = tap(crs, b[18], b[19], b[20], b[21])
            td, rh, sw = t * b[22] - b[15], r * b[23] - b[16], s * b[24] - b[17]
            off = (z * b[18] + c) * b[2]
            if precomp:
                off += td * b[3] + rh * b[4] + sw * b[5]
            return (int64(off), int64(td), int64(rh), int64(sw))

        @cuda.jit(device=True, inline=True)
        def load(b, off, td, rh, sw, kidx):
            if precomp:
                tab = b[25]
                e = uint64(kidx * ENTRY)
                cd, ch, cw = unpack3(tab[e + uint64(2)])
                d = cd + td
                h = ch + rh
                w = cw + sw
                if 0 <= d < b[6] and 0 <= h < b[7] and 0 <= w < b[8]:
                    return ld(b[0], uint64(off + tab[e + uint64(1)]))
                return ACC(0)
            n, o, p, q = split4(kidx, b[9], b[10], b[11])
            d = o * b[12] + td
            h = p * b[13] + rh
            w = q * b[14] + sw
            if 0 <= d < b[6] and 0 <= h < b[7] and 0 <= w < b[8]:
                return ld(b[0], uint64(off + n * b[1] + d * b[3] + h * b[4] + w * b[5]))
            return ACC(0)
        return Operand(("conv_wgrad_x", dtype, ftype, fast, order, precomp), fast, setup, load)
    return _cached(("wgrad_x", dtype, ftype, fast, order, precomp), build)


# ---------------------------------------------------------------- outputs
def activation_output():
    """y of fprop / dx of dgrad: rows (n, a, b, c) over spatial (A, B, C), columns = channel in group.
    o = (arr, s_n, s_ch, s_a, s_b, s_c, A, B, C, CH_G)."""
    def build():
        @cuda.jit(device=True, inline=True)
        def row(o, z, m):
            n, a, b, c = split4(m, o[6], o[7], o[8])
            return n * o[1] + a * o[3] + b * o[4] + c * o[5]

        @cuda.jit(device=True, inline=True)
        def col(o, z, ch):
            return (z * o[9] + ch) * o[2]
        return Output(("conv_act_out",), row, col)
    return _cached(("act_out",), build)


def filter_output(order):
    """dw of wgrad: rows = k in group, columns = crs (ORDER). o = (dw, s_k, s_c, s_t, s_r, s_s,
    Kg, Cg, T, R, S, flip)."""
    def build():
        tap = make_tap(order)

        @cuda.jit(device=True, inline=True)
        def row(o, z, k):
            return (z * o[6] + k) * o[1]

        @cuda.jit(device=True, inline=True)
        def col(o, z, crs):
            c, t, r, s = tap(crs, o[7], o[8], o[9], o[10])
            if o[11]:
                t, r, s = o[8] - 1 - t, o[9] - 1 - r, o[10] - 1 - s
            return c * o[2] + t * o[3] + r * o[4] + s * o[5]
        return Output(("conv_filter_out", order), row, col)
    return _cached(("filter_out", order), build)
