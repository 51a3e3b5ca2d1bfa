"""Winograd weight gradient of a 3x3, stride-1, undilated convolution: F(3x3, r x r), r = 2 or 4.

``dw[k, c, i, j] = sum_{n, p, q} dy[n, k, p, q] x[n, c, p + i - pad_h, q + j - pad_w]`` is a
correlation of x with dy giving a 3x3 result, so it runs as the minimal filtering algorithm F(3, r)
with the *dy tile* (r x r, tiles stepping by r over P x Q) as the "filter" and the x window
(alpha x alpha, alpha = r + 2, at ``(th * r - pad_h, tw * r - pad_w)``) as the "data":

1. dy transform   U[xi, k, t] = (G dy_t G^T)[xi]        (alpha x r G; NHWC: U[xi, t, k])
2. x transform    V[xi, c, t] = (B^T x_t B)[xi]         (NHWC: V[xi, t, c])
3. alpha^2 x S batched GEMMs  M[xi, s] (K x C) = U[xi, :, chunk s] @ V[xi, :, chunk s]^T
   (the tile index t is the reduction; it is cut into S chunks of TC tiles, a multiple of 16, so
   that K x C tiles x alpha^2 x S fill the SMs: split-K as a batch dimension, no atomics)
4. output         dw = alpha * A^T (sum_s M[xi, s]) A + beta * dw   per (k, c), 3 x alpha A^T

Tiles are padded to ``TPAD = S * TC`` with zeros (t >= T: all loads predicated off), out-of-image
x and out-of-range dy elements are predicated zeros (any padding). F(3, 2) uses points 0, 1, -1
and F(3, 4) 0, 1, -1, 2, -2 (plus infinity), derived exactly (:func:`.transforms.derive`).

Signatures (pointers / sizes / strides / scalars), 1-D grids of ``THREADS``:
``dy(dy, u, K, P, Q, TH, TW, T, TPAD, s_n, s_k, s_h, s_w)``   (idx over K x TPAD);
``x(x, v, C, H, W, TH, TW, T, TPAD, pad_h, pad_w, s_n, s_c, s_h, s_w)``   (idx over C x TPAD);
``out(mb, dw, K, C, S, base, s_k, s_c, s_r, s_s, alpha, beta)``   (idx over K x C; M is
[alpha^2, S, K, C]; negative r / s strides write the filter flipped: CONVOLUTION mode).
"""
import numpy as np

from ..runtime import dtypes
from .kernels import THREADS, _compile, blocks, input_source, sandwich, split_index, tile_origin  # noqa: F401
# (blocks: the launchers' grid)
from .transforms import derive

#: dy tile sizes r of F(3x3, r x r) and their interpolation points (plus infinity)
POINTS = {2: (0, 1, -1), 4: (0, 1, -1, 2, -2)}
#: the chunk length TC of the split reduction is a multiple of this (the GEMM's BLOCK_K)
CHUNK = 16
_T = {}
#: the batched GEMM's fixed cost per block (prologue, epilogue, pipeline fill) in reduction elements:
#: fitted on an H200, FP32, 128x128x16 VEC=4 (docs/winograd.md: GEMM time / model ~ 0.8 x (TC + 96) / TC
#: for TC = 128 .. 6272)
FIXED_K = 96
#: one more split's cost to the output kernel (a latency-bound pass over M) in the 128x128 block's
#: reduction elements, per alpha^2 (fitted on an H200: the WG_OUT pass times of conv_winograd_common)
OUT_ITER_K = {16: 9, 36: 42}


def transform(r):
    """The F(3, r) matrices (BT alpha x alpha, G alpha x r, AT 3 x alpha), exact fractions."""
    if r not in _T:
        if r not in POINTS:
            raise ValueError(f"F(3x3, {r}x{r}) wgrad: r must be one of {sorted(POINTS)}")
        _T[r] = derive(3, r, POINTS[r])
    return _T[r]


def dy_source(r, cfast):
    t = transform(r)
    a, G = t.alpha, t.G
    L = ["def wgrad_dy(dy, u, K, P, Q, TH, TW, T, TPAD, s_n, s_k, s_h, s_w):",
         "    idx = cuda.grid(1)",
         "    n_all = K * TPAD",
         "    if idx >= n_all:",
         "        return"]
    L += split_index(cfast, "k", "TPAD") + tile_origin() + ["    live = t < T"]
    L += [f"    p0 = th * {r}", f"    q0 = tw * {r}", "    base = nimg * s_n + k * s_k + p0 * s_h + q0 * s_w"]
    for i in range(r):
        L.append(f"    rv_{i} = live and p0 + {i} < P")
        L.append(f"    cv_{i} = q0 + {i} < Q")
    for i in range(r):
        for j in range(r):
            L.append(f"    g_{i}_{j} = ld(dy, uint64(base + {i} * s_h + {j} * s_w)) "
                     f"if rv_{i} and cv_{j} else float32(0.0)")
    # Z = G g (alpha x r), U = Z G^T (alpha x alpha)
    L += sandwich(G, lambda k, j: f"g_{k}_{j}", "z", lambda i, j, e: f"    u[uint64({i * a + j} * n_all + idx)] = {e}")
    return "\n".join(L) + "\n"


def x_source(r, cfast):
    """The fprop input transform (kernels.input_source) over the F(3, r) window, tiles padded to TPAD."""
    return input_source(r, cfast, BT=transform(r).BT, name="wgrad_x", padded=True)


def out_source(r, packed=False):
    """The output kernel. ``packed``: dw is KCRS-packed (``s_c = 9``, ``s_k = 9 C``; the flip and the r / s
    order only move the 9 values inside a filter), so a block's 256 (k, c) filters are 2304 consecutive
    floats: each thread puts its 9 into shared memory (``tid * 9 + pos``, 9 odd: no bank conflicts) and
    the block stores them coalesced (beta read the same way)."""
    t = transform(r)
    a, AT = t.alpha, t.AT
    ind = "        " if packed else "    "
    L = ["def wgrad_out(mb, dw, K, C, S, base, s_k, s_c, s_r, s_s, alpha, beta):",
         "    idx = cuda.grid(1)",
         "    KC = K * C"]
    if packed:
        L += [f"    sm = cuda.shared.array({9 * THREADS}, float32)",
              "    tid = cuda.threadIdx.x",
              "    if idx < KC:"]
    else:
        L += ["    if idx >= KC:",
              "        return",
              "    k = idx // C",
              "    c = idx - k * C"]
    for xi in range(a * a):
        L.append(f"{ind}m_{xi} = float32(0.0)")
    L += [f"{ind}for s in range(S):"]
    for xi in range(a * a):
        L.append(f"{ind}    m_{xi} += mb[uint64(({xi} * S + s) * KC + idx)]")
    if not packed:
        L.append("    o = base + k * s_k + c * s_c")

    def store(i, j, e):
        v = f"{ind}v = alpha * ({e})"
        if packed:
            return f"{v}\n{ind}sm[tid * 9 + base + {i} * s_r + {j} * s_s] = v"
        return "\n".join([v, f"    off = uint64(o + {i} * s_r + {j} * s_s)", "    if beta != float32(0.0):",
                          "        v += beta * ld(dw, off)", "    st(dw, off, v)"])
    # Z = A^T M (3 x alpha), O = Z A (3 x 3)
    L += sandwich(AT, lambda k, j: f"m_{k * a + j}", "z", store, ind)
    if packed:
        L += ["    cuda.syncthreads()",
              f"    o0 = cuda.blockIdx.x * {9 * THREADS}",
              "    lim = KC * 9 - o0",
              "    for q in range(9):",
              f"        e = q * {THREADS} + tid",
              "        if e < lim:",
              "            off = uint64(o0 + e)",
              "            v = sm[e]",
              "            if beta != float32(0.0):",
              "                v += beta * ld(dw, off)",
              "            st(dw, off, v)"]
    return "\n".join(L) + "\n"


def packed_dw(dw_strides, C):
    """Is dw KCRS-packed (``s_k = 9 C``, ``s_c = 9``, the r / s strides 3 and 1 in either order)? Then
    the packed output kernel (coalesced stores) writes it."""
    s_k, s_c, s_r, s_s = dw_strides
    return s_c == 9 and s_k == 9 * C and sorted((abs(s_r), abs(s_s))) == [1, 3]


def make_dy(r, dtype="float32", cfast=False):
    """The dy-transform kernel of F(3x3, r x r) wgrad for dy stored as ``dtype``."""
    dtype = dtypes.dtype_name(dtype)
    return _compile(("wgrad_dy", r, dtype, bool(cfast)), dy_source(r, cfast), "wgrad_dy", {"ld": dtypes.loader(dtype)})


def make_x(r, dtype="float32", cfast=False):
    """The x-transform kernel of F(3x3, r x r) wgrad for x stored as ``dtype``."""
    dtype = dtypes.dtype_name(dtype)
    return _compile(("wgrad_x", r, dtype, bool(cfast)), x_source(r, cfast), "wgrad_x", {"ld": dtypes.loader(dtype)})


def make_out(r, dtype="float32", packed=False):
    """The output-transform kernel of F(3x3, r x r) wgrad writing dw as ``dtype`` (``packed``: KCRS
    dw, :func:`packed_dw`; launched with :data:`THREADS` per block)."""
    dtype = dtypes.dtype_name(dtype)
    return _compile(("wgrad_out", r, dtype, bool(packed)), out_source(r, packed), "wgrad_out",
                    {"ld": dtypes.loader(dtype), "st": dtypes.storer(dtype)})


# ------------------------------------------------------------------------------ decomposition

def tiles(P, Q, N, r):
    """(tile rows, tile columns, T) of dy for tile r."""
    th, tw = -(-P // r), -(-Q // r)
    return th, tw, N * th * tw


def splits(K, C, T, a2, block_m, block_n, slots, max_splits=64, min_chunk=128, fixed_k=FIXED_K, iter_k=None,
           l2_bytes=None):
    """(S, TC): chunks of the reduction over T (TC a multiple of :data:`CHUNK`) minimising
    ``waves x (TC + fixed_k) + S x iter_k`` for ``K/BLOCK_M x C/BLOCK_N x alpha^2 x S`` GEMM blocks on
    ``slots`` concurrent blocks (SMs x blocks per SM). ``fixed_k``: each block's prologue / epilogue in
    reduction elements; ``iter_k``: what one more split costs the output kernel (one more pass over
    M, latency-bound, :data:`OUT_ITER_K`), doubled once M (a2 x S x K x C floats) exceeds ``l2_bytes``.
    Ties keep the fewer chunks (less output traffic)."""
    if iter_k is None:
        iter_k = OUT_ITER_K.get(a2, 0)
    base = -(-K // block_m) * -(-C // block_n) * a2
    best = None
    for s in range(1, max_splits + 1):
        tc = -(-(-(-T // s)) // CHUNK) * CHUNK
        if s > 1 and tc < min_chunk:
            break
        waves = -(-(base * s) // slots)
        miss = 2 if l2_bytes is not None and 4 * a2 * s * K * C > l2_bytes else 1
        score = waves * (tc + fixed_k) + s * iter_k * miss
        if best is None or score < best[0]:
            best = (score, s, tc)
    return best[1], best[2]


def sizes(K, C, TPAD, S, r):
    """(U, V, M) float32 element counts of the workspace."""
    a2 = (r + 2) ** 2
    return a2 * K * TPAD, a2 * C * TPAD, a2 * S * K * C


def gemm_strides(K, C, TPAD, TC, S, r, cfast):
    """(A, B, C) strides (batch1 = xi, batch2 = chunk s, row, col) of the batched GEMM
    ``M[xi, s] (K x C) = U[xi, :, s] (K x TC) @ V[xi, :, s] (TC x C)``, and the (A, B) layouts."""
    if cfast:      # U [xi, t, k] ("km"), V [xi, t, c] ("kn")
        a_st, b_st, lay = (TPAD * K, TC * K, 1, K), (TPAD * C, TC * C, C, 1), ("km", "kn")
    else:          # U [xi, k, t] ("mk"), V [xi, c, t] ("nk")
        a_st, b_st, lay = (K * TPAD, TC, TPAD, 1), (C * TPAD, TC, 1, TPAD), ("mk", "nk")
    return a_st, b_st, (S * K * C, K * C, C, 1), lay


def dw_addressing(dw_strides, flip):
    """(base, s_k, s_c, s_r, s_s) of the output kernel; ``flip``: write the filter rotated by 180
    degrees (CONVOLUTION mode)."""
    s_k, s_c, s_r, s_s = dw_strides
    if flip:
        return 2 * s_r + 2 * s_s, s_k, s_c, -s_r, -s_s
    return 0, s_k, s_c, s_r, s_s


def f32(v):
    return np.float32(v)
