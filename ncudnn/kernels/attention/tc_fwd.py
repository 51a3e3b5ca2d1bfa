"""Flash-attention forward on tensor cores (mma.sync m16n8k16, FP16 / BF16 in, FP32 accumulation).

One block per (query tile, head, batch), WARPS warps; warp w owns the 16 query rows ``i0 + 16 w ..``.
Per key tile of BLOCK_N keys:

1. the block loads the K tile and the V tile into shared memory, two 16-bit values per 32-bit word
   (K as rows of head-dim pairs, V transposed: rows of key pairs per V column), so that every mma
   operand register is one word read from shared memory;
2. each warp computes its 16 x BLOCK_N scores with (BLOCK_N / 8) x (D_QK / 16) mma.sync, the scores
   staying in the accumulator registers: lane (g, t) = (lane >> 2, lane & 3) holds rows g and g + 8,
   columns 2t and 2t + 1 of every 8-key group;
3. scale, bias, ALiBi and the masks are applied to each score in its register (the shared
   ``score_fn``), the online softmax's row max and rescale run in registers (the four lanes of a row
   agree through two ``shfl_xor``), dropout is applied to P after it is summed;
4. P, rounded to the input type, is already laid out as mma A fragments (the C layout of two 8-key
   groups is the A layout of one 16-key step), so O (16 x D_V per warp, in registers) += P V takes
   (D_V / 8) x (BLOCK_N / 16) more mma.sync with V fragments read from the transposed tile.

At the end O = acc / l and Stats = m + log(l) (natural log), with the SIMT kernel's conventions for rows
without a kept key (O = 0, Stats = -inf) and padding rows (O = 0, Stats = 0).

Shared rows are padded to 4 mod 8 words, so the 8 x 4 (g, t) lanes of one fragment read hit 32 banks.
The source is generated (one named scalar per accumulator and fragment) so that they stay in registers.
"""
import functools
import math
from dataclasses import dataclass, replace

from numba import cuda, float32, int64, uint32

from ..primitives import ptx
from ..primitives.warp import shfl_xor
from ..runtime.dtypes import loader, storer
from .fwd import FWD_ARGS
from .spec import NEG_INF, AttnSpec, alibi_slope_fn, dropout_keep_fn, key_range, score_fn, seq_bounds

__all__ = ["TcAttnConfig", "tc_fwd_kernel", "tc_fwd_grid", "tc_check", "tc_dtypes_check", "tc_configs", "tc_default",
           "tc_smem_bytes"]

#: static shared memory a block may declare (bytes)
SMEM_LIMIT = 48 * 1024
#: head dims the kernel takes (multiples of 16: the mma k step; <= 128: O's registers)
MAX_D = 128
WARP_COUNTS = (2, 4, 8)
KEY_TILES = (16, 32, 64)
HALF = ("bfloat16", "float16")


@dataclass(frozen=True)
class TcAttnConfig:
    WARPS: int = 4        # 16 query rows a warp: BLOCK_M = 16 WARPS
    BLOCK_N: int = 32     # keys per streamed tile

    @property
    def BLOCK_M(self):
        return 16 * self.WARPS

    @property
    def THREADS(self):
        return 32 * self.WARPS

    def replace(self, **kw):
        return replace(self, **kw)


def _words(d):
    """Words a shared row of ``d`` 16-bit values takes: d / 2 padded to 4 mod 8."""
    return d // 2 + 4


def tc_smem_bytes(cfg, d_qk, d_v):
    """Static shared memory: the Q tile, the K tile, the transposed V tile (32-bit words)."""
    return 4 * (cfg.BLOCK_M * _words(d_qk) + cfg.BLOCK_N * _words(d_qk) + d_v * _words(cfg.BLOCK_N))


def tc_dtypes_check(dtypes):
    """(ok, reason): whether the tensor-core forward takes these (Q, K, V) data types."""
    q, k, v = dtypes
    if q not in HALF or k != q or v != q:
        return False, f"Q / K / V {q} / {k} / {v}: the tensor-core forward takes all three FP16 or all three BF16"
    return True, ""


def tc_check(dtypes, d_qk, d_v, cfg=None):
    """(ok, reason): whether the tensor-core forward takes these dtypes (Q, K, V) and head dims (and ``cfg``)."""
    ok, why = tc_dtypes_check(dtypes)
    if not ok:
        return ok, why
    for name, d in (("Q/K head dim", d_qk), ("V head dim", d_v)):
        if d % 16 or not 16 <= d <= MAX_D:
            return False, f"{name} {d}: the tensor-core forward takes multiples of 16 up to {MAX_D}"
    if cfg is None:
        return True, ""
    if cfg.WARPS not in WARP_COUNTS or cfg.BLOCK_N not in KEY_TILES:
        return False, f"WARPS {cfg.WARPS} not in {WARP_COUNTS} or BLOCK_N {cfg.BLOCK_N} not in {KEY_TILES}"
    nbytes = tc_smem_bytes(cfg, d_qk, d_v)
    if nbytes > SMEM_LIMIT:
        return False, f"{nbytes} bytes of shared memory > {SMEM_LIMIT}"
    if d_v // 2 + 2 * cfg.BLOCK_N // 8 > 96:
        return False, f"{d_v // 2} O and {2 * cfg.BLOCK_N // 8} score accumulators a lane: too many registers"
    return True, ""


def tc_configs(dtypes, d_qk, d_v):
    """Every config that builds, largest key tile and most warps first."""
    return [c for n in reversed(KEY_TILES) for w in reversed(WARP_COUNTS)
            for c in (TcAttnConfig(w, n),) if tc_check(dtypes, d_qk, d_v, c)[0]]


def tc_default(dtypes, d_qk, d_v):
    """4 warps and the largest key tile that fits (None when the problem is not taken)."""
    for n in reversed(KEY_TILES):
        c = TcAttnConfig(4, n)
        if tc_check(dtypes, d_qk, d_v, c)[0]:
            return c
    cs = tc_configs(dtypes, d_qk, d_v)
    return cs[0] if cs else None


def tc_fwd_grid(cfg, B, H, SQ):
    return (max(1, math.ceil(SQ / cfg.BLOCK_M)), H, B)


def _mma_step(emit, acc, a, b, smem, words, ks, groups):
    """One k16 step of a warp's product into the 8-column groups ``acc{n}_0..3``: A fragments ``a0..a3``
    (already loaded), B fragments ``b0, b1`` read from ``smem`` rows of ``words`` words (row ``8 n + g``,
    pairs ``8 ks + t`` and ``8 ks + 4 + t``)."""
    for n in range(groups):
        emit(f"{b}0 = {smem}[({8 * n} + g) * {words} + {8 * ks} + t]")
        emit(f"{b}1 = {smem}[({8 * n} + g) * {words} + {8 * ks + 4} + t]")
        c = ", ".join(f"{acc}{n}_{e}" for e in range(4))
        emit(f"{c} = mma({a}0, {a}1, {a}2, {a}3, {b}0, {b}1, {c})")


def _entry(n, e):
    """(row variable suffix, column expression) of score accumulator ``s{n}_{e}`` (C fragment layout)."""
    return ("a" if e < 2 else "b"), f"n0 + {8 * n + (e & 1)} + 2 * t"


def _source(spec, cfg):
    """The kernel's Python source for ``spec`` / ``cfg`` (names resolved from :func:`tc_fwd_kernel`'s globals)."""
    D, DV, BN, BM, NT = spec.D_QK, spec.D_V, cfg.BLOCK_N, cfg.BLOCK_M, cfg.THREADS
    QW, KW, VW = _words(D), _words(D), _words(BN)
    NS, NO = BN // 8, DV // 8            # 8-key score groups, 8-column O groups a warp holds
    KS_QK, KS_PV = D // 16, BN // 16     # mma k steps of the two products
    L = []
    a = L.append
    a(f"def attn_tc_fwd({', '.join(FWD_ARGS)}):")
    body = []
    b = body.append
    b(f"q_s = cuda.shared.array({BM * QW}, uint32)")
    b(f"k_s = cuda.shared.array({BN * KW}, uint32)")
    b(f"v_s = cuda.shared.array({DV * VW}, uint32)")
    b("tid = cuda.threadIdx.x")
    b("lane = tid & 31")
    b("warp = tid >> 5")
    b("g = lane >> 2")
    b("t = lane & 3")
    b("bz = int64(cuda.blockIdx.z)")
    b("h = int64(cuda.blockIdx.y)")
    b(f"i0 = int64(cuda.blockIdx.x) * {BM}")
    b("hk = h // (H // HK)")
    b("lq, lk, shift = bounds(seq_q, seq_kv, bz, SQ, SK)")
    b("sc = float32(scale)")
    if spec.SCALE is not None:
        b("sc = ld_scale(scale_arr, 0)")
    b("slope = float32(0.0)")
    if spec.ALIBI:
        b("slope = slope_of(h, H)")
    b("qbase = bz * qb + h * qh")
    b("kbase = bz * kb + hk * kh")
    b("vbase = bz * vb + hk * vh")
    b("# ---- the query tile, two head-dim values a word")
    b(f"for e in range(tid, {BM * (D // 2)}, {NT}):")
    b(f"    r = e // {D // 2}")
    b(f"    c = e % {D // 2}")
    b("    i = i0 + r")
    b("    w = uint32(0)")
    b("    if i < lq:")
    b("        w = pack(ld_q(q, qbase + i * qs + 2 * c * qd), ld_q(q, qbase + i * qs + (2 * c + 1) * qd))")
    b(f"    q_s[r * {QW} + c] = w")
    b("r0 = warp * 16 + g            # this lane's rows in the tile: r0 and r0 + 8")
    b("ia = i0 + r0")
    b("ib = ia + 8")
    b("m_a = NEG_INF")
    b("m_b = NEG_INF")
    b("l_a = float32(0.0)")
    b("l_b = float32(0.0)")
    for n in range(NO):
        for e in range(4):
            b(f"o{n}_{e} = float32(0.0)")
    b(f"j0, j1 = krange(i0, min(i0 + {BM}, lq), lk, shift, left, right)")
    b(f"for n0 in range((j0 // {BN}) * {BN}, j1, {BN}):")
    lp = []
    c_ = lp.append
    c_("cuda.syncthreads()")
    c_("# ---- K tile (rows of head-dim pairs) and V tile (transposed: rows of key pairs)")
    c_(f"for e in range(tid, {BN * (D // 2)}, {NT}):")
    c_(f"    r = e // {D // 2}")
    c_(f"    c = e % {D // 2}")
    c_("    j = n0 + r")
    c_("    w = uint32(0)")
    c_("    if j < lk:")
    c_("        w = pack(ld_k(k, kbase + j * ks + 2 * c * kd), ld_k(k, kbase + j * ks + (2 * c + 1) * kd))")
    c_(f"    k_s[r * {KW} + c] = w")
    c_(f"for e in range(tid, {(BN // 2) * DV}, {NT}):")
    c_(f"    p = e // {DV}")
    c_(f"    c = e % {DV}")
    c_("    j = n0 + 2 * p")
    c_("    lo = float32(0.0)")
    c_("    hi = float32(0.0)")
    c_("    if j < lk:")
    c_("        lo = ld_v(v, vbase + j * vs + c * vd)")
    c_("    if j + 1 < lk:")
    c_("        hi = ld_v(v, vbase + (j + 1) * vs + c * vd)")
    c_(f"    v_s[c * {VW} + p] = pack(lo, hi)")
    c_("cuda.syncthreads()")
    c_("# ---- scores S = Q K^T in registers")
    for n in range(NS):
        for e in range(4):
            c_(f"s{n}_{e} = float32(0.0)")
    for ks in range(KS_QK):
        c_(f"qa0 = q_s[r0 * {QW} + {8 * ks} + t]")
        c_(f"qa1 = q_s[(r0 + 8) * {QW} + {8 * ks} + t]")
        c_(f"qa2 = q_s[r0 * {QW} + {8 * ks + 4} + t]")
        c_(f"qa3 = q_s[(r0 + 8) * {QW} + {8 * ks + 4} + t]")
        _mma_step(c_, "s", "qa", "kb", "k_s", KW, ks, NS)
    c_("# ---- masked, biased scores; the online softmax (rows ia: entries 0, 1; ib: entries 2, 3)")
    c_("mx_a = m_a")
    c_("mx_b = m_b")
    for n in range(NS):
        for e in range(4):
            r, col = _entry(n, e)
            c_(f"s{n}_{e} = score(s{n}_{e}, bz, h, i{r}, {col}, lq, lk, shift, sc, left, right, slope, bias, bb, bh, bs, bk)")
            c_(f"mx_{r} = max(mx_{r}, s{n}_{e})")
    for r in "ab":
        c_(f"mx_{r} = max(mx_{r}, shfl_xor(mx_{r}, 1))")
        c_(f"mx_{r} = max(mx_{r}, shfl_xor(mx_{r}, 2))")
        c_(f"base_{r} = mx_{r} if mx_{r} != NEG_INF else float32(0.0)")
        c_(f"alpha_{r} = math.exp(m_{r} - base_{r})")
        c_(f"m_{r} = mx_{r}")
        c_(f"tot_{r} = float32(0.0)")
    for n in range(NS):
        for e in range(4):
            r, col = _entry(n, e)
            c_(f"s{n}_{e} = math.exp(s{n}_{e} - base_{r})")
            c_(f"tot_{r} += s{n}_{e}")
            if spec.DROPOUT:
                c_(f"if drop_keep(bz, h, i{r}, {col}, H, SQ, SK, seed, rng_offset, p_keep):")
                c_(f"    s{n}_{e} *= drop_scale")
                c_("else:")
                c_(f"    s{n}_{e} = float32(0.0)")
    for r in "ab":
        c_(f"l_{r} = l_{r} * alpha_{r} + tot_{r}")
    for n in range(NO):
        c_(f"o{n}_0 *= alpha_a")
        c_(f"o{n}_1 *= alpha_a")
        c_(f"o{n}_2 *= alpha_b")
        c_(f"o{n}_3 *= alpha_b")
    c_("# ---- O += P V: P's accumulators are the A fragments, V's from the transposed tile")
    for ks in range(KS_PV):
        c_(f"pa0 = pack(s{2 * ks}_0, s{2 * ks}_1)")
        c_(f"pa1 = pack(s{2 * ks}_2, s{2 * ks}_3)")
        c_(f"pa2 = pack(s{2 * ks + 1}_0, s{2 * ks + 1}_1)")
        c_(f"pa3 = pack(s{2 * ks + 1}_2, s{2 * ks + 1}_3)")
        _mma_step(c_, "o", "pa", "vb", "v_s", VW, ks, NO)
    body += ["    " + s for s in lp]
    b("# ---- epilogue: the row sums over the four lanes of a row; O = acc / l, Stats = m + log(l)")
    for r in "ab":
        b(f"l_{r} += shfl_xor(l_{r}, 1)")
        b(f"l_{r} += shfl_xor(l_{r}, 2)")
        b(f"inv_{r} = float32(0.0)")
        b(f"if i{r} < lq and l_{r} > float32(0.0):")
        b(f"    inv_{r} = float32(1.0) / l_{r}")
    b("obase = bz * ob + h * oh")
    for r, es in (("a", (0, 1)), ("b", (2, 3))):
        b(f"if i{r} < SQ:")
        for n in range(NO):
            for e in es:
                b(f"    st_o(o, obase + i{r} * os + ({8 * n + (e & 1)} + 2 * t) * od, o{n}_{e} * inv_{r})")
    if spec.STATS:
        for r in "ab":
            b(f"if t == 0 and i{r} < SQ:")
            b("    val = float32(0.0)")
            b(f"    if i{r} < lq:")
            b("        val = NEG_INF")
            b(f"        if l_{r} > float32(0.0):")
            b(f"            val = m_{r} + math.log(l_{r})")
            b(f"    st_s(stats, bz * sb + h * sh + i{r} * ss, val)")
    L += ["    " + s for s in body]
    return "\n".join(L) + "\n"


@functools.lru_cache(maxsize=None)
def tc_fwd_kernel(spec: AttnSpec, cfg: TcAttnConfig):
    """The ``cuda.jit`` tensor-core forward kernel (launch: :func:`tc_fwd_grid` x cfg.THREADS; FWD_ARGS)."""
    ok, why = tc_check((spec.Q, spec.K, spec.V), spec.D_QK, spec.D_V, cfg)
    if not ok:
        raise ValueError(f"tensor-core attention forward config {cfg}: {why}")
    bf16 = spec.Q == "bfloat16"
    g = dict(__name__=__name__, cuda=cuda, math=math, float32=float32, int64=int64, uint32=uint32, NEG_INF=NEG_INF,
             shfl_xor=shfl_xor, mma=ptx.mma_m16n8k16_bf16 if bf16 else ptx.mma_m16n8k16_f16,
             pack=ptx.pack_bf16x2 if bf16 else ptx.pack_f16x2,
             ld_q=loader(spec.Q), ld_k=loader(spec.K), ld_v=loader(spec.V), st_o=storer(spec.O),
             st_s=storer("float32"), ld_scale=loader(spec.SCALE) if spec.SCALE is not None else None,
             bounds=seq_bounds(spec), krange=key_range(spec), score=score_fn(spec), slope_of=alibi_slope_fn(),
             drop_keep=dropout_keep_fn())
    exec(compile(_source(spec, cfg), f"<attn_tc_fwd {spec.D_QK}x{spec.D_V} {cfg}>", "exec"), g)
    return cuda.jit(g["attn_tc_fwd"])
