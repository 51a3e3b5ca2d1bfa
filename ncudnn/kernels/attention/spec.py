"""What an attention kernel is compiled for (:class:`AttnSpec`) and the device functions every attention
kernel shares: the masked, biased score of one (query, key) pair and the per-batch sequence bounds.

Runtime arguments every kernel takes, in this order after its own arrays (see ``fwd.py``):
sizes ``B, H, HK, SQ, SK``; the attention scale (a float32, or read from ``scale_arr[0]`` when
SCALE_DTYPE is set); the band bounds ``left, right``; bias strides ``(b, h, i, j)`` (0 on broadcast axes);
last the dropout's ``seed, rng_offset`` (int64), ``p_keep`` (float64, 1 - probability) and
``drop_scale`` (float32, 1 / (1 - probability)).

Dropout keeps score (b, h, i, j) when the uniform u of Philox stream word
``rng_offset + ((b H + h) S_q + i) S_kv + j`` of ``seed`` is <= p_keep: the RNG op's BERNOULLI
convention (``ncudnn.reference.rng``) over the [B, H, S_q, S_kv] mask, so the oracle draws the same mask.
Tensor strides are runtime too (elements): one kernel serves every layout (BHSD, BSHD, interleaved QKV).
"""
import math
from dataclasses import dataclass
from typing import Optional

from numba import cuda, float32, float64, int64, uint64

from ..runtime.dtypes import loader
from ..rng.philox import _MASK, _S32, _ZERO, _unit, _word, philox4x32_10

NEG_INF = float32(-math.inf)


@dataclass(frozen=True)
class AttnSpec:
    """Compile-time facts of one attention problem family (dtypes, head dims, mask and bias options)."""

    D_QK: int
    D_V: int
    Q: str = "float32"          # dtypes of the tensors (kernel dtype names)
    K: str = "float32"
    V: str = "float32"
    O: str = "float32"          # forward output / backward's O input
    DO: str = "float32"
    DQ: str = "float32"
    DK: str = "float32"
    DV: str = "float32"
    BIAS: Optional[str] = None  # dtype of the additive bias (None: no bias)
    DBIAS: Optional[str] = None  # backward: dtype of the bias gradient (None: not wanted)
    SEQ: Optional[str] = None   # dtype of SEQ_LEN_Q / SEQ_LEN_KV (None: no padding mask)
    SCALE: Optional[str] = None  # dtype of an attention scale read from memory (None: a launch argument)
    ALIBI: bool = False
    HAS_LEFT: bool = False      # a left band bound (sliding window)
    HAS_RIGHT: bool = False     # a right band bound (causal = 0)
    BOTTOM_RIGHT: bool = False  # band aligned to the bottom-right corner (per-batch lengths)
    STATS: bool = True          # forward writes the log-sum-exp
    DROPOUT: bool = False       # Philox dropout on P (see the module docstring)


def seq_bounds(spec):
    """Device function ``(seqq, seqkv, b, SQ, SK) -> (lq, lk, shift)``: the valid query rows and keys of
    batch ``b`` and the diagonal's shift (0 top-left; lk - lq bottom-right)."""
    PAD, BOTTOM_RIGHT = spec.SEQ is not None, spec.BOTTOM_RIGHT

    @cuda.jit(device=True, inline=True)
    def bounds(seqq, seqkv, b, SQ, SK):
        lq = SQ
        lk = SK
        if PAD:
            lq = min(SQ, max(int64(0), int64(seqq[b])))
            lk = min(SK, max(int64(0), int64(seqkv[b])))
        shift = int64(0)
        if BOTTOM_RIGHT:
            shift = lk - lq
        return lq, lk, shift
    return bounds


def key_range(spec):
    """Device function ``(i0, i1, lk, shift, left, right) -> (j0, j1)``: the keys any query row in
    [i0, i1) keeps, as a half-open range (tiles outside it are skipped)."""
    HAS_LEFT, HAS_RIGHT = spec.HAS_LEFT, spec.HAS_RIGHT

    @cuda.jit(device=True, inline=True)
    def krange(i0, i1, lk, shift, left, right):
        j0 = int64(0)
        j1 = lk
        if HAS_RIGHT:
            j1 = min(lk, i1 - 1 + shift + right + 1)
        if HAS_LEFT:
            j0 = max(int64(0), i0 + shift - left + 1)
        return j0, j1
    return krange


def query_range(spec):
    """Device function ``(j0, j1, lq, shift, left, right) -> (i0, i1)``: the query rows that keep any key
    in [j0, j1)."""
    HAS_LEFT, HAS_RIGHT = spec.HAS_LEFT, spec.HAS_RIGHT

    @cuda.jit(device=True, inline=True)
    def qrange(j0, j1, lq, shift, left, right):
        i0 = int64(0)
        i1 = lq
        if HAS_RIGHT:
            i0 = max(int64(0), j0 - shift - right)
        if HAS_LEFT:
            i1 = min(lq, j1 - 1 - shift + left)
        return i0, i1
    return qrange


def unmasked_fn(spec):
    """Device function ``(dot, b, h, i, j, scale, slope, bias, bb, bh, bs, bk) -> float32``: scale * dot +
    bias + alibi, the score of a pair no mask drops (kernels call it directly on tiles no mask cuts)."""
    HAS_BIAS, ALIBI = spec.BIAS is not None, spec.ALIBI
    ld_bias = loader(spec.BIAS) if HAS_BIAS else None

    @cuda.jit(device=True, inline=True)
    def unmasked(dot, b, h, i, j, scale, slope, bias, bb, bh, bs, bk):
        s = dot * scale
        if HAS_BIAS:
            s += ld_bias(bias, b * bb + h * bh + i * bs + j * bk)
        if ALIBI:
            s += slope * float32(j - i)
        return s
    return unmasked


def score_fn(spec):
    """Device function ``(dot, b, h, i, j, lq, lk, shift, scale, left, right, slope, bias, bb, bh, bs, bk)
    -> float32``: :func:`unmasked_fn`'s score for a kept (i, j), NEG_INF for a masked one (outside the
    valid rows / keys or the diagonal band)."""
    HAS_LEFT, HAS_RIGHT = spec.HAS_LEFT, spec.HAS_RIGHT
    unmasked = unmasked_fn(spec)

    @cuda.jit(device=True, inline=True)
    def score(dot, b, h, i, j, lq, lk, shift, scale, left, right, slope, bias, bb, bh, bs, bk):
        if i >= lq or j >= lk:
            return NEG_INF
        if HAS_RIGHT:
            if j > i + shift + right:
                return NEG_INF
        if HAS_LEFT:
            if j <= i + shift - left:
                return NEG_INF
        return unmasked(dot, b, h, i, j, scale, slope, bias, bb, bh, bs, bk)
    return score


def alibi_slope_fn():
    """Device function ``(h, H) -> float32``: cudnn-frontend's ALiBi slope of query head ``h``."""

    @cuda.jit(device=True, inline=True)
    def slope(h, H):
        n = int64(1)
        while n * 2 <= H:
            n *= 2
        e = float32(h + 1) if h < n else float32(h - n) + float32(0.5)
        return float32(2.0) ** (float32(-8.0) * e / float32(n))
    return slope


def dropout_keep_fn():
    """Device function ``(b, h, i, j, H, SQ, SK, seed, rng_offset, p_keep) -> bool``: whether dropout keeps
    score (b, h, i, j) (see the module docstring)."""

    @cuda.jit(device=True, inline=True)
    def keep(b, h, i, j, H, SQ, SK, seed, rng_offset, p_keep):
        t = ((b * H + h) * SQ + i) * SK + j + rng_offset
        blk = uint64(t // 4)
        sd = uint64(seed)
        w0, w1, w2, w3 = philox4x32_10(blk & _MASK, blk >> _S32, _ZERO, _ZERO, sd & _MASK, sd >> _S32)
        return float64(_unit(_word(t % 4, w0, w1, w2, w3))) <= p_keep
    return keep


def llvm_inlined(fn, nargs):
    """``fn`` (an ``inline=True`` device function of ``nargs`` arguments) behind a ``forceinline`` wrapper, for the
    generated kernels that call it at many sites (a score per accumulator register): NVVM inlines the wrapper
    at each, where numba's IR inliner re-runs its whole-function passes once per call (minutes of JIT for an
    unrolled tile). The simulator's jit has neither; there ``fn`` itself is returned."""
    from ..primitives.ptx import SIM

    if SIM:
        return fn
    names = ", ".join(f"a{i}" for i in range(nargs))
    g = {"fn": fn}
    exec(f"def wrapper({names}):\n    return fn({names})\n", g)
    return cuda.jit(device=True, forceinline=True)(g["wrapper"])
