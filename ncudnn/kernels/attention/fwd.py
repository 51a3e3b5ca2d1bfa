"""Flash-attention forward (SIMT, FP32 accumulation): one block per (query tile, head, batch).

The block loads its BLOCK_M query rows once (float32 in shared memory), then streams the keys BLOCK_N
at a time through one shared buffer: K tile -> scores (scale, bias, ALiBi, masks applied as each score
is made) -> V tile loaded while one thread per row runs the online softmax (running max m, running sum
l, the rescale factor alpha of the old accumulators; dropout applied to P after its sum) -> O
accumulators (registers, rescaled by alpha) += P V. Key tiles outside the diagonal band are skipped. No S x S matrix exists outside the block's
score tile. At the end O = acc / l and Stats = m + log(l) (natural log, float32).

Rows without a kept key get O = 0 and Stats = -inf; padding rows (i >= seq_len_q[b]) get O = 0 and
Stats = 0 (cuDNN leaves both unspecified).

The stages (load tile, scores, online softmax, P V, epilogue) are separate loops over shared tiles so
that a tensor-core mainloop (wgmma on shared-memory descriptors, TMA loads) can replace them one by one.
"""
import functools
import math

from numba import cuda, float32, int64

from ..runtime.dtypes import loader, storer
from .config import AttnConfig
from .spec import NEG_INF, AttnSpec, alibi_slope_fn, dropout_keep_fn, key_range, score_fn, seq_bounds

__all__ = ["fwd_kernel", "fwd_grid", "FWD_ARGS"]

#: argument names of the forward kernel, in order
FWD_ARGS = ("q", "k", "v", "o", "stats", "bias", "seq_q", "seq_kv", "scale_arr", "B", "H", "HK", "SQ", "SK",
            "qb", "qh", "qs", "qd", "kb", "kh", "ks", "kd", "vb", "vh", "vs", "vd", "ob", "oh", "os", "od",
            "sb", "sh", "ss", "bb", "bh", "bs", "bk", "scale", "left", "right", "seed", "rng_offset", "p_keep",
            "drop_scale")


def fwd_grid(cfg, B, H, SQ):
    return (max(1, math.ceil(SQ / cfg.BLOCK_M)), H, B)


@functools.lru_cache(maxsize=None)
def fwd_kernel(spec: AttnSpec, cfg: AttnConfig):
    """The ``cuda.jit`` forward kernel for ``spec`` and ``cfg`` (launch: :func:`fwd_grid` x cfg.THREADS)."""
    ok, why = cfg.check(spec.D_QK, spec.D_V)
    if not ok:
        raise ValueError(f"attention forward config {cfg}: {why}")
    BM, BN, NT, D, DV = cfg.BLOCK_M, cfg.BLOCK_N, cfg.THREADS, spec.D_QK, spec.D_V
    DKV_PAD = max(D, DV) + 1    # + 1 word a row: a warp's score reads of K rows hit 32 banks
    S_PER = BM * BN // NT
    A_PER = BM * DV // NT
    STATS, SCALE_MEM, ALIBI = spec.STATS, spec.SCALE is not None, spec.ALIBI
    ld_q, ld_k, ld_v = loader(spec.Q), loader(spec.K), loader(spec.V)
    st_o, st_s = storer(spec.O), storer("float32")
    ld_scale = loader(spec.SCALE) if SCALE_MEM else None
    bounds, krange, score, slope_of = seq_bounds(spec), key_range(spec), score_fn(spec), alibi_slope_fn()
    DROP, drop_keep = spec.DROPOUT, dropout_keep_fn()

    @cuda.jit
    def attn_fwd(q, k, v, o, stats, bias, seq_q, seq_kv, scale_arr, B, H, HK, SQ, SK,
                 qb, qh, qs, qd, kb, kh, ks, kd, vb, vh, vs, vd, ob, oh, os, od,
                 sb, sh, ss, bb, bh, bs, bk, scale, left, right, seed, rng_offset, p_keep, drop_scale):
        q_t = cuda.shared.array((BM, D), float32)
        kv_t = cuda.shared.array((BN, DKV_PAD), float32)
        s_t = cuda.shared.array((BM, BN), float32)
        m_r = cuda.shared.array(BM, float32)
        l_r = cuda.shared.array(BM, float32)
        a_r = cuda.shared.array(BM, float32)
        acc = cuda.local.array(A_PER, float32)
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
        qbase = b * qb + h * qh
        kbase = b * kb + hk * kh
        vbase = b * vb + hk * vh
        # ---- load the query tile; reset the row statistics and accumulators
        for e in range(tid, BM * D, NT):
            r = e // D
            c = e % D
            i = i0 + r
            q_t[r, c] = ld_q(q, qbase + i * qs + c * qd) if i < lq else float32(0.0)
        for r in range(tid, BM, NT):
            m_r[r] = NEG_INF
            l_r[r] = float32(0.0)
        for t in range(A_PER):
            acc[t] = float32(0.0)
        j0, j1 = krange(i0, min(i0 + BM, lq), lk, shift, left, right)
        n_first = (j0 // BN) * BN
        for n0 in range(n_first, j1, BN):
            cuda.syncthreads()
            # ---- K tile
            for e in range(tid, BN * D, NT):
                r = e // D
                c = e % D
                j = n0 + r
                kv_t[r, c] = ld_k(k, kbase + j * ks + c * kd) if j < lk else float32(0.0)
            cuda.syncthreads()
            # ---- scores, masked and biased in registers
            for t in range(S_PER):
                e = tid + t * NT
                r = e // BN
                c = e % BN
                dot = float32(0.0)
                for d in range(D):
                    dot += q_t[r, d] * kv_t[c, d]
                s_t[r, c] = score(dot, b, h, i0 + r, n0 + c, lq, lk, shift, sc, left, right, slope,
                                  bias, bb, bh, bs, bk)
            cuda.syncthreads()
            # ---- V tile (into the K buffer) and the online softmax, one thread a row
            for e in range(tid, BN * DV, NT):
                r = e // DV
                c = e % DV
                j = n0 + r
                kv_t[r, c] = ld_v(v, vbase + j * vs + c * vd) if j < lk else float32(0.0)
            for r in range(tid, BM, NT):
                m_old = m_r[r]
                mx = m_old
                for c in range(BN):
                    mx = max(mx, s_t[r, c])
                if mx == NEG_INF:
                    a_r[r] = float32(1.0)
                    for c in range(BN):
                        s_t[r, c] = float32(0.0)
                else:
                    tot = float32(0.0)
                    for c in range(BN):
                        p = math.exp(s_t[r, c] - mx)
                        tot += p                      # the softmax sums P before dropout
                        if DROP:
                            if drop_keep(b, h, i0 + r, n0 + c, H, SQ, SK, seed, rng_offset, p_keep):
                                p *= drop_scale
                            else:
                                p = float32(0.0)
                        s_t[r, c] = p
                    alpha = math.exp(m_old - mx)
                    a_r[r] = alpha
                    l_r[r] = l_r[r] * alpha + tot
                    m_r[r] = mx
            cuda.syncthreads()
            # ---- O accumulators: acc = acc * alpha + P V
            for t in range(A_PER):
                e = tid + t * NT
                r = e // DV
                c = e % DV
                a = acc[t] * a_r[r]
                for n in range(BN):
                    a += s_t[r, n] * kv_t[n, c]
                acc[t] = a
        cuda.syncthreads()
        # ---- epilogue: O = acc / l, Stats = m + log(l)
        obase = b * ob + h * oh
        for t in range(A_PER):
            e = tid + t * NT
            r = e // DV
            c = e % DV
            i = i0 + r
            if i < SQ:
                val = float32(0.0)
                lsum = l_r[r]
                if i < lq and lsum > float32(0.0):
                    val = acc[t] / lsum
                st_o(o, obase + i * os + c * od, val)
        if STATS:
            for r in range(tid, BM, NT):
                i = i0 + r
                if i < SQ:
                    lsum = l_r[r]
                    val = float32(0.0)
                    if i < lq:
                        val = NEG_INF
                        if lsum > float32(0.0):
                            val = m_r[r] + math.log(lsum)
                    st_s(stats, b * sb + h * sh + i * ss, val)

    return attn_fwd
