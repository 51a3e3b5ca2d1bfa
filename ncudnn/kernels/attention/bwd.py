"""Flash-attention backward (SIMT, FP32 accumulation, deterministic: no atomics anywhere).

Four kernels, launched in this order:

1. ``attn_bwd_dot``: Dr[b, h, i] = sum_d dO * O (float32 workspace), one thread a query row.
2. ``attn_bwd_dkdv``: one block per (key tile, kv head, batch). K and V of its BLOCK_N keys stay in
   shared memory; the block streams the query rows of every query head of its GQA group BLOCK_M at a
   time, recomputes P = exp(S - Stats) from the forward's statistics, dP = dO V^T, dS = P (dP - Dr),
   and accumulates dV += P^T dO, dK += scale dS^T Q in registers (with dropout: P and dP times the
   regenerated mask / (1 - p) where dV and dS use them, dS's leading P undropped). With a bias gradient wanted it also
   writes dS for every (b, h, i, j) it visits into a float32 workspace.
3. ``attn_bwd_dq``: one block per (query tile, head, batch): streams the key tiles, recomputes P and dS
   the same way and accumulates dQ += scale dS K.
4. ``attn_bwd_dbias`` (bias gradient only): each dBias element sums dS over the axes the bias is
   broadcast on, in a fixed order (entries outside the mask count as 0).

Tiles outside the diagonal band are skipped in 2 and 3. Each output element is written by exactly
one thread, so the results do not depend on scheduling.
"""
import functools
import math

from numba import cuda, float32, int64

from ..runtime.dtypes import loader, storer
from .config import AttnConfig
from .spec import (NEG_INF, AttnSpec, alibi_slope_fn, dropout_keep_fn, key_range, query_range, score_fn,
                   seq_bounds)

__all__ = ["dot_kernel", "dkdv_kernel", "dq_kernel", "dbias_kernel", "DOT_THREADS"]

DOT_THREADS = 128


@functools.lru_cache(maxsize=None)
def dot_kernel(spec: AttnSpec):
    """Dr = rowsum(dO * O): ``(o, do, dr, seq_q, seq_kv, B, H, SQ, SK, ob, oh, os, od, gb, gh, gs, gd)``,
    grid (ceil(SQ / DOT_THREADS), H, B); padding rows get 0."""
    DV = spec.D_V
    ld_o, ld_do = loader(spec.O), loader(spec.DO)
    bounds = seq_bounds(spec)

    @cuda.jit
    def attn_bwd_dot(o, do, dr, seq_q, seq_kv, B, H, SQ, SK, ob, oh, os, od, gb, gh, gs, gd):
        b = int64(cuda.blockIdx.z)
        h = int64(cuda.blockIdx.y)
        i = int64(cuda.blockIdx.x) * DOT_THREADS + cuda.threadIdx.x
        if i >= SQ:
            return
        lq, lk, shift = bounds(seq_q, seq_kv, b, SQ, SK)
        acc = float32(0.0)
        if i < lq:
            for c in range(DV):
                acc += ld_o(o, b * ob + h * oh + i * os + c * od) * ld_do(do, b * gb + h * gh + i * gs + c * gd)
        dr[(b * H + h) * SQ + i] = acc
    return attn_bwd_dot


#: argument names shared by the dK/dV and dQ kernels, in order
BWD_ARGS = ("q", "k", "v", "do", "stats", "dr", "bias", "seq_q", "seq_kv", "scale_arr", "out1", "out2", "ws",
            "B", "H", "HK", "SQ", "SK", "qb", "qh", "qs", "qd", "kb", "kh", "ks", "kd", "vb", "vh", "vs", "vd",
            "gb", "gh", "gs", "gd", "sb", "sh", "ss", "bb", "bh", "bs", "bk",
            "o1b", "o1h", "o1s", "o1d", "o2b", "o2h", "o2s", "o2d", "scale", "left", "right",
            "seed", "rng_offset", "p_keep", "drop_scale")


def _common(spec, cfg):
    ok, why = cfg.check(spec.D_QK, spec.D_V, backward=True)
    if not ok:
        raise ValueError(f"attention backward config {cfg}: {why}")
    return dict(ld_q=loader(spec.Q), ld_k=loader(spec.K), ld_v=loader(spec.V), ld_do=loader(spec.DO),
                ld_scale=loader(spec.SCALE) if spec.SCALE else None, bounds=seq_bounds(spec),
                score=score_fn(spec), slope_of=alibi_slope_fn(), drop_keep=dropout_keep_fn())


@functools.lru_cache(maxsize=None)
def dkdv_kernel(spec: AttnSpec, cfg: AttnConfig):
    """dK (``out1``), dV (``out2``) and, with spec.DBIAS, dS into ``ws``; arguments :data:`BWD_ARGS`,
    grid (ceil(SK / BLOCK_N), HK, B) x cfg.THREADS."""
    f = _common(spec, cfg)
    BM, BN, NT, D, DV = cfg.BLOCK_M, cfg.BLOCK_N, cfg.THREADS, spec.D_QK, spec.D_V
    D_PAD, DV_PAD = D + 1, DV + 1    # + 1 word a row: a warp's score reads of K / V rows hit 32 banks
    S_PER, K_PER, V_PER = BM * BN // NT, BN * D // NT, BN * DV // NT
    SCALE_MEM, ALIBI, WS_OUT = spec.SCALE is not None, spec.ALIBI, spec.DBIAS is not None
    DROP, drop_keep = spec.DROPOUT, f["drop_keep"]
    ld_q, ld_k, ld_v, ld_do, ld_scale = f["ld_q"], f["ld_k"], f["ld_v"], f["ld_do"], f["ld_scale"]
    bounds, score, slope_of, qrange = f["bounds"], f["score"], f["slope_of"], query_range(spec)
    st_dk, st_dv = storer(spec.DK), storer(spec.DV)

    @cuda.jit
    def attn_bwd_dkdv(q, k, v, do, stats, dr, bias, seq_q, seq_kv, scale_arr, out1, out2, ws,
                      B, H, HK, SQ, SK, qb, qh, qs, qd, kb, kh, ks, kd, vb, vh, vs, vd,
                      gb, gh, gs, gd, sb, sh, ss, bb, bh, bs, bk,
                      o1b, o1h, o1s, o1d, o2b, o2h, o2s, o2d, scale, left, right, seed, rng_offset, p_keep,
                      drop_scale):
        q_t = cuda.shared.array((BM, D), float32)
        do_t = cuda.shared.array((BM, DV), float32)
        k_t = cuda.shared.array((BN, D_PAD), float32)
        v_t = cuda.shared.array((BN, DV_PAD), float32)
        p_t = cuda.shared.array((BM, BN), float32)
        ds_t = cuda.shared.array((BM, BN), float32)
        lse_r = cuda.shared.array(BM, float32)
        dr_r = cuda.shared.array(BM, float32)
        dk_acc = cuda.local.array(K_PER, float32)
        dv_acc = cuda.local.array(V_PER, float32)
        tid = cuda.threadIdx.x
        b = int64(cuda.blockIdx.z)
        hk = int64(cuda.blockIdx.y)
        j0 = int64(cuda.blockIdx.x) * BN
        G = H // HK
        lq, lk, shift = bounds(seq_q, seq_kv, b, SQ, SK)
        sc = float32(scale)
        if SCALE_MEM:
            sc = ld_scale(scale_arr, 0)
        for e in range(tid, BN * D, NT):
            r = e // D
            c = e % D
            j = j0 + r
            k_t[r, c] = ld_k(k, b * kb + hk * kh + j * ks + c * kd) if j < lk else float32(0.0)
        for e in range(tid, BN * DV, NT):
            r = e // DV
            c = e % DV
            j = j0 + r
            v_t[r, c] = ld_v(v, b * vb + hk * vh + j * vs + c * vd) if j < lk else float32(0.0)
        for t in range(K_PER):
            dk_acc[t] = float32(0.0)
        for t in range(V_PER):
            dv_acc[t] = float32(0.0)
        i_lo, i_hi = qrange(j0, min(j0 + BN, lk), lq, shift, left, right)
        for g in range(G):
            h = hk * G + g
            slope = float32(0.0)
            if ALIBI:
                slope = slope_of(h, H)
            for m0 in range((i_lo // BM) * BM, i_hi, BM):
                cuda.syncthreads()
                for e in range(tid, BM * D, NT):
                    r = e // D
                    c = e % D
                    i = m0 + r
                    q_t[r, c] = ld_q(q, b * qb + h * qh + i * qs + c * qd) if i < lq else float32(0.0)
                for e in range(tid, BM * DV, NT):
                    r = e // DV
                    c = e % DV
                    i = m0 + r
                    do_t[r, c] = ld_do(do, b * gb + h * gh + i * gs + c * gd) if i < lq else float32(0.0)
                for r in range(tid, BM, NT):
                    i = m0 + r
                    lse_r[r] = stats[b * sb + h * sh + i * ss] if i < lq else float32(0.0)
                    dr_r[r] = dr[(b * H + h) * SQ + i] if i < lq else float32(0.0)
                cuda.syncthreads()
                for t in range(S_PER):
                    e = tid + t * NT
                    r = e // BN
                    c = e % BN
                    i = m0 + r
                    j = j0 + c
                    dot = float32(0.0)
                    for d in range(D):
                        dot += q_t[r, d] * k_t[c, d]
                    s = score(dot, b, h, i, j, lq, lk, shift, sc, left, right, slope, bias, bb, bh, bs, bk)
                    p = float32(0.0)
                    if s != NEG_INF:
                        p = math.exp(s - lse_r[r])
                    dp = float32(0.0)
                    for d in range(DV):
                        dp += do_t[r, d] * v_t[c, d]
                    pd = p
                    if DROP:
                        mk = drop_scale if drop_keep(b, h, i, j, H, SQ, SK, seed, rng_offset, p_keep) \
                            else float32(0.0)
                        pd = p * mk
                        dp = dp * mk
                    ds = p * (dp - dr_r[r])
                    p_t[r, c] = pd
                    ds_t[r, c] = ds
                    if WS_OUT:
                        if i < SQ and j < SK:
                            ws[((b * H + h) * SQ + i) * SK + j] = ds
                cuda.syncthreads()
                for t in range(V_PER):
                    e = tid + t * NT
                    r = e // DV
                    c = e % DV
                    a = dv_acc[t]
                    for m in range(BM):
                        a += p_t[m, r] * do_t[m, c]
                    dv_acc[t] = a
                for t in range(K_PER):
                    e = tid + t * NT
                    r = e // D
                    c = e % D
                    a = dk_acc[t]
                    for m in range(BM):
                        a += ds_t[m, r] * q_t[m, c]
                    dk_acc[t] = a
        for t in range(K_PER):
            e = tid + t * NT
            j = j0 + e // D
            if j < SK:
                st_dk(out1, b * o1b + hk * o1h + j * o1s + (e % D) * o1d, dk_acc[t] * sc)
        for t in range(V_PER):
            e = tid + t * NT
            j = j0 + e // DV
            if j < SK:
                st_dv(out2, b * o2b + hk * o2h + j * o2s + (e % DV) * o2d, dv_acc[t])

    return attn_bwd_dkdv


@functools.lru_cache(maxsize=None)
def dq_kernel(spec: AttnSpec, cfg: AttnConfig):
    """dQ (``out1``; ``out2`` / ``ws`` unused); arguments :data:`BWD_ARGS`, grid (ceil(SQ / BLOCK_M), H, B)
    x cfg.THREADS."""
    f = _common(spec, cfg)
    BM, BN, NT, D, DV = cfg.BLOCK_M, cfg.BLOCK_N, cfg.THREADS, spec.D_QK, spec.D_V
    D_PAD, DV_PAD = D + 1, DV + 1    # + 1 word a row: a warp's score reads of K / V rows hit 32 banks
    S_PER, Q_PER = BM * BN // NT, BM * D // NT
    SCALE_MEM, ALIBI = spec.SCALE is not None, spec.ALIBI
    DROP, drop_keep = spec.DROPOUT, f["drop_keep"]
    ld_q, ld_k, ld_v, ld_do, ld_scale = f["ld_q"], f["ld_k"], f["ld_v"], f["ld_do"], f["ld_scale"]
    bounds, score, slope_of, krange = f["bounds"], f["score"], f["slope_of"], key_range(spec)
    st_dq = storer(spec.DQ)

    @cuda.jit
    def attn_bwd_dq(q, k, v, do, stats, dr, bias, seq_q, seq_kv, scale_arr, out1, out2, ws,
                    B, H, HK, SQ, SK, qb, qh, qs, qd, kb, kh, ks, kd, vb, vh, vs, vd,
                    gb, gh, gs, gd, sb, sh, ss, bb, bh, bs, bk,
                    o1b, o1h, o1s, o1d, o2b, o2h, o2s, o2d, scale, left, right, seed, rng_offset, p_keep,
                    drop_scale):
        q_t = cuda.shared.array((BM, D), float32)
        do_t = cuda.shared.array((BM, DV), float32)
        k_t = cuda.shared.array((BN, D_PAD), float32)
        v_t = cuda.shared.array((BN, DV_PAD), float32)
        ds_t = cuda.shared.array((BM, BN), float32)
        lse_r = cuda.shared.array(BM, float32)
        dr_r = cuda.shared.array(BM, float32)
        dq_acc = cuda.local.array(Q_PER, float32)
        tid = cuda.threadIdx.x
        b = int64(cuda.blockIdx.z)
        h = int64(cuda.blockIdx.y)
        i0 = int64(cuda.blockIdx.x) * BM
        hk = h // (H // HK)
        lq, lk, shift = bounds(seq_q, seq_kv, b, SQ, SK)
        sc = float32(scale)
        if SCALE_MEM:
            sc = ld_scale(scale_arr, 0)
        slope = float32(0.0)
        if ALIBI:
            slope = slope_of(h, H)
        for e in range(tid, BM * D, NT):
            r = e // D
            c = e % D
            i = i0 + r
            q_t[r, c] = ld_q(q, b * qb + h * qh + i * qs + c * qd) if i < lq else float32(0.0)
        for e in range(tid, BM * DV, NT):
            r = e // DV
            c = e % DV
            i = i0 + r
            do_t[r, c] = ld_do(do, b * gb + h * gh + i * gs + c * gd) if i < lq else float32(0.0)
        for r in range(tid, BM, NT):
            i = i0 + r
            lse_r[r] = stats[b * sb + h * sh + i * ss] if i < lq else float32(0.0)
            dr_r[r] = dr[(b * H + h) * SQ + i] if i < lq else float32(0.0)
        for t in range(Q_PER):
            dq_acc[t] = float32(0.0)
        j_lo, j_hi = krange(i0, min(i0 + BM, lq), lk, shift, left, right)
        for n0 in range((j_lo // BN) * BN, j_hi, BN):
            cuda.syncthreads()
            for e in range(tid, BN * D, NT):
                r = e // D
                c = e % D
                j = n0 + r
                k_t[r, c] = ld_k(k, b * kb + hk * kh + j * ks + c * kd) if j < lk else float32(0.0)
            for e in range(tid, BN * DV, NT):
                r = e // DV
                c = e % DV
                j = n0 + r
                v_t[r, c] = ld_v(v, b * vb + hk * vh + j * vs + c * vd) if j < lk else float32(0.0)
            cuda.syncthreads()
            for t in range(S_PER):
                e = tid + t * NT
                r = e // BN
                c = e % BN
                dot = float32(0.0)
                for d in range(D):
                    dot += q_t[r, d] * k_t[c, d]
                s = score(dot, b, h, i0 + r, n0 + c, lq, lk, shift, sc, left, right, slope, bias, bb, bh, bs, bk)
                p = float32(0.0)
                if s != NEG_INF:
                    p = math.exp(s - lse_r[r])
                dp = float32(0.0)
                for d in range(DV):
                    dp += do_t[r, d] * v_t[c, d]
                if DROP:
                    if not drop_keep(b, h, i0 + r, n0 + c, H, SQ, SK, seed, rng_offset, p_keep):
                        dp = float32(0.0)
                    dp = dp * drop_scale
                ds_t[r, c] = p * (dp - dr_r[r])
            cuda.syncthreads()
            for t in range(Q_PER):
                e = tid + t * NT
                r = e // D
                c = e % D
                a = dq_acc[t]
                for n in range(BN):
                    a += ds_t[r, n] * k_t[n, c]
                dq_acc[t] = a
        for t in range(Q_PER):
            e = tid + t * NT
            i = i0 + e // D
            if i < SQ:
                st_dq(out1, b * o1b + h * o1h + i * o1s + (e % D) * o1d, dq_acc[t] * sc)

    return attn_bwd_dq


DBIAS_THREADS = 128


@functools.lru_cache(maxsize=None)
def dbias_kernel(spec: AttnSpec):
    """dBias from the dS workspace: ``(ws, dbias, seq_q, seq_kv, B, H, SQ, SK, n0, n1, n2, n3,
    db_b, db_h, db_i, db_j, left, right)`` (n*: dBias dims, db_*: its strides), grid
    ceil(n0 n1 n2 n3 / DBIAS_THREADS). A dS entry counts when the mask keeps it (others are 0 and the
    dK/dV kernel may not have written them)."""
    st_db = storer(spec.DBIAS)
    bounds = seq_bounds(spec)
    HAS_LEFT, HAS_RIGHT = spec.HAS_LEFT, spec.HAS_RIGHT

    @cuda.jit
    def attn_bwd_dbias(ws, dbias, seq_q, seq_kv, B, H, SQ, SK, n0, n1, n2, n3, db_b, db_h, db_i, db_j,
                       left, right):
        e = int64(cuda.blockIdx.x) * DBIAS_THREADS + cuda.threadIdx.x
        if e >= n0 * n1 * n2 * n3:
            return
        j = e % n3
        i_ = (e // n3) % n2
        h_ = (e // (n3 * n2)) % n1
        b_ = e // (n3 * n2 * n1)
        acc = float32(0.0)
        for b in range(B if n0 == 1 else 1):
            bi = b if n0 == 1 else b_
            lq, lk, shift = bounds(seq_q, seq_kv, bi, SQ, SK)
            for h in range(H if n1 == 1 else 1):
                hi = h if n1 == 1 else h_
                for i in range(SQ if n2 == 1 else 1):
                    ii = i if n2 == 1 else i_
                    kept = ii < lq and j < lk
                    if HAS_RIGHT:
                        kept = kept and j <= ii + shift + right
                    if HAS_LEFT:
                        kept = kept and j > ii + shift - left
                    if kept:
                        acc += ws[((bi * H + hi) * SQ + ii) * SK + j]
        st_db(dbias, b_ * db_b + h_ * db_h + i_ * db_i + j * db_j, acc)

    return attn_bwd_dbias
