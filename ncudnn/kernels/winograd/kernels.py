"""Winograd F(m x m, 3 x 3) transform kernels (one thread per tile), generated as straight-line code.

The transforms are written out from the exact matrices of :mod:`.transforms` (zero coefficients
dropped, +-1 as adds / subtracts, the rest as float32 constants), so each thread keeps its tile in
registers. Three kernels make the non-fused Winograd convolution around a batched GEMM:

* ``filter``: ``U[xi, ko, ci] = (G g G^T)[xi]`` for the 3x3 filter ``g`` of output channel ko and
  in-group input channel ci, read at ``base + (ko // COG) * s_grp + (ko % COG) * s_ko + ci * s_ci``
  (COG output channels per group; negative r / s strides flip the filter: CONVOLUTION mode, or the
  rotated filter of dgrad). ``idx = ko * CI + ci``: consecutive threads write consecutive ``U`` words.
* ``input``: ``V[xi, ...] = (B^T d B)[xi]`` for the alpha x alpha input tile of (c, tile) at
  ``(th * m - pad_h, tw * m - pad_w)``; out-of-image elements are predicated zeros (any padding).
  ``CFAST`` (channels-last input): ``idx = tile * C + c``, V is [alpha^2, tiles, C]; else
  ``idx = c * T + tile``, V is [alpha^2, C, tiles]. Either way consecutive threads read and write
  consecutive words for NHWC / NCHW inputs respectively.
* ``output``: ``Y = A^T M A`` per (k, tile) from the GEMM result M ([alpha^2, tiles, K] with
  ``CFAST``, else [alpha^2, K, tiles]), each of the m x m outputs inside the image through the
  fused epilogue ``fn(v, y, y_off, bias, b_off, res, r_off, alpha, beta)`` (ncudnn.kernels.pointwise.epilogue).

Signatures (pointers / sizes / strides / scalars):
``filter(w, u, KO, CI, COG, base, s_grp, s_ko, s_ci, s_r, s_s)``;
``input(x, v, C, H, W, TH, TW, T, pad_h, pad_w, s_n, s_c, s_h, s_w)``;
``output(mb, y, bias, res, K, P, Q, TH, TW, T, y_strides(4), b_stride, r_strides(4), alpha, beta)``.
All 1-D grids of ``THREADS`` threads per block.
"""
from fractions import Fraction

import numpy as np
from numba import cuda, float32, int64, uint64

from ..runtime import dtypes
from .transforms import transform

THREADS = 256
_CACHE = {}


def _lincomb(row, names):
    """Text of sum_j row[j] * names[j] with exact-coefficient simplifications."""
    out = []
    for c, n in zip(row, names):
        c = Fraction(c)
        if c == 0:
            continue
        if c == 1:
            out.append(("+", n))
        elif c == -1:
            out.append(("-", n))
        elif c < 0:
            out.append(("-", f"{n} * float32({float(-c)!r})"))
        else:
            out.append(("+", f"{n} * float32({float(c)!r})"))
    if not out:
        return "float32(0.0)"
    text = ("-" if out[0][0] == "-" else "") + out[0][1]
    for s, t in out[1:]:
        text += f" {s} {t}"
    return text


def _compile(key, src, name, g):
    if key not in _CACHE:
        g = dict(g, cuda=cuda, float32=float32, int64=int64, uint64=uint64)
        exec(compile(src, f"<winograd {name} {key}>", "exec"), g)
        _CACHE[key] = cuda.jit(g[name])
    return _CACHE[key]


def sandwich(mat, src, mid, dst, ind="    "):
    """Lines of ``mat S mat^T`` for a rows x cols ``mat``: ``{mid}_i_j = (mat S)[i, j]`` over ``S[k, j] =
    src(k, j)``, then ``dst(i, j, text of (mat S mat^T)[i, j])`` (a line, or lines) for i, j < rows.
    Every transform is one: G g G^T, B^T d B, A^T M A."""
    rows, cols = len(mat), len(mat[0])
    L = []
    for i in range(rows):
        for j in range(cols):
            L.append(f"{ind}{mid}_{i}_{j} = {_lincomb(mat[i], [src(k, j) for k in range(cols)])}")
    for i in range(rows):
        for j in range(rows):
            L.append(dst(i, j, _lincomb(mat[j], [f"{mid}_{i}_{k}" for k in range(cols)])))
    return L


def tile_origin(t="t", ind="    "):
    """Lines placing tile ``t`` (tiles numbered image by image, row by row): ``nimg``, ``th``, ``tw``."""
    return [f"{ind}nimg = {t} // (TH * TW)",
            f"{ind}rem = {t} - nimg * (TH * TW)",
            f"{ind}th = rem // TW",
            f"{ind}tw = rem - th * TW"]


def split_index(cfast, inner, count):
    """Lines splitting ``idx`` into tile ``t`` and ``inner`` (a channel): ``t`` slowest when ``cfast``
    (consecutive threads: consecutive channels), else the channel slowest over ``count`` tiles."""
    if cfast:
        return [f"    t = idx // {inner.upper()}", f"    {inner} = idx - t * {inner.upper()}"]
    return [f"    {inner} = idx // {count}", f"    t = idx - {inner} * {count}"]


def input_window(BT, m, guard="", ind="    "):
    """Lines loading the alpha x alpha input window ``d_i_j`` (alpha = len(BT)) of tile (nimg, th, tw) and
    channel c at ``(th * m - pad_h, tw * m - pad_w)``: out-of-image elements are predicated zeros (all of
    them where the condition ``guard`` is false)."""
    a = len(BT)
    L = [f"{ind}h0 = th * {m} - pad_h", f"{ind}w0 = tw * {m} - pad_w", f"{ind}base = nimg * s_n + c * s_c"]
    g = f"{guard} and " if guard else ""
    for i in range(a):
        L.append(f"{ind}rv_{i} = {g}h0 + {i} >= 0 and h0 + {i} < H")
        L.append(f"{ind}cv_{i} = w0 + {i} >= 0 and w0 + {i} < W")
    for i in range(a):
        for j in range(a):
            L.append(f"{ind}d_{i}_{j} = ld(x, uint64(base + (h0 + {i}) * s_h + (w0 + {j}) * s_w)) "
                     f"if rv_{i} and cv_{j} else float32(0.0)")
    return L


def filter_source(m, kfast=False):
    t = transform(m)
    a, G = t.alpha, t.G
    L = ["def wino_filter(w, u, KO, CI, COG, base, s_grp, s_ko, s_ci, s_r, s_s):",
         "    idx = cuda.grid(1)",
         "    n = KO * CI",
         "    if idx >= n:",
         "        return"]
    if kfast:                     # U is [alpha^2, CI, KO] (the fused kernel's layout)
        L += ["    ci = idx // KO", "    ko = idx - ci * KO"]
    else:                         # U is [alpha^2, KO, CI] (the batched GEMM's A operand)
        L += ["    ko = idx // CI", "    ci = idx - ko * CI"]
    L += ["    grp = ko // COG",
          "    o = base + grp * s_grp + (ko - grp * COG) * s_ko + ci * s_ci"]
    for r in range(3):
        for s in range(3):
            L.append(f"    g_{r}_{s} = ld(w, uint64(o + {r} * s_r + {s} * s_s))")
    # T = G g (alpha x 3), U = T G^T (alpha x alpha)
    L += sandwich(G, lambda k, j: f"g_{k}_{j}", "t", lambda i, j, e: f"    u[uint64({i * a + j} * n + idx)] = {e}")
    return "\n".join(L) + "\n"


def make_filter(m, w_dtype="float32", kfast=False):
    """The filter-transform kernel of F(m x m, 3 x 3) for a filter stored as ``w_dtype``; ``kfast``:
    write U as [alpha^2, CI, KO] instead of [alpha^2, KO, CI]."""
    w_dtype = dtypes.dtype_name(w_dtype)
    return _compile(("filter", m, w_dtype, bool(kfast)), filter_source(m, kfast), "wino_filter",
                    {"ld": dtypes.loader(w_dtype)})


def input_source(m, cfast, BT=None, name="wino_input", padded=False):
    """The input transform ``V[xi, c, t] = (B^T d B)[xi]`` (``BT``: F(m x m, 3 x 3)'s unless given).
    ``padded``: the tiles are counted to ``TPAD >= T`` (an extra ``TPAD`` argument after ``T``; tiles
    past T write zeros), the layout of the Winograd weight gradient's x operand."""
    if BT is None:
        BT = transform(m).BT
    a = len(BT)
    count = "TPAD" if padded else "T"
    L = [f"def {name}(x, v, C, H, W, TH, TW, T, {'TPAD, ' if padded else ''}pad_h, pad_w, s_n, s_c, s_h, s_w):",
         "    idx = cuda.grid(1)",
         f"    n_all = C * {count}",
         "    if idx >= n_all:",
         "        return"]
    L += split_index(cfast, "c", count)
    L += tile_origin()
    if padded:
        L.append("    live = t < T")
    L += input_window(BT, m, "live" if padded else "")
    # T = B^T d, V = T B
    L += sandwich(BT, lambda k, j: f"d_{k}_{j}", "z",
                  lambda i, j, e: f"    v[uint64({i * a + j} * n_all + idx)] = {e}")
    return "\n".join(L) + "\n"


def make_input(m, x_dtype="float32", cfast=False):
    """The input-transform kernel of F(m x m, 3 x 3) for an input stored as ``x_dtype``."""
    x_dtype = dtypes.dtype_name(x_dtype)
    return _compile(("input", m, x_dtype, bool(cfast)), input_source(m, cfast), "wino_input",
                    {"ld": dtypes.loader(x_dtype)})


def output_source(m, cfast, epi):
    t = transform(m)
    a, AT = t.alpha, t.AT
    L = ["def wino_output(mb, y, bias, res, K, P, Q, TH, TW, T, sy_n, sy_k, sy_h, sy_w, b_s,",
         "                sr_n, sr_k, sr_h, sr_w, alpha, beta):",
         "    idx = cuda.grid(1)",
         "    n_all = K * T",
         "    if idx >= n_all:",
         "        return"]
    L += split_index(cfast, "k", "T")
    for i in range(a):
        for j in range(a):
            L.append(f"    m_{i}_{j} = mb[uint64({i * a + j} * n_all + idx)]")
    # S = A^T M (m x alpha), O = S A (m x m)
    L += sandwich(AT, lambda k, j: f"m_{k}_{j}", "s", lambda i, j, e: f"    o_{i}_{j} = {e}")
    L += tile_origin()
    L += [f"    p0 = th * {m}",
          f"    q0 = tw * {m}",
          "    yb = nimg * sy_n + k * sy_k + p0 * sy_h + q0 * sy_w",
          "    b_off = uint64(k * b_s)"]
    if epi.RESIDUAL:
        L.append("    rb = nimg * sr_n + k * sr_k + p0 * sr_h + q0 * sr_w")
    for i in range(m):
        for j in range(m):
            r_off = f"uint64(rb + {i} * sr_h + {j} * sr_w)" if epi.RESIDUAL else "uint64(0)"
            L.append(f"    if p0 + {i} < P and q0 + {j} < Q:")
            L.append(f"        epi(o_{i}_{j}, y, uint64(yb + {i} * sy_h + {j} * sy_w), bias, b_off, res, "
                     f"{r_off}, alpha, beta)")
    return "\n".join(L) + "\n"


def make_output(m, epi, cfast=False):
    """The output-transform kernel of F(m x m, 3 x 3) ending in the built epilogue ``epi``
    (``ncudnn.kernels.pointwise.epilogue.build``: its key names the output / bias / residual dtypes)."""
    return _compile(("output", m, bool(cfast), epi.key), output_source(m, cfast, epi), "wino_output",
                    {"epi": epi.fn})


def blocks(n):
    """1-D grid size for ``n`` threads of work."""
    return max(1, -(-int(n) // THREADS))


def f32(v):
    return np.float32(v)
