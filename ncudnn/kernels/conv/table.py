"""IMPLICIT_PRECOMP_GEMM: the host-built (kidx -> offsets) table replacing the loaders' divisions.

Row ``kidx`` (ORDER "crs" or "rsc" over (channel, t, r, s)) holds three int32s:
``[act_delta, pack3(t*dil_d, r*dil_h, s*dil_w), w_delta]``. For fprop the channel is x's c and
``act_delta = c*sx_c + t*dil_d*sx_d + r*dil_h*sx_h + s*dil_w*sx_w``; for dgrad it is dy's k and
``act_delta = k*sdy_k`` (the spatial part depends on the stride test). ``w_delta`` is the filter
offset of (channel, tap), the tap flipped in CONVOLUTION mode. ``pack3`` puts three coordinates
in [0, 1024) into one word (10 bits each: d << 20 | h << 10 | w), so a loader reads two words
per element (one for the filter) instead of five. Size: exactly ``3 * 4 * CH * T * R * S``
bytes (:func:`table_bytes`). wgrad's table runs over its reduction index (n, o, p, q) instead
(:func:`build_wgrad_table`). Coordinates >= 1024 do not pack: ValueError (IMPLICIT_GEMM, with no
table, takes any size).
"""
import numpy as np

ENTRY = 3
BITS = 10
LIMIT = 1 << BITS


def pack3(d, h, w):
    """int64 array d << 20 | h << 10 | w of non-negative coordinates < 1024 (ValueError otherwise)."""
    for v in (d, h, w):
        if v.size and (v.min() < 0 or v.max() >= LIMIT):
            raise ValueError(f"conv coordinates up to {int(v.max())} do not pack into {BITS} bits "
                             "(precomputed table); use IMPLICIT_GEMM")
    return (d << (2 * BITS)) | (h << BITS) | w


def table_bytes(channels, taps):
    return ENTRY * 4 * channels * taps


def build_table(g, kind, order):
    """int32 array (CH*T*R*S*3,) for geometry ``g``; kind "fprop" or "dgrad"."""
    T, R, S = g.TRS
    dd, dh, dw = g.dil
    if kind == "fprop":
        CH, s_act, s_wch = g.Cg, g.x_strides[1], g.w_strides[1]
        sp = g.x_strides[2:]
    elif kind == "dgrad":
        CH, s_act, s_wch = g.Kg, g.y_strides[1], g.w_strides[0]
        sp = (0, 0, 0)
    else:
        raise ValueError(kind)
    ch, t, r, s = np.meshgrid(np.arange(CH), np.arange(T), np.arange(R), np.arange(S), indexing="ij")
    if order == "rsc":
        ch, t, r, s = (np.moveaxis(v, 0, -1) for v in (ch, t, r, s))
    elif order != "crs":
        raise ValueError(order)
    ch, t, r, s = (v.reshape(-1).astype(np.int64) for v in (ch, t, r, s))
    ft, fr, fs = (T - 1 - t, R - 1 - r, S - 1 - s) if g.flip else (t, r, s)
    sw = g.w_strides
    tab = np.stack([ch * s_act + t * dd * sp[0] + r * dh * sp[1] + s * dw * sp[2],
                    pack3(t * dd, r * dh, s * dw),
                    ch * s_wch + ft * sw[2] + fr * sw[3] + fs * sw[4]], axis=1)
    if np.abs(tab).max(initial=0) >= 2 ** 31:
        raise ValueError("conv offsets do not fit the int32 table")
    return np.ascontiguousarray(tab.astype(np.int32).reshape(-1))


def build_wgrad_table(g):
    """int32 array (N*O*P*Q*3,): per wgrad reduction index (n, o, p, q), ``[dy offset, x offset of
    (n, o*str_d, p*str_h, q*str_w), pack3(o*str_d, p*str_h, q*str_w)]``; exactly
    ``table_bytes(N, O*P*Q)`` bytes."""
    O, P, Q = g.OPQ
    n, o, p, q = (v.reshape(-1).astype(np.int64) for v in np.meshgrid(
        np.arange(g.N), np.arange(O), np.arange(P), np.arange(Q), indexing="ij"))
    sd, sh, sw = g.stride
    sy, sx = g.y_strides, g.x_strides
    tab = np.stack([n * sy[0] + o * sy[2] + p * sy[3] + q * sy[4],
                    n * sx[0] + o * sd * sx[2] + p * sh * sx[3] + q * sw * sx[4],
                    pack3(o * sd, p * sh, q * sw)], axis=1)
    if np.abs(tab).max(initial=0) >= 2 ** 31:
        raise ValueError("conv offsets do not fit the int32 table")
    return np.ascontiguousarray(tab.astype(np.int32).reshape(-1))
