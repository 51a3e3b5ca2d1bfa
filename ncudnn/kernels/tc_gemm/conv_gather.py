"""Source generation of the implicit-GEMM conv fprop kernel's A loads (``make_tc_gemm(..., conv=True)``): A is
gathered from NHWC x, one 16-byte chunk of channels a load slot, zero-filled in the padding, past M and past
K. Up to v3 each slot keeps its running filter tap and channel (r, s, c); v4 (C % BLOCK_K == 0) keeps one
running tap per thread, shared by its slots. The functions append source lines through ``w``.
"""
from .config import swz

__all__ = ["CONV_ARGS", "conv_a_setup", "conv_a_setup_fast", "conv_tap_init", "conv_a_load_fast", "conv_tap_advance",
           "conv_a_load"]


#: argument list of the implicit-GEMM conv fprop kernel (``conv=True``; A gathered from NHWC x, B the KRSC
#: filter, C the NPQ x K output rows)
CONV_ARGS = ("a", "b", "c", "bias", "res", "M", "N", "K", "C", "H", "W", "P", "Q", "R", "S", "str_h",
             "str_w", "pad_h", "pad_w", "dil_h", "dil_w", "x_n", "x_h", "x_w", "ldb", "ldc_m", "ldc_n",
             "bias_i", "res_m", "res_n", "alpha", "beta")


def conv_a_setup(w, i, NT, CH, COLS, BK, split=False):
    """Per A load slot of the conv kernel: its output pixel (n, p, q) -> image base and the top-left
    input corner, and the running (r, s, c) of its 16-byte chunk (advanced by BLOCK_K per k tile;
    ``split``: starting at the slice's first k, ``kbeg``)."""
    w(f"    q_ = tid + {i * NT}")
    w(f"    row = q_ // {CH}")
    w(f"    ch = q_ % {CH}")
    w(f"    a_so{i} = row * {COLS} + ((ch ^ {swz('row', CH)}) * 8)")
    w("    m = m0 + row")
    w(f"    a_m{i} = m < M")
    w("    m = m if m < M else 0")
    w("    n_ = m // PQ")
    w("    pq = m - n_ * PQ")
    w("    p_ = pq // Q")
    w(f"    a_nb{i} = int64(n_) * x_n")
    w(f"    a_h{i} = p_ * str_h - pad_h")
    w(f"    a_w{i} = (pq - p_ * Q) * str_w - pad_w")
    if split:   # (r, s, c) of k = kbeg + ch * 8, c fastest
        w("    kk = kbeg + ch * 8")
        w("    tap = kk // C")
        w(f"    a_c{i} = kk - tap * C")
        w(f"    a_r{i} = tap // S")
        w(f"    a_s{i} = tap - a_r{i} * S")
        return
    w(f"    a_c{i} = ch * 8")
    w(f"    a_r{i} = 0")
    w(f"    a_s{i} = 0")
    _conv_a_normalize(w, "    ", i)


def conv_a_setup_fast(w, i, NT, CH, COLS):
    """v4 (C % BLOCK_K == 0): per A slot only its pixel's validity, input corner and the global offset of
    its chunk at tap (0, 0), channel block 0; the tap is shared by the thread's slots (_conv_tap_*)."""
    w(f"    q_ = tid + {i * NT}")
    w(f"    row = q_ // {CH}")
    w(f"    ch = q_ % {CH}")
    w(f"    a_sa{i} = int32((row * {COLS} + ((ch ^ {swz('row', CH)}) * 8)) * 2)")
    w("    m = m0 + row")
    w(f"    a_m{i} = m < M")
    w("    m = m if m < M else 0")
    w("    n_ = m // PQ")
    w("    pq = m - n_ * PQ")
    w("    p_ = pq // Q")
    w(f"    a_h{i} = int32(p_ * str_h - pad_h)")
    w(f"    a_w{i} = int32((pq - p_ * Q) * str_w - pad_w)")
    w(f"    a_b{i} = int64(n_) * x_n + int64(a_h{i}) * x_h + int64(a_w{i}) * x_w + ch * 8")


def conv_tap_init(w, split=False):
    """v4: the thread's running tap (r, s), its offsets (r * dil_h, s * dil_w), the channel block and the
    global offset of tap + channel block relative to a slot's base (``split``: at k = ``kbeg``)."""
    if split:
        w("    t_ds = int64(dil_w) * x_w")
        w("    t_dr = int64(dil_h) * x_h - int64(S) * t_ds")
        w("    tap = kbeg // C")
        w("    t_c = int32(kbeg - tap * C)")
        w("    t_r = int32(tap // S)")
        w("    t_s = int32(tap - t_r * S)")
        w("    t_h = int32(t_r * dil_h)")
        w("    t_w = int32(t_s * dil_w)")
        w("    t_o = int64(t_r) * dil_h * x_h + int64(t_s) * t_ds + t_c")
        return
    w("    t_r = int32(0)")
    w("    t_s = int32(0)")
    w("    t_c = int32(0)")
    w("    t_h = int32(0)")
    w("    t_w = int32(0)")
    w("    t_o = int64(0)")
    w("    t_ds = int64(dil_w) * x_w")
    w("    t_dr = int64(dil_h) * x_h - int64(S) * t_ds")


def conv_a_load_fast(w, ind, i):
    w(f"{ind}ih = a_h{i} + t_h")
    w(f"{ind}iw = a_w{i} + t_w")
    w(f"{ind}ok = a_m{i} and ih >= 0 and ih < H and iw >= 0 and iw < W")
    w(f"{ind}ptx.cp_async_cg_16_zfill_a(sm, wsa + a_sa{i}, a, a_b{i} + t_o if ok else int64(0), 16 if ok else 0)")


def conv_tap_advance(w, ind, BK):
    """v4: next channel block; past C the next s, past S the next r (t_o follows)."""
    w(f"{ind}t_c = int32(t_c + {BK})")
    w(f"{ind}t_o += {BK}")
    w(f"{ind}if t_c == C:")
    w(f"{ind}    t_c = int32(0)")
    w(f"{ind}    t_s = int32(t_s + 1)")
    w(f"{ind}    t_w = int32(t_w + dil_w)")
    w(f"{ind}    t_o += t_ds - C")
    w(f"{ind}    if t_s == S:")
    w(f"{ind}        t_s = int32(0)")
    w(f"{ind}        t_w = int32(0)")
    w(f"{ind}        t_r = int32(t_r + 1)")
    w(f"{ind}        t_h = int32(t_h + dil_h)")
    w(f"{ind}        t_o += t_dr")


def _conv_a_normalize(w, ind, i):
    w(f"{ind}while a_c{i} >= C:")
    w(f"{ind}    a_c{i} -= C")
    w(f"{ind}    a_s{i} += 1")
    w(f"{ind}    if a_s{i} == S:")
    w(f"{ind}        a_s{i} = 0")
    w(f"{ind}        a_r{i} += 1")


def conv_a_load(w, ind, i, BK, v3=False):
    """Issue slot i's chunk of the current k tile (zero-filled in the padding, past M and past K),
    then advance its (r, s, c) by BLOCK_K."""
    w(f"{ind}ih = a_h{i} + a_r{i} * dil_h")
    w(f"{ind}iw = a_w{i} + a_s{i} * dil_w")
    w(f"{ind}ok = a_m{i} and a_r{i} < R and ih >= 0 and ih < H and iw >= 0 and iw < W")
    dst = f"wsa + a_sa{i}" if v3 else f"sb + a_so{i}"
    w(f"{ind}ptx.cp_async_cg_16_zfill{'_a' if v3 else ''}(sm, {dst}, a, "
      f"a_nb{i} + int64(ih) * x_h + int64(iw) * x_w + a_c{i} if ok else int64(0), 16 if ok else 0)")
    w(f"{ind}a_c{i} += {BK}")
    _conv_a_normalize(w, ind, i)
