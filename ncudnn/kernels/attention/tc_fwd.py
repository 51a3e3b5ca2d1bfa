"""Flash-attention forward on tensor cores (mma.sync m16n8k16, FP16 / BF16 in, FP32 accumulation).

One block per (query tile, head, batch), WARPS warps; warp w owns the 16 query rows ``i0 + 16 w ..``.
Shared memory (dynamic, 16-bit rows padded by 8 elements so that the 8 rows one ldmatrix matrix reads
fall in distinct bank groups): the Q tile, and two stages each of the K tile and the V tile (key rows).

1. the block copies its Q tile and the first K and V tiles (``cp.async`` 16-byte chunks, zero-filled
   past the sequence, when every row is 16-byte aligned: the ``ASYNC`` configs; element copies
   otherwise), then every warp loads its Q fragments into registers (ldmatrix.x4), kept for the loop;
2. per key tile of BLOCK_N keys: S = Q K^T in accumulator registers ((BLOCK_N / 8) x (D_QK / 16)
   mma.sync, K fragments by ldmatrix.x4) while the next K tile is copied into the other stage;
   lane (g, t) = (lane >> 2, lane & 3) holds rows g and g + 8, columns 2t and 2t + 1 of every 8-key
   group;
3. scores in log2 units (scale x log2 e): a tile the diagonal band, the padding and the sequence ends
   cannot cut takes the plain product (plus bias and ALiBi); the others go through the shared masked
   ``score_fn``. The online softmax's row max and rescale run in registers (the four lanes of a row agree
   through two ``shfl_xor``), one ``ex2.approx`` per score; dropout is applied to P after it is summed;
4. P, rounded to the input type, is already laid out as mma A fragments (the C layout of two 8-key
   groups is the A layout of one 16-key step): O (16 x D_V a warp, in registers) += P V, V fragments by
   ldmatrix.x4.trans from the key-major tile, while the next V tile is copied.

Two commit groups a tile (K, then V) with ``wait_group 1`` before each use keep one copy in flight under
every product; a stage is refilled only after the barrier that follows its last reader.

At the end O = acc / l and Stats = (m + log2 l) ln 2 (natural log), with the SIMT kernel's conventions for
rows without a kept key (O = 0, Stats = -inf) and padding rows (O = 0, Stats = 0).
The source is generated (one named scalar per accumulator and fragment) so that they stay in registers.
"""
import functools
import math
from dataclasses import dataclass, replace

from numba import cuda, float32, int32, int64, uint16, uint32

from ..primitives import ptx
from ..primitives.warp import shfl_xor
from ..runtime.dtypes import loader, storer
from .fwd import FWD_ARGS
from .spec import (NEG_INF, AttnSpec, alibi_slope_fn, dropout_keep_fn, key_range, llvm_inlined, score_fn,
                   seq_bounds, unmasked_fn)

__all__ = ["TcAttnConfig", "tc_fwd_kernel", "tc_fwd_source", "tc_fwd_grid", "tc_check", "tc_dtypes_check",
           "tc_configs", "tc_default", "tc_smem_bytes", "tc_head_dims_check", "copy_tile", "copy_setup", "emit_softmax",
           "emit_epilogue"]

#: dynamic shared memory a block may take on sm_90 (bytes; opted in above 48 KB at launch)
SMEM_LIMIT = 227 * 1024
#: head dims the kernel takes (multiples of 16: the mma k step; <= 128: O's registers)
MAX_D = 128
WARP_COUNTS = (2, 4, 8)
KEY_TILES = (16, 32, 64, 128)
HALF = ("bfloat16", "float16")
#: 32-bit registers a lane may give the O and S accumulators and the Q fragments together
MAX_FRAGMENT_REGS = 128
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
PAD = 8     # elements a shared row is padded by (16 bytes)


@dataclass(frozen=True)
class TcAttnConfig:
    WARPS: int = 4        # 16 query rows a warp: BLOCK_M = 16 WARPS
    BLOCK_N: int = 64     # keys per streamed tile
    ASYNC: bool = True    # cp.async 16-byte copies (every Q / K / V row 16-byte aligned, unit head-dim stride)

    @property
    def BLOCK_M(self):
        return 16 * self.WARPS

    @property
    def THREADS(self):
        return 32 * self.WARPS

    def replace(self, **kw):
        return replace(self, **kw)


def _layout(cfg, d_qk, d_v):
    """(Q, K, V row lengths, K stage base, V stage base, total) in 16-bit elements of the shared buffer."""
    qr, kr, vr = d_qk + PAD, d_qk + PAD, d_v + PAD
    k0 = cfg.BLOCK_M * qr
    v0 = k0 + 2 * cfg.BLOCK_N * kr
    return qr, kr, vr, k0, v0, v0 + 2 * cfg.BLOCK_N * vr


def tc_smem_bytes(cfg, d_qk, d_v):
    """Dynamic shared memory of a block: the Q tile and two stages of the K and V tiles."""
    return 2 * _layout(cfg, d_qk, d_v)[-1]


def tc_dtypes_check(dtypes):
    """(ok, reason): whether the tensor-core forward takes these (Q, K, V) data types."""
    q, k, v = dtypes
    if q not in HALF or k != q or v != q:
        return False, f"Q / K / V {q} / {k} / {v}: the tensor-core forward takes all three FP16 or all three BF16"
    return True, ""


def tc_head_dims_check(d_qk, d_v, what):
    """(ok, reason): both head dims multiples of 16 (the mma k step) up to MAX_D (the tensor-core ``what``)."""
    for name, d in (("Q/K head dim", d_qk), ("V head dim", d_v)):
        if d % 16 or not 16 <= d <= MAX_D:
            return False, f"{name} {d}: the tensor-core {what} takes multiples of 16 up to {MAX_D}"
    return True, ""


def tc_check(dtypes, d_qk, d_v, cfg=None):
    """(ok, reason): whether the tensor-core forward takes these dtypes (Q, K, V) and head dims (and ``cfg``)."""
    ok, why = tc_dtypes_check(dtypes)
    if not ok:
        return ok, why
    ok, why = tc_head_dims_check(d_qk, d_v, "forward")
    if not ok or cfg is None:
        return ok, why
        return True, ""
    if cfg.WARPS not in WARP_COUNTS or cfg.BLOCK_N not in KEY_TILES:
        return False, f"WARPS {cfg.WARPS} not in {WARP_COUNTS} or BLOCK_N {cfg.BLOCK_N} not in {KEY_TILES}"
    nbytes = tc_smem_bytes(cfg, d_qk, d_v)
    if nbytes > SMEM_LIMIT:
        return False, f"{nbytes} bytes of shared memory > {SMEM_LIMIT}"
    regs = d_v // 2 + cfg.BLOCK_N // 2 + d_qk // 4
    if regs > MAX_FRAGMENT_REGS:
        return False, (f"{d_v // 2} O, {cfg.BLOCK_N // 2} score and {d_qk // 4} Q registers a lane: more than "
                       f"{MAX_FRAGMENT_REGS}")
    return True, ""


def tc_configs(dtypes, d_qk, d_v, async_=True):
    """Every config that builds, largest key tile and most warps first."""
    return [c for n in reversed(KEY_TILES) for w in reversed(WARP_COUNTS)
            for c in (TcAttnConfig(w, n, async_),) if tc_check(dtypes, d_qk, d_v, c)[0]]


def tc_default(dtypes, d_qk, d_v, async_=True):
    """4 warps and 64-key tiles, else the largest key tile that fits (None when the problem is not taken)."""
    for n in (64, 32, 16):
        c = TcAttnConfig(4, n, async_)
        if tc_check(dtypes, d_qk, d_v, c)[0]:
            return c
    cs = tc_configs(dtypes, d_qk, d_v, async_)
    return cs[0] if cs else None


def tc_fwd_grid(cfg, B, H, SQ):
    return (max(1, math.ceil(SQ / cfg.BLOCK_M)), H, B)


def _entry(n, e):
    """(row variable suffix, column expression) of score accumulator ``s{n}_{e}`` (C fragment layout)."""
    return ("a" if e < 2 else "b"), f"n0 + {8 * n + (e & 1)} + 2 * t"


def copy_tile(emit, cfg, arr, base, row_stride, d_stride, rows, first, bound, d, sm_row, sm_off, fp16):
    """Copy ``rows`` rows of ``d`` values (global rows ``first ..``, zero past ``bound``) into the shared
    rows at element ``sm_off``: 16-byte cp.async chunks (ASYNC) or element copies. When the block's threads
    tile the chunks evenly, thread ``tid`` copies chunk ``cc = tid % (d / 8)`` of rows ``cr + k (threads /
    (d / 8))`` (``cr = tid // (d / 8)``, set up once by :func:`copy_setup`), with no index arithmetic
    per chunk."""
    nt = cfg.THREADS
    if cfg.ASYNC:
        ch = d // 8
        if _even(cfg, rows, d):
            step = nt // ch
            for k in range(rows * ch // nt):
                emit(f"gr = {first} + cr{d} + {k * step}")
                emit(f"src = {base} + gr * {row_stride} + 8 * cc{d} if gr < {bound} else {base}")
                emit(f"ptx.cp_async_cg_16_zfill_a(sm, sbase + 2 * ({sm_off} + (cr{d} + {k * step}) * {sm_row} + "
                     f"8 * cc{d}), {arr}, src, 16 if gr < {bound} else 0)")
            return
        emit(f"for e in range(tid, {rows * ch}, {nt}):")
        emit(f"    r = e // {ch}")
        emit(f"    c = e - r * {ch}")
        emit(f"    gr = {first} + r")
        emit(f"    nb = 16 if gr < {bound} else 0")
        emit(f"    src = {base} + gr * {row_stride} + 8 * c if gr < {bound} else {base}")
        emit(f"    ptx.cp_async_cg_16_zfill_a(sm, sbase + 2 * ({sm_off} + r * {sm_row} + 8 * c), {arr}, src, nb)")
    else:
        emit(f"for e in range(tid, {rows * d}, {nt}):")
        emit(f"    r = e // {d}")
        emit(f"    c = e - r * {d}")
        emit(f"    gr = {first} + r")
        emit("    w = uint16(0)")
        emit(f"    if gr < {bound}:")
        if fp16:   # the float16 value's bits: the low half of a packed pair
            emit(f"        w = uint16(pack(ld16({arr}, {base} + gr * {row_stride} + c * {d_stride}), float32(0.0)) "
                 "& uint32(0xFFFF))")
        else:
            emit(f"        w = {arr}[{base} + gr * {row_stride} + c * {d_stride}]")
        emit(f"    sm[{sm_off} + r * {sm_row} + c] = w")


def _even(cfg, rows, d):
    """Whether the block's threads tile ``rows`` rows of ``d / 8`` chunks evenly (see :func:`copy_tile`)."""
    ch = d // 8
    return cfg.THREADS % ch == 0 and (rows * ch) % cfg.THREADS == 0


def copy_setup(emit, cfg, dims):
    """The chunk and first row each thread copies (``cc{d}``, ``cr{d}``) for the even cases of :func:`copy_tile`."""
    if not cfg.ASYNC:
        return
    for d in sorted(set(dims)):
        if cfg.THREADS % (d // 8) == 0:
            emit(f"cc{d} = tid % {d // 8}")
            emit(f"cr{d} = tid // {d // 8}")


def emit_softmax(emit, spec, BM, BN):
    """Lines turning the score accumulators ``s{n}_{e}`` of key tile ``n0`` (BN keys of the BM query rows from
    ``i0``; this lane's rows ``ia`` / ``ib``) into P: scores in log2 units (the plain product where no mask cuts
    the tile), the online softmax's row max over the four lanes of a row, ``alpha_a`` / ``alpha_b`` (the rescale
    of what came before), one ``ex2.approx`` per score, dropout on P, and the row sums ``l_a`` / ``l_b``.
    Shared by the mma.sync and the wgmma forward (the same accumulator layout)."""
    NS = BN // 8
    emit("# ---- scores in log2 units; the masked path only where the band, padding or sequence end cut the tile")
    cond = [f"n0 + {BN} <= lk", f"i0 + {BM} <= lq"]    # (rows past lq would read the bias out of bounds)
    if spec.HAS_RIGHT:
        cond.append(f"n0 + {BN - 1} <= i0 + shift + right")
    if spec.HAS_LEFT:
        cond.append(f"n0 > i0 + {BM - 1} + shift - left")
    emit(f"if {' and '.join(cond)}:")
    plain = spec.BIAS is None and not spec.ALIBI
    for n in range(NS):
        for e in range(4):
            r, col = _entry(n, e)
            if plain:
                emit(f"    s{n}_{e} = s{n}_{e} * sc2")
            else:
                emit(f"    s{n}_{e} = unmasked(s{n}_{e}, bz, h, i{r}, {col}, sc, slope, bias, bb, bh, bs, bk) * LOG2E")
    emit("else:")
    for n in range(NS):
        for e in range(4):
            r, col = _entry(n, e)
            emit(f"    s{n}_{e} = score(s{n}_{e}, bz, h, i{r}, {col}, lq, lk, shift, sc, left, right, slope, bias, "
                 "bb, bh, bs, bk) * LOG2E")
    emit("# ---- the online softmax (rows ia: entries 0, 1; ib: entries 2, 3)")
    emit("mx_a = m_a")
    emit("mx_b = m_b")
    for n in range(NS):
        for e in range(4):
            r, _ = _entry(n, e)
            emit(f"mx_{r} = max(mx_{r}, s{n}_{e})")
    for r in "ab":
        emit(f"mx_{r} = max(mx_{r}, shfl_xor(mx_{r}, 1))")
        emit(f"mx_{r} = max(mx_{r}, shfl_xor(mx_{r}, 2))")
        emit(f"base_{r} = mx_{r} if mx_{r} != NEG_INF else float32(0.0)")
        emit(f"alpha_{r} = ptx.ex2_approx(m_{r} - base_{r})")
        emit(f"m_{r} = mx_{r}")
        emit(f"tot_{r} = float32(0.0)")
    for n in range(NS):
        for e in range(4):
            r, col = _entry(n, e)
            emit(f"s{n}_{e} = ptx.ex2_approx(s{n}_{e} - base_{r})")
            emit(f"tot_{r} += s{n}_{e}")
            if spec.DROPOUT:
                emit(f"if drop_keep(bz, h, i{r}, {col}, H, SQ, SK, seed, rng_offset, p_keep):")
                emit(f"    s{n}_{e} *= drop_scale")
                emit("else:")
                emit(f"    s{n}_{e} = float32(0.0)")
    for r in "ab":
        emit(f"l_{r} = l_{r} * alpha_{r} + tot_{r}")


def emit_epilogue(emit, spec, NO, recip="float32(1.0) / {}"):
    """Lines storing O = acc / l (``o{n}_{e}``, NO 8-column blocks) and Stats = (m + log2 l) ln 2, with the row
    sums completed over the four lanes of a row; rows without a kept key give O = 0, Stats = -inf, padding rows
    O = 0, Stats = 0. ``recip``: the reciprocal's expression, ``{}`` the row sum."""
    emit("# ---- epilogue: the row sums over the four lanes of a row; O = acc / l, Stats = (m + log2 l) ln 2")
    for r in "ab":
        emit(f"l_{r} += shfl_xor(l_{r}, 1)")
        emit(f"l_{r} += shfl_xor(l_{r}, 2)")
        emit(f"inv_{r} = float32(0.0)")
        emit(f"if i{r} < lq and l_{r} > float32(0.0):")
        emit(f"    inv_{r} = {recip.format(f'l_{r}')}")
    emit("obase = bz * ob + h * oh")
    for r, es in (("a", (0, 1)), ("b", (2, 3))):
        emit(f"if i{r} < SQ:")
        for n in range(NO):
            for e in es:
                emit(f"    st_o(o, obase + i{r} * os + ({8 * n + (e & 1)} + 2 * t) * od, o{n}_{e} * inv_{r})")
    if spec.STATS:
        for r in "ab":
            emit(f"if t == 0 and i{r} < SQ:")
            emit("    val = float32(0.0)")
            emit(f"    if i{r} < lq:")
            emit("        val = NEG_INF")
            emit(f"        if l_{r} > float32(0.0):")
            emit(f"            val = (m_{r} + math.log2(l_{r})) * LN2")
            emit(f"    st_s(stats, bz * sb + h * sh + i{r} * ss, val)")


def _source(spec, cfg):
    """The kernel's Python source for ``spec`` / ``cfg`` (names resolved from :func:`tc_fwd_kernel`'s globals)."""
    D, DV, BN, BM = spec.D_QK, spec.D_V, cfg.BLOCK_N, cfg.BLOCK_M
    QR, KR, VR, K0, V0, _ = _layout(cfg, D, DV)
    NS, NO = BN // 8, DV // 8            # 8-key score groups, 8-column O groups a warp holds
    KS_QK, KS_PV = D // 16, BN // 16     # mma k steps of the two products
    fp16 = spec.Q == "float16"
    L = [f"def attn_tc_fwd({', '.join(FWD_ARGS)}):"]
    body = []
    b = body.append
    b("sm = cuda.shared.array(0, uint16)" if ptx.SIM else "sm = cuda.shared.array(0, uint16, alignment=128)")
    b("sbase = int32(ptx.cvta_shared(sm, 0))")
    b("tid = cuda.threadIdx.x")
    b("lane = tid & 31")
    b("warp = tid >> 5")
    b("g = lane >> 2")
    b("t = lane & 3")
    b("lr = lane & 7                 # ldmatrix: the row this lane addresses in matrix lane >> 3")
    b("lj = lane >> 3")
    b("bz = int64(cuda.blockIdx.z)")
    b("h = int64(cuda.blockIdx.y)")
    b(f"i0 = int64(cuda.blockIdx.x) * {BM}")
    b("hk = h // (H // HK)")
    b("lq, lk, shift = bounds(seq_q, seq_kv, bz, SQ, SK)")
    b("sc = float32(scale)")
    if spec.SCALE is not None:
        b("sc = ld_scale(scale_arr, 0)")
    b("sc2 = sc * LOG2E")
    b("slope = float32(0.0)")
    if spec.ALIBI:
        b("slope = slope_of(h, H)")
    copy_setup(b, cfg, (D, DV))
    b("qbase = bz * qb + h * qh")
    b("kbase = bz * kb + hk * kh")
    b("vbase = bz * vb + hk * vh")
    b(f"j0, j1 = krange(i0, min(i0 + {BM}, lq), lk, shift, left, right)")
    b(f"nstart = (j0 // {BN}) * {BN}")
    b(f"ntiles = (j1 - nstart + {BN - 1}) // {BN} if j1 > nstart else 0")
    b("# ---- the Q tile and the first K / V tiles")
    copy_tile(b, cfg, "q", "qbase", "qs", "qd", BM, "i0", "SQ", D, QR, "0", fp16)
    b("ptx.cp_async_commit()")
    b("if ntiles > 0:")
    blk = []
    copy_tile(blk.append, cfg, "k", "kbase", "ks", "kd", BN, "nstart", "lk", D, KR, K0, fp16)
    body += ["    " + s for s in blk]
    b("ptx.cp_async_commit()")
    b("if ntiles > 0:")
    blk = []
    copy_tile(blk.append, cfg, "v", "vbase", "vs", "vd", BN, "nstart", "lk", DV, VR, V0, fp16)
    body += ["    " + s for s in blk]
    b("ptx.cp_async_commit()")
    b("ptx.cp_async_wait_group(2)")
    b("cuda.syncthreads()")
    b("# ---- this warp's Q fragments (registers for the whole loop)")
    b(f"qa_l = sbase + 2 * ((warp * 16 + (lj & 1) * 8 + lr) * {QR} + (lj >> 1) * 8)")
    for ks in range(KS_QK):
        b(f"q{ks}_0, q{ks}_1, q{ks}_2, q{ks}_3 = ptx.ldmatrix_x4_a(sm, qa_l + {2 * 16 * ks})")
    b("# lane addresses of the K fragments (keys (lj >> 1) 8 + lr, head dims (lj & 1) 8) and of the V ones")
    b(f"ka_l = sbase + 2 * ({K0} + ((lj >> 1) * 8 + lr) * {KR} + (lj & 1) * 8)")
    b(f"va_l = sbase + 2 * ({V0} + ((lj & 1) * 8 + lr) * {VR} + (lj >> 1) * 8)")
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
    b("for it in range(ntiles):")
    lp = []
    c_ = lp.append
    c_(f"n0 = nstart + it * {BN}")
    c_("st = it & 1")
    c_("ptx.cp_async_wait_group(1)    # this K tile landed (the V tile may still be in flight)")
    c_("cuda.syncthreads()")
    c_(f"kst = ka_l + st * {2 * BN * KR}")
    c_("# ---- scores S = Q K^T in registers")
    for n in range(NS):
        for e in range(4):
            c_(f"s{n}_{e} = float32(0.0)")
    for ks in range(KS_QK):
        for p in range(NS // 2):
            c_(f"kb0, kb1, kb2, kb3 = ptx.ldmatrix_x4_a(sm, kst + {2 * (16 * p * KR + 16 * ks)})")
            for n, (x, y) in ((2 * p, ("kb0", "kb1")), (2 * p + 1, ("kb2", "kb3"))):
                acc = ", ".join(f"s{n}_{e}" for e in range(4))
                c_(f"{acc} = mma(q{ks}_0, q{ks}_1, q{ks}_2, q{ks}_3, {x}, {y}, {acc})")
    c_("# ---- the next K tile into the other stage (its readers passed the barrier above)")
    c_("if it + 1 < ntiles:")
    blk = []
    copy_tile(blk.append, cfg, "k", "kbase", "ks", "kd", BN, f"(n0 + {BN})", "lk", D, KR, f"({K0} + (st ^ 1) * {BN * KR})",
               fp16)
    lp += ["    " + s for s in blk]
    c_("ptx.cp_async_commit()")
    emit_softmax(c_, spec, BM, BN)
    for n in range(NO):
        c_(f"o{n}_0 *= alpha_a")
        c_(f"o{n}_1 *= alpha_a")
        c_(f"o{n}_2 *= alpha_b")
        c_(f"o{n}_3 *= alpha_b")
    c_("ptx.cp_async_wait_group(1)    # this V tile landed (the next K tile may still be in flight)")
    c_("cuda.syncthreads()")
    c_(f"vst = va_l + st * {2 * BN * VR}")
    c_("# ---- O += P V: P's accumulators are the A fragments, V's by ldmatrix.trans of the key-major tile")
    for ks in range(KS_PV):
        c_(f"pa0 = pack(s{2 * ks}_0, s{2 * ks}_1)")
        c_(f"pa1 = pack(s{2 * ks}_2, s{2 * ks}_3)")
        c_(f"pa2 = pack(s{2 * ks + 1}_0, s{2 * ks + 1}_1)")
        c_(f"pa3 = pack(s{2 * ks + 1}_2, s{2 * ks + 1}_3)")
        for p in range(NO // 2):
            c_(f"vb0, vb1, vb2, vb3 = ptx.ldmatrix_x4_trans_a(sm, vst + {2 * (16 * ks * VR + 16 * p)})")
            for n, (x, y) in ((2 * p, ("vb0", "vb1")), (2 * p + 1, ("vb2", "vb3"))):
                acc = ", ".join(f"o{n}_{e}" for e in range(4))
                c_(f"{acc} = mma(pa0, pa1, pa2, pa3, {x}, {y}, {acc})")
    c_("# ---- the next V tile into the other stage")
    c_("if it + 1 < ntiles:")
    blk = []
    copy_tile(blk.append, cfg, "v", "vbase", "vs", "vd", BN, f"(n0 + {BN})", "lk", DV, VR, f"({V0} + (st ^ 1) * {BN * VR})",
               fp16)
    lp += ["    " + s for s in blk]
    c_("ptx.cp_async_commit()")
    body += ["    " + s for s in lp]
    b("ptx.cp_async_wait_all()")
    emit_epilogue(b, spec, NO)
    L += ["    " + s for s in body]
    return "\n".join(L) + "\n"


def tc_fwd_source(spec: AttnSpec, cfg: TcAttnConfig):
    """The generated kernel source (what :func:`tc_fwd_kernel` compiles)."""
    return _source(spec, cfg)


@functools.lru_cache(maxsize=None)
def tc_fwd_kernel(spec: AttnSpec, cfg: TcAttnConfig):
    """The ``cuda.jit`` tensor-core forward kernel (launch: :func:`tc_fwd_grid` x cfg.THREADS with
    :func:`tc_smem_bytes` of dynamic shared memory; FWD_ARGS)."""
    ok, why = tc_check((spec.Q, spec.K, spec.V), spec.D_QK, spec.D_V, cfg)
    if not ok:
        raise ValueError(f"tensor-core attention forward config {cfg}: {why}")
    bf16 = spec.Q == "bfloat16"
    g = dict(__name__=__name__, cuda=cuda, math=math, ptx=ptx, float32=float32, int32=int32, int64=int64,
             uint32=uint32, NEG_INF=NEG_INF, LOG2E=float32(LOG2E), LN2=float32(LN2), shfl_xor=llvm_inlined(shfl_xor, 2),
             uint16=uint16, ld16=loader("float16"),
             mma=ptx.mma_m16n8k16_bf16 if bf16 else ptx.mma_m16n8k16_f16,
             pack=ptx.pack_bf16x2 if bf16 else ptx.pack_f16x2, st_o=llvm_inlined(storer(spec.O), 3),
             st_s=storer("float32"), ld_scale=loader(spec.SCALE) if spec.SCALE is not None else None,
             bounds=seq_bounds(spec), krange=key_range(spec), score=llvm_inlined(score_fn(spec), 17),
             unmasked=llvm_inlined(unmasked_fn(spec), 12), slope_of=alibi_slope_fn(),
             drop_keep=llvm_inlined(dropout_keep_fn(), 10))
    exec(compile(_source(spec, cfg), f"<attn_tc_fwd {spec.D_QK}x{spec.D_V} {cfg}>", "exec"), g)
    return cuda.jit(g["attn_tc_fwd"])
