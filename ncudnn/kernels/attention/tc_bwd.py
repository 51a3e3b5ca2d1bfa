"""Flash-attention backward on tensor cores (mma.sync m16n8k16, FP16 / BF16 in, FP32 accumulation),
deterministic: Dr = rowsum(dO O) first (``bwd.dot_kernel``), then two kernels that each own what they write.

* ``attn_tc_bwd_dkdv``: one block per (key tile, kv head, batch), WARPS warps, warp w owning the 16 keys
  ``j0 + 16 w ..``; its K and V rows stay in shared memory while the block streams the query tiles of every
  query head of the GQA group (Q, dO, Stats, Dr; BLOCK_M rows at a time). Per tile a warp computes
  S^T = K Q^T, P^T = exp(scale S^T - Stats) (one ``ex2.approx`` per score, masks as in the forward),
  dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - Dr) and dK += dS^T Q, P^T and dS^T rounded to the input
  type and used as A fragments straight from their accumulator layout (rows = keys).
  When both accumulators do not fit a lane's registers (head dims 128), ``attn_tc_bwd_dk`` and
  ``attn_tc_bwd_dv`` do the same walk for one gradient each (dV needs no dP).
* ``attn_tc_bwd_dq``: one block per (query tile, head, batch), warp w owning 16 query rows; Q and dO
  fragments stay in registers while the key tiles stream: S = Q K^T, P, dP = dO V^T, dS = P (dP - Dr),
  dQ += dS K.

Fragments come from 16-bit shared rows padded by 8 elements through ldmatrix.x4 (``.trans`` where the
operand's k dimension runs along the rows), tiles by ``cp.async`` 16-byte copies when every row is 16-byte
aligned (``ASYNC``), element copies otherwise. dK and dQ are scaled by the attention scale at the end.
The source is generated (one named scalar per accumulator and fragment) so that they stay in registers.
"""
import functools
import math
from dataclasses import dataclass, replace

from numba import cuda, float32, int32, int64, uint16, uint32

from ..primitives import ptx
from ..runtime.dtypes import loader, storer
from .bwd import BWD_ARGS
from .spec import (NEG_INF, AttnSpec, alibi_slope_fn, key_range, llvm_inlined, query_range, score_fn, seq_bounds,
                   unmasked_fn)
from .tc_fwd import LOG2E, PAD, copy_setup, copy_tile, tc_dtypes_check, tc_head_dims_check

__all__ = ["TcBwdConfig", "split_dkdv", "tc_dkdv_kernel", "tc_dq_kernel", "tc_bwd_check", "tc_bwd_configs", "tc_bwd_default",
           "tc_bwd_smem_bytes", "tc_dkdv_grid", "tc_dq_grid", "tc_bwd_source"]

SMEM_LIMIT = 227 * 1024
WARP_COUNTS = (2, 4, 8)
TILES = (16, 32, 64)
#: 32-bit registers a lane may give the accumulators and kept fragments of a dK/dV kernel and of the dQ kernel
#: (the sm_90 builds: dK/dV at 112 takes 215 registers, at 128 it spills; dQ at 160 takes 240)
MAX_FRAGMENT_REGS = (112, 176)


@dataclass(frozen=True)
class TcBwdConfig:
    WARPS: int = 4        # 16 keys (dK/dV kernel) or 16 query rows (dQ kernel) a warp
    BLOCK_N: int = 32     # the streamed tile: query rows (dK/dV kernel) or keys (dQ kernel)
    ASYNC: bool = True    # cp.async 16-byte copies (every Q / K / V / dO row 16-byte aligned)

    @property
    def ROWS(self):
        return 16 * self.WARPS

    @property
    def THREADS(self):
        return 32 * self.WARPS

    def replace(self, **kw):
        return replace(self, **kw)


def _layout(cfg, d, dv):
    """(row lengths (d rows, dv rows), offsets of the owned d / dv tiles and the streamed d / dv tiles, total)
    in 16-bit elements: both kernels keep ROWS rows of each owned tile and BLOCK_N rows of each streamed one."""
    dr, vr = d + PAD, dv + PAD
    own_d, own_v = 0, cfg.ROWS * dr
    st_d = own_v + cfg.ROWS * vr
    st_v = st_d + cfg.BLOCK_N * dr
    return dr, vr, own_d, own_v, st_d, st_v, st_v + cfg.BLOCK_N * vr


def tc_bwd_smem_bytes(cfg, d, dv):
    return 2 * _layout(cfg, d, dv)[-1]


def split_dkdv(cfg, d, dv):
    """Whether dK and dV take a kernel each (the block's keys visited twice, S recomputed) rather than one
    kernel holding both accumulators: when the two do not fit one lane's registers."""
    return d // 2 + dv // 2 + cfg.BLOCK_N > MAX_FRAGMENT_REGS[0]


def _regs(cfg, d, dv):
    """(dK/dV kernel(s), dQ kernel) accumulator and kept-fragment registers a lane."""
    kv = max(d // 2 + cfg.BLOCK_N, dv // 2 + cfg.BLOCK_N // 2) if split_dkdv(cfg, d, dv) else \
        d // 2 + dv // 2 + cfg.BLOCK_N
    return (kv, d // 2 + d // 4 + dv // 4 + cfg.BLOCK_N)


def tc_bwd_check(dtypes, d, dv, cfg=None):
    """(ok, reason) for these (Q, K, V) dtypes, head dims and ``cfg``."""
    ok, why = tc_dtypes_check(dtypes)
    if not ok:
        return ok, why.replace("forward", "backward")
    ok, why = tc_head_dims_check(d, dv, "backward")
    if not ok or cfg is None:
        return ok, why
    if cfg.WARPS not in WARP_COUNTS or cfg.BLOCK_N not in TILES:
        return False, f"WARPS {cfg.WARPS} not in {WARP_COUNTS} or BLOCK_N {cfg.BLOCK_N} not in {TILES}"
    n = tc_bwd_smem_bytes(cfg, d, dv)
    if n > SMEM_LIMIT:
        return False, f"{n} bytes of shared memory > {SMEM_LIMIT}"
    for kind, r, most in zip(("dK/dV", "dQ"), _regs(cfg, d, dv), MAX_FRAGMENT_REGS):
        if r > most:
            return False, f"{r} accumulator and fragment registers a lane in the {kind} kernel > {most}"
    return True, ""


def tc_bwd_configs(dtypes, d, dv, async_=True):
    return [c for n in reversed(TILES) for w in reversed(WARP_COUNTS)
            for c in (TcBwdConfig(w, n, async_),) if tc_bwd_check(dtypes, d, dv, c)[0]]


def tc_bwd_default(dtypes, d, dv, async_=True):
    """4 warps and the largest streamed tile of at least 32 rows with one dK/dV kernel, else the largest that
    fits with two (None when the problem is not taken)."""
    ok = [c for n in (64, 32, 16) for c in (TcBwdConfig(4, n, async_),) if tc_bwd_check(dtypes, d, dv, c)[0]]
    for c in ok:
        if c.BLOCK_N >= 32 and not split_dkdv(c, d, dv):
            return c
    if ok:
        return ok[0]
    cs = tc_bwd_configs(dtypes, d, dv, async_)
    return cs[0] if cs else None


def tc_dkdv_grid(cfg, B, HK, SK):
    return (max(1, math.ceil(SK / cfg.ROWS)), HK, B)


def tc_dq_grid(cfg, B, H, SQ):
    return (max(1, math.ceil(SQ / cfg.ROWS)), H, B)


def _zero(emit, name, groups):
    for n in range(groups):
        for e in range(4):
            emit(f"{name}{n}_{e} = float32(0.0)")


def _product(emit, acc, groups, ksteps, a_addr, b_addr, a_regs=None):
    """acc (16 x 8 groups) += A B over ``ksteps`` k16 steps. ``a_addr(ks)``: the ldmatrix.x4 address of the
    A fragments (None: ``a_regs(ks)`` names them), ``b_addr(ks, p)``: that of the B fragments of groups 2p, 2p+1."""
    for ks in range(ksteps):
        if a_regs is None:
            emit(f"fa0, fa1, fa2, fa3 = ptx.ldmatrix_x4_a(sm, {a_addr(ks)})")
            a = "fa0, fa1, fa2, fa3"
        else:
            a = a_regs(ks)
        for p in range(groups // 2):
            emit(f"fb0, fb1, fb2, fb3 = {b_addr(ks, p)}")
            for n, (x, y) in ((2 * p, ("fb0", "fb1")), (2 * p + 1, ("fb2", "fb3"))):
                c = ", ".join(f"{acc}{n}_{e}" for e in range(4))
                emit(f"{c} = mma({a}, {x}, {y}, {c})")


def _packed(s, ks):
    """The A fragments of k16 step ``ks`` from the accumulator groups ``s{2ks}``, ``s{2ks+1}`` (C = A layout)."""
    return (f"pack({s}{2 * ks}_0, {s}{2 * ks}_1), pack({s}{2 * ks}_2, {s}{2 * ks}_3), "
            f"pack({s}{2 * ks + 1}_0, {s}{2 * ks + 1}_1), pack({s}{2 * ks + 1}_2, {s}{2 * ks + 1}_3)")


def _probs(emit, spec, groups, full, row_of, col_of, lse_of, masked_args):
    """P = exp(scale S + bias + alibi - Stats) in place over accumulators ``s*`` (log2 units), the mask tests
    only when ``full`` (a block-uniform condition) is false. ``row_of(e)`` / ``col_of(n, e)``: the query and
    key expressions of an entry; ``lse_of(n, e)``: its Stats in log2 units."""
    plain = spec.BIAS is None and not spec.ALIBI
    emit(f"if {full}:")
    for n in range(groups):
        for e in range(4):
            i, j = row_of(n, e), col_of(n, e)
            x = (f"s{n}_{e} * sc2" if plain else
                 f"unmasked(s{n}_{e}, bz, h, {i}, {j}, sc, slope, bias, bb, bh, bs, bk) * LOG2E")
            emit(f"    s{n}_{e} = ptx.ex2_approx({x} - {lse_of(n, e)})")
    emit("else:")
    for n in range(groups):
        for e in range(4):
            i, j = row_of(n, e), col_of(n, e)
            emit(f"    s{n}_{e} = ptx.ex2_approx(score(s{n}_{e}, bz, h, {i}, {j}, {masked_args}) * LOG2E - "
                 f"{lse_of(n, e)})")


def _lane_addrs(emit, own_d, own_v, st_d, st_v, DR, VR):
    """Per-lane ldmatrix addresses: ``*_a`` A operands (rows of the warp's 16 owned rows), ``*_n`` B operands
    whose k runs along a streamed row (no transpose), ``*_t`` B operands whose k runs down the rows (.trans)."""
    for nm, off, row in (("od", own_d, DR), ("ov", own_v, VR)):
        emit(f"{nm}_a = sbase + 2 * ({off} + (warp * 16 + (lj & 1) * 8 + lr) * {row} + (lj >> 1) * 8)")
    for nm, off, row in (("sd", st_d, DR), ("sv", st_v, VR)):
        emit(f"{nm}_n = sbase + 2 * ({off} + ((lj >> 1) * 8 + lr) * {row} + (lj & 1) * 8)")
        emit(f"{nm}_t = sbase + 2 * ({off} + ((lj & 1) * 8 + lr) * {row} + (lj >> 1) * 8)")


def _prologue(b, spec):
    b("sm = cuda.shared.array(0, uint16)" if ptx.SIM else "sm = cuda.shared.array(0, uint16, alignment=128)")
    b("sbase = int32(ptx.cvta_shared(sm, 0))")
    for x in ("tid = cuda.threadIdx.x", "lane = tid & 31", "warp = tid >> 5", "g = lane >> 2", "t = lane & 3",
              "lr = lane & 7", "lj = lane >> 3", "bz = int64(cuda.blockIdx.z)"):
        b(x)
    b("lq, lk, shift = bounds(seq_q, seq_kv, bz, SQ, SK)")
    b("sc = float32(scale)")
    if spec.SCALE is not None:
        b("sc = ld_scale(scale_arr, 0)")
    b("sc2 = sc * LOG2E")


MASKED = "lq, lk, shift, sc, left, right, slope, bias, bb, bh, bs, bk"


def _dkdv_source(spec, cfg, want="dkdv"):
    """The dK/dV kernel; ``want`` "dk" or "dv": only that gradient (:func:`split_dkdv`)."""
    DK_, DV_ = want in ("dkdv", "dk"), want in ("dkdv", "dv")
    D, DV, BM, W = spec.D_QK, spec.D_V, cfg.BLOCK_N, cfg.ROWS    # BM query rows a tile; W = the block's keys
    DR, VR, K0, V0, Q0, G0, _ = _layout(cfg, D, DV)
    fp16 = spec.Q == "float16"
    L = [f"def attn_tc_bwd_{want}({', '.join(BWD_ARGS)}):"]
    body = []
    b = body.append
    _prologue(b, spec)
    b(f"lse_s = cuda.shared.array({BM}, float32)")
    b(f"dr_s = cuda.shared.array({BM}, float32)")
    b("hk = int64(cuda.blockIdx.y)")
    b(f"j0 = int64(cuda.blockIdx.x) * {W}")
    b("G = H // HK")
    b("kbase = bz * kb + hk * kh")
    b("vbase = bz * vb + hk * vh")
    copy_setup(b, cfg, (D, DV))
    b("# ---- the block's K and V rows (kept for the whole kernel)")
    copy_tile(b, cfg, "k", "kbase", "ks", "kd", W, "j0", "lk", D, DR, K0, fp16)
    copy_tile(b, cfg, "v", "vbase", "vs", "vd", W, "j0", "lk", DV, VR, V0, fp16)
    b("ptx.cp_async_commit()")
    _lane_addrs(b, K0, V0, Q0, G0, DR, VR)
    b("ja = j0 + warp * 16 + g     # this lane's keys: ja (entries 0, 1) and ja + 8 (entries 2, 3)")
    b("jb = ja + 8")
    if DK_:
        _zero(b, "dk", D // 8)
    if DV_:
        _zero(b, "dv", DV // 8)
    b(f"i_lo, i_hi = qrange(j0, min(j0 + {W}, lk), lq, shift, left, right)")
    b(f"mstart = (i_lo // {BM}) * {BM}")
    b("for gi in range(G):")
    lp = []
    c = lp.append
    c("h = hk * G + gi")
    c("slope = float32(0.0)")
    if spec.ALIBI:
        c("slope = slope_of(h, H)")
    c("qbase = bz * qb + h * qh")
    c("gbase = bz * gb + h * gh")
    c(f"for m0 in range(mstart, i_hi, {BM}):")
    inner = []
    d_ = inner.append
    d_("cuda.syncthreads()            # the previous tile's readers are done")
    copy_tile(d_, cfg, "q", "qbase", "qs", "qd", BM, "m0", "lq", D, DR, Q0, fp16)
    copy_tile(d_, cfg, "do", "gbase", "gs", "gd", BM, "m0", "lq", DV, VR, G0, fp16)
    d_("ptx.cp_async_commit()")
    d_(f"for r in range(tid, {BM}, {cfg.THREADS}):")
    d_("    i = m0 + r")
    d_("    x = float32(0.0)")
    d_("    y = float32(0.0)")
    d_("    if i < lq:")
    d_("        x = stats[bz * sb + h * sh + i * ss]")
    d_("        y = dr[(bz * H + h) * SQ + i]")
    d_("    lse_s[r] = x * LOG2E if x != NEG_INF else float32(0.0)   # a row with no kept key: P = 0 anyway")
    d_("    dr_s[r] = y")
    d_("ptx.cp_async_wait_all()")
    d_("cuda.syncthreads()")
    NQ = BM // 8
    d_("# ---- S^T = K Q^T (rows: this warp's keys; columns: the tile's query rows)")
    _zero(d_, "s", NQ)
    _product(d_, "s", NQ, D // 16, lambda ks: f"od_a + {32 * ks}",
             lambda ks, p: f"ptx.ldmatrix_x4_a(sm, sd_n + {2 * (16 * p * DR + 16 * ks)})")
    cond = [f"j0 + {W} <= lk", f"m0 + {BM} <= lq"]
    if spec.HAS_RIGHT:
        cond.append(f"j0 + {W - 1} <= m0 + shift + right")
    if spec.HAS_LEFT:
        cond.append(f"j0 > m0 + {BM - 1} + shift - left")

    def col(n, e):
        return f"{8 * n + (e & 1)} + 2 * t"
    _probs(d_, spec, NQ, " and ".join(cond), lambda n, e: f"m0 + {col(n, e)}",
           lambda n, e: "ja" if e < 2 else "jb", lambda n, e: f"lse_s[{col(n, e)}]", MASKED)
    if DV_:
        d_("# ---- dV += P^T dO")
        _product(d_, "dv", DV // 8, BM // 16, None,
                 lambda ks, p: f"ptx.ldmatrix_x4_trans_a(sm, sv_t + {2 * (16 * ks * VR + 16 * p)})",
                 a_regs=lambda ks: _packed("s", ks))
    if DK_:
        d_("# ---- dP^T = V dO^T; dS^T = P^T (dP^T - Dr)")
        _zero(d_, "q", NQ)
        _product(d_, "q", NQ, DV // 16, lambda ks: f"ov_a + {32 * ks}",
                 lambda ks, p: f"ptx.ldmatrix_x4_a(sm, sv_n + {2 * (16 * p * VR + 16 * ks)})")
        for n in range(NQ):
            for e in range(4):
                d_(f"s{n}_{e} = s{n}_{e} * (q{n}_{e} - dr_s[{col(n, e)}])")
        d_("# ---- dK += dS^T Q")
        _product(d_, "dk", D // 8, BM // 16, None,
                 lambda ks, p: f"ptx.ldmatrix_x4_trans_a(sm, sd_t + {2 * (16 * ks * DR + 16 * p)})",
                 a_regs=lambda ks: _packed("s", ks))
    lp += ["    " + s for s in inner]
    body += ["    " + s for s in lp]
    b("ptx.cp_async_wait_all()       # (no query tile at all: the K / V copies still land before the exit)")
    b("# ---- dK = scale dS^T Q, dV")
    for r, es in (("a", (0, 1)), ("b", (2, 3))):
        b(f"if j{r} < SK:")
        for n in range(D // 8 if DK_ else 0):
            for e in es:
                b(f"    st_dk(out1, bz * o1b + hk * o1h + j{r} * o1s + ({8 * n + (e & 1)} + 2 * t) * o1d, dk{n}_{e} * sc)")
        for n in range(DV // 8 if DV_ else 0):
            for e in es:
                b(f"    st_dv(out2, bz * o2b + hk * o2h + j{r} * o2s + ({8 * n + (e & 1)} + 2 * t) * o2d, dv{n}_{e})")
    L += ["    " + s for s in body]
    return "\n".join(L) + "\n"


def _dq_source(spec, cfg):
    D, DV, BN, R = spec.D_QK, spec.D_V, cfg.BLOCK_N, cfg.ROWS
    DR, VR, Q0, G0, K0, V0, _ = _layout(cfg, D, DV)
    fp16 = spec.Q == "float16"
    L = [f"def attn_tc_bwd_dq({', '.join(BWD_ARGS)}):"]
    body = []
    b = body.append
    _prologue(b, spec)
    b("h = int64(cuda.blockIdx.y)")
    b(f"i0 = int64(cuda.blockIdx.x) * {R}")
    b("hk = h // (H // HK)")
    b("slope = float32(0.0)")
    if spec.ALIBI:
        b("slope = slope_of(h, H)")
    b("qbase = bz * qb + h * qh")
    b("gbase = bz * gb + h * gh")
    b("kbase = bz * kb + hk * kh")
    b("vbase = bz * vb + hk * vh")
    copy_setup(b, cfg, (D, DV))
    copy_tile(b, cfg, "q", "qbase", "qs", "qd", R, "i0", "lq", D, DR, Q0, fp16)
    copy_tile(b, cfg, "do", "gbase", "gs", "gd", R, "i0", "lq", DV, VR, G0, fp16)
    b("ptx.cp_async_commit()")
    b("ptx.cp_async_wait_all()")
    b("cuda.syncthreads()")
    _lane_addrs(b, Q0, G0, K0, V0, DR, VR)
    b("# ---- this warp's Q and dO fragments (registers for the whole loop)")
    for ks in range(D // 16):
        b(f"qf{ks}_0, qf{ks}_1, qf{ks}_2, qf{ks}_3 = ptx.ldmatrix_x4_a(sm, od_a + {32 * ks})")
    for ks in range(DV // 16):
        b(f"gf{ks}_0, gf{ks}_1, gf{ks}_2, gf{ks}_3 = ptx.ldmatrix_x4_a(sm, ov_a + {32 * ks})")
    b("ia = i0 + warp * 16 + g     # this lane's rows: ia (entries 0, 1) and ia + 8 (entries 2, 3)")
    b("ib = ia + 8")
    for r in "ab":
        b(f"x = stats[bz * sb + h * sh + i{r} * ss] if i{r} < lq else float32(0.0)")
        b(f"lse_{r} = x * LOG2E if x != NEG_INF else float32(0.0)")
        b(f"dr_{r} = dr[(bz * H + h) * SQ + i{r}] if i{r} < lq else float32(0.0)")
    _zero(b, "dq", D // 8)
    b(f"j0, j1 = krange(i0, min(i0 + {R}, lq), lk, shift, left, right)")
    b(f"for n0 in range((j0 // {BN}) * {BN}, j1, {BN}):")
    lp = []
    c = lp.append
    c("cuda.syncthreads()            # the previous tile's readers are done")
    copy_tile(c, cfg, "k", "kbase", "ks", "kd", BN, "n0", "lk", D, DR, K0, fp16)
    copy_tile(c, cfg, "v", "vbase", "vs", "vd", BN, "n0", "lk", DV, VR, V0, fp16)
    c("ptx.cp_async_commit()")
    c("ptx.cp_async_wait_all()")
    c("cuda.syncthreads()")
    NK = BN // 8
    c("# ---- S = Q K^T")
    _zero(c, "s", NK)
    _product(c, "s", NK, D // 16, None, lambda ks, p: f"ptx.ldmatrix_x4_a(sm, sd_n + {2 * (16 * p * DR + 16 * ks)})",
             a_regs=lambda ks: ", ".join(f"qf{ks}_{e}" for e in range(4)))
    cond = [f"n0 + {BN} <= lk", f"i0 + {R} <= lq"]
    if spec.HAS_RIGHT:
        cond.append(f"n0 + {BN - 1} <= i0 + shift + right")
    if spec.HAS_LEFT:
        cond.append(f"n0 > i0 + {R - 1} + shift - left")
    _probs(c, spec, NK, " and ".join(cond), lambda n, e: "ia" if e < 2 else "ib",
           lambda n, e: f"n0 + {8 * n + (e & 1)} + 2 * t", lambda n, e: "lse_a" if e < 2 else "lse_b", MASKED)
    c("# ---- dP = dO V^T; dS = P (dP - Dr)")
    _zero(c, "q", NK)
    _product(c, "q", NK, DV // 16, None, lambda ks, p: f"ptx.ldmatrix_x4_a(sm, sv_n + {2 * (16 * p * VR + 16 * ks)})",
             a_regs=lambda ks: ", ".join(f"gf{ks}_{e}" for e in range(4)))
    for n in range(NK):
        for e in range(4):
            c(f"s{n}_{e} = s{n}_{e} * (q{n}_{e} - {'dr_a' if e < 2 else 'dr_b'})")
    c("# ---- dQ += dS K")
    _product(c, "dq", D // 8, BN // 16, None,
             lambda ks, p: f"ptx.ldmatrix_x4_trans_a(sm, sd_t + {2 * (16 * ks * DR + 16 * p)})",
             a_regs=lambda ks: _packed("s", ks))
    body += ["    " + s for s in lp]
    b("# ---- dQ = scale dS K")
    for r, es in (("a", (0, 1)), ("b", (2, 3))):
        b(f"if i{r} < SQ:")
        for n in range(D // 8):
            for e in es:
                b(f"    st_dq(out1, bz * o1b + h * o1h + i{r} * o1s + ({8 * n + (e & 1)} + 2 * t) * o1d, dq{n}_{e} * sc)")
    L += ["    " + s for s in body]
    return "\n".join(L) + "\n"


def tc_bwd_source(spec: AttnSpec, cfg: TcBwdConfig, which):
    """The generated source of the ``"dkdv"``, ``"dk"``, ``"dv"`` or ``"dq"`` kernel."""
    return _dq_source(spec, cfg) if which == "dq" else _dkdv_source(spec, cfg, which)


def _globals(spec):
    bf16 = spec.Q == "bfloat16"
    return dict(__name__=__name__, cuda=cuda, math=math, ptx=ptx, float32=float32, int32=int32, int64=int64,
                uint16=uint16, uint32=uint32, NEG_INF=NEG_INF, LOG2E=float32(LOG2E), ld16=loader("float16"),
                mma=ptx.mma_m16n8k16_bf16 if bf16 else ptx.mma_m16n8k16_f16,
                pack=ptx.pack_bf16x2 if bf16 else ptx.pack_f16x2,
                st_dk=llvm_inlined(storer(spec.DK), 3), st_dv=llvm_inlined(storer(spec.DV), 3),
                st_dq=llvm_inlined(storer(spec.DQ), 3),
                ld_scale=loader(spec.SCALE) if spec.SCALE is not None else None, bounds=seq_bounds(spec),
                krange=key_range(spec), qrange=query_range(spec), score=llvm_inlined(score_fn(spec), 17),
                unmasked=llvm_inlined(unmasked_fn(spec), 12),
                slope_of=alibi_slope_fn())


def _build(spec, cfg, which):
    ok, why = tc_bwd_check((spec.Q, spec.K, spec.V), spec.D_QK, spec.D_V, cfg)
    if not ok:
        raise ValueError(f"tensor-core attention backward config {cfg}: {why}")
    if which == "dkdv" and split_dkdv(cfg, spec.D_QK, spec.D_V):
        raise ValueError(f"tensor-core attention backward config {cfg}: dK and dV need a kernel each at head dims "
                         f"{spec.D_QK} / {spec.D_V}")
    if spec.DROPOUT or spec.DBIAS is not None:
        raise ValueError("the tensor-core attention backward has no dropout or bias gradient")
    g = _globals(spec)
    exec(compile(tc_bwd_source(spec, cfg, which), f"<attn_tc_bwd_{which} {spec.D_QK}x{spec.D_V} {cfg}>", "exec"), g)
    return cuda.jit(g["attn_tc_bwd_" + which])


@functools.lru_cache(maxsize=None)
def tc_dkdv_kernel(spec: AttnSpec, cfg: TcBwdConfig, want="dkdv"):
    """dK (``out1``) and dV (``out2``), or one of them (``want`` "dk" / "dv", see :func:`split_dkdv`);
    BWD_ARGS; grid :func:`tc_dkdv_grid` x cfg.THREADS, tc_bwd_smem_bytes."""
    return _build(spec, cfg, want)


@functools.lru_cache(maxsize=None)
def tc_dq_kernel(spec: AttnSpec, cfg: TcBwdConfig):
    """dQ (``out1``); BWD_ARGS; grid :func:`tc_dq_grid` x cfg.THREADS, tc_bwd_smem_bytes."""
    return _build(spec, cfg, "dq")
