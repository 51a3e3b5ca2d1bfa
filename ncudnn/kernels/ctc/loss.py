"""The CTC loss kernel: costs and gradients of one batch entry per block, in log space, deterministic.

For entry n (block n) with labels l (length L <= MAX_LABEL), the blank-extended sequence l' (S = 2L + 1
positions, blank 0 at the even ones) and T_n valid time steps:

1. thread 0 finds the entry's label offset (the sum of the earlier label lengths), checks the lengths, and
   counts the adjacent repeats: an entry needing more than T_n steps (L + repeats) is out of bounds
   (cost inf; ZERO_OOB writes zero gradients, SKIP_OOB none);
2. SOFTMAX: the log-sum-exp of each time step over A (block tree reductions in shared memory), kept in the
   workspace (``lse``); the log probability of class c at t is then ``x[t, c] - lse[t]``, else ``log p``;
3. forward: alpha_t(s), threads over s, two rows in shared memory, each row also stored in the
   workspace (``alpha``, T x S_CAP per entry); cost = -logaddexp(alpha_{T_n-1}(S-1), alpha_{T_n-1}(S-2));
4. backward: beta_t(s) from t = T_n - 1 down, two shared rows; at each t the occupancy
   ``exp(alpha_t(s) + beta_t(s) - log p_t(l'_s) + cost)`` of every position goes to shared memory, then
   every class gets ``p_t(a)`` and, after a barrier, the classes present get ``p_t(a) - sum of the
   occupancies of their positions`` (the blank by one thread, a label by the thread of its first
   occurrence, in position order: no atomics); rows t >= T_n get zeros.

Compile-time: SOFTMAX (normalization), ZERO_OOB (grad mode), GRADS (gradients written), BLOCK (threads, a
power of two). Everything else (T, N, A, S_CAP, strides) is a launch argument.
"""
import functools
import math

import numba
import numpy as np
from numba import cuda

__all__ = ["MAX_LABEL", "ctc_kernel", "signature"]

#: cuDNN's label length limit; sizes the shared arrays
MAX_LABEL = 256
MAX_S = 2 * MAX_LABEL + 1
NEG_INF = np.float32(-np.inf)
POS_INF = np.float32(np.inf)
NAN = np.float32(np.nan)
ZERO = np.float32(0.0)


def signature():
    """The kernel's argument types (numba signature text)."""
    f, i = "float32[::1]", "int32[::1]"
    return f"void({f}, {i}, {i}, {i}, {f}, {f}, {f}, {f}, " + ", ".join(["int64"] * 11) + ")"


@cuda.jit(device=True, inline=True)
def logadd(a, b):
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    m = max(a, b)
    return m + math.log1p(math.exp(-abs(a - b)))


@functools.lru_cache(maxsize=None)
def ctc_kernel(softmax, zero_oob, grads_on, block):
    """The ``cuda.jit`` kernel of one (SOFTMAX, ZERO_OOB, GRADS, BLOCK)."""
    SOFTMAX, ZERO_OOB, GRADS, BLOCK = bool(softmax), bool(zero_oob), bool(grads_on), int(block)
    assert BLOCK > 0 and BLOCK & (BLOCK - 1) == 0, "BLOCK must be a power of two"

    @cuda.jit(device=True, inline=True)
    def log_prob(v, lse):
        """log p of input value ``v`` (a probability, or an activation under SOFTMAX)."""
        if SOFTMAX:
            return v - lse
        return NEG_INF if v == ZERO else numba.float32(math.log(v))

    @cuda.jit(device=True, inline=True)
    def prob(v, lse):
        if SOFTMAX:
            return numba.float32(math.exp(v - lse))
        return v

    @cuda.jit(device=True, inline=True)
    def zero_rows(grads, t0, t1, n, A, g_st, g_sn, g_sa, tid):
        for t in range(t0, t1):
            for a in range(tid, A, BLOCK):
                grads[t * g_st + n * g_sn + a * g_sa] = ZERO

    @cuda.jit
    def ctc_loss(probs, labels, label_lengths, input_lengths, costs, grads, alpha, lse_ws,
                 T, N, A, S_CAP, N_LABELS, p_st, p_sn, p_sa, g_st, g_sn, g_sa):
        n = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        ext = cuda.shared.array(MAX_S, numba.int32)
        first = cuda.shared.array(MAX_LABEL, numba.int32)
        row = cuda.shared.array((2, MAX_S), numba.float32)
        occ = cuda.shared.array(MAX_S, numba.float32)
        red = cuda.shared.array(BLOCK, numba.float32)
        info = cuda.shared.array(8, numba.int64)   # L, T_n, bad lengths, offset, bad label, out of bounds
        ll_sh = cuda.shared.array(1, numba.float32)
        if n >= N:
            return
        # 1. lengths, offset
        if tid == 0:
            off = numba.int64(0)
            for j in range(n):
                off += label_lengths[j]
            L = numba.int64(label_lengths[n])
            Tn = numba.int64(input_lengths[n])
            bad = 0
            if L < 0 or L > MAX_LABEL or 2 * L + 1 > S_CAP or Tn < 1 or Tn > T or off < 0 or off + L > N_LABELS:
                bad = 1
            info[0] = L
            info[1] = Tn
            info[2] = bad
            info[3] = off
            info[4] = 0
        cuda.syncthreads()
        if info[2] != 0:
            if tid == 0:
                costs[n] = NAN
            return
        L = info[0]
        Tn = info[1]
        off = info[3]
        S = 2 * L + 1
        for s in range(tid, S, BLOCK):
            c = 0
            if s % 2 == 1:
                c = labels[off + s // 2]
                if c < 1 or c >= A:
                    info[4] = 1
            ext[s] = c
        cuda.syncthreads()
        if info[4] != 0:
            if tid == 0:
                costs[n] = NAN
            return
        if tid == 0:
            need = L
            for k in range(1, L):
                if ext[2 * k + 1] == ext[2 * k - 1]:
                    need += 1
            info[5] = 1 if need > Tn else 0
        for k in range(tid, L, BLOCK):
            f = 1
            c = ext[2 * k + 1]
            for j in range(k):
                if ext[2 * j + 1] == c:
                    f = 0
            first[k] = f
        cuda.syncthreads()
        if info[5] != 0:
            if tid == 0:
                costs[n] = POS_INF
            if GRADS and ZERO_OOB:
                zero_rows(grads, 0, T, n, A, g_st, g_sn, g_sa, tid)
            return
        # 2. log-sum-exp per time step
        if SOFTMAX:
            for t in range(Tn):
                base = t * p_st + n * p_sn
                m = NEG_INF
                for a in range(tid, A, BLOCK):
                    m = max(m, probs[base + a * p_sa])
                red[tid] = m
                cuda.syncthreads()
                h = BLOCK // 2
                while h > 0:
                    if tid < h:
                        red[tid] = max(red[tid], red[tid + h])
                    cuda.syncthreads()
                    h //= 2
                mx = red[0]
                cuda.syncthreads()
                acc = ZERO
                for a in range(tid, A, BLOCK):
                    acc += numba.float32(math.exp(probs[base + a * p_sa] - mx))
                red[tid] = acc
                cuda.syncthreads()
                h = BLOCK // 2
                while h > 0:
                    if tid < h:
                        red[tid] = red[tid] + red[tid + h]
                    cuda.syncthreads()
                    h //= 2
                if tid == 0:
                    lse_ws[n * T + t] = mx + numba.float32(math.log(red[0]))
                cuda.syncthreads()
        # 3. forward
        abase = n * T * S_CAP
        lse = ZERO
        if SOFTMAX:
            lse = lse_ws[n * T]
        for s in range(tid, S, BLOCK):
            v = NEG_INF
            if s < 2:
                v = log_prob(probs[n * p_sn + ext[s] * p_sa], lse)
            row[0, s] = v
            alpha[abase + s] = v
        cuda.syncthreads()
        for t in range(1, Tn):
            cur = t % 2
            prv = 1 - cur
            base = t * p_st + n * p_sn
            if SOFTMAX:
                lse = lse_ws[n * T + t]
            for s in range(tid, S, BLOCK):
                v = row[prv, s]
                if s >= 1:
                    v = logadd(v, row[prv, s - 1])
                if s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2]:
                    v = logadd(v, row[prv, s - 2])
                if v != NEG_INF:
                    v = v + log_prob(probs[base + ext[s] * p_sa], lse)
                row[cur, s] = v
                alpha[abase + t * S_CAP + s] = v
            cuda.syncthreads()
        if tid == 0:
            last = (Tn - 1) % 2
            ll = row[last, S - 1]
            if S > 1:
                ll = logadd(ll, row[last, S - 2])
            ll_sh[0] = ll
            costs[n] = -ll
        cuda.syncthreads()
        if not GRADS:
            return
        ll = ll_sh[0]
        if ll == NEG_INF:       # no alignment has a nonzero probability: as out of bounds
            if ZERO_OOB:
                zero_rows(grads, 0, T, n, A, g_st, g_sn, g_sa, tid)
            return
        # 4. backward and gradients
        for step in range(Tn):
            t = Tn - 1 - step
            cur = t % 2
            nxt = 1 - cur
            base = t * p_st + n * p_sn
            gbase = t * g_st + n * g_sn
            if SOFTMAX:
                lse = lse_ws[n * T + t]
            for s in range(tid, S, BLOCK):
                lp = log_prob(probs[base + ext[s] * p_sa], lse)
                if t == Tn - 1:
                    v = lp if s >= S - 2 else NEG_INF
                else:
                    v = row[nxt, s]
                    if s + 1 < S:
                        v = logadd(v, row[nxt, s + 1])
                    if s + 2 < S and ext[s] != 0 and ext[s] != ext[s + 2]:
                        v = logadd(v, row[nxt, s + 2])
                    if v != NEG_INF:
                        v = v + lp
                row[cur, s] = v
                a_ = alpha[abase + t * S_CAP + s]
                o = ZERO
                if a_ != NEG_INF and v != NEG_INF:
                    o = numba.float32(math.exp(a_ + v - lp - ll))
                occ[s] = o
            cuda.syncthreads()
            for a in range(tid, A, BLOCK):
                grads[gbase + a * g_sa] = prob(probs[base + a * p_sa], lse)
            cuda.syncthreads()
            for k in range(tid, L + 1, BLOCK):
                acc = ZERO
                c = 0
                if k == L:
                    for j in range(L + 1):
                        acc += occ[2 * j]
                elif first[k] != 0:
                    c = ext[2 * k + 1]
                    for j in range(k, L):
                        if ext[2 * j + 1] == c:
                            acc += occ[2 * j + 1]
                else:
                    continue
                grads[gbase + c * g_sa] = prob(probs[base + c * p_sa], lse) - acc
            cuda.syncthreads()
        zero_rows(grads, Tn, T, n, A, g_st, g_sn, g_sa, tid)

    return ctc_loss
