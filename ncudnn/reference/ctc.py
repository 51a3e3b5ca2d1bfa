"""Reference for cudnnCTCLoss (connectionist temporal classification), float64.

probs (T, N, A): per-time softmax probabilities (cuDNN takes probabilities; label 0 is the blank).
labels: for each batch entry a sequence of labels in [1, A-1] (a list of sequences, or the flat
concatenation with ``label_lengths``). input_lengths (N,): valid time steps per entry.

    cost[n] = -log p(labels_n | x_n) = -log sum over alignments pi of length T_n collapsing
              (merge repeats, then drop blanks) to labels_n of prod_t probs[t, n, pi_t]
    grads[t, n, a] = d cost[n] / d u[t, n, a] for u the pre-softmax activations (probs =
              softmax(u) over a), i.e. probs[t, n, a] - sum_{s : l'_s = a} alpha_t(s) beta_t(s)
              / (p * probs[t, n, a]) with l' the blank-extended label and alpha / beta Graves'
              forward / backward variables (both including probs at t);
              0 for t >= input_lengths[n].
An entry whose labels cannot fit (L + number of adjacent repeats > T_n) has cost inf and zero
gradients (cuDNN's CUDNN_CTC_ZERO_OOB_GRADIENTS; with SKIP_OOB cuDNN leaves them unwritten).
"""
import numpy as np

from ._util import f64

__all__ = ["ctc_loss"]


def _split(labels, label_lengths, N):
    if label_lengths is None:
        return [list(map(int, l)) for l in labels]
    flat = np.asarray(labels).reshape(-1).astype(np.int64)
    out, pos = [], 0
    for n in range(N):
        L = int(np.asarray(label_lengths).reshape(-1)[n])
        out.append(list(map(int, flat[pos:pos + L])))
        pos += L
    return out


def _one(lp, lab):
    """cost and d cost / d log-prob occupancy for one entry; lp (T, A) log probabilities."""
    T = lp.shape[0]
    ext = [0]
    for c in lab:
        ext += [c, 0]
    S = len(ext)
    need = len(lab) + sum(1 for a, b in zip(lab, lab[1:]) if a == b)
    if need > T:
        return np.inf, None
    la = np.full((T, S), -np.inf)
    lb = np.full((T, S), -np.inf)
    la[0, 0] = lp[0, ext[0]]
    if S > 1:
        la[0, 1] = lp[0, ext[1]]
    for t in range(1, T):
        for s in range(S):
            terms = [la[t - 1, s]]
            if s >= 1:
                terms.append(la[t - 1, s - 1])
            if s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2]:
                terms.append(la[t - 1, s - 2])
            la[t, s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
    lb[T - 1, S - 1] = lp[T - 1, ext[S - 1]]
    if S > 1:
        lb[T - 1, S - 2] = lp[T - 1, ext[S - 2]]
    for t in range(T - 2, -1, -1):
        for s in range(S):
            terms = [lb[t + 1, s]]
            if s + 1 < S:
                terms.append(lb[t + 1, s + 1])
            if s + 2 < S and ext[s] != 0 and ext[s] != ext[s + 2]:
                terms.append(lb[t + 1, s + 2])
            lb[t, s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
    ll = np.logaddexp(la[T - 1, S - 1], la[T - 1, S - 2] if S > 1 else -np.inf)
    # alpha_t(s) beta_t(s) counts probs[t, l'_s] twice: divide once (subtract lp in log space)
    occ = np.full(lp.shape, -np.inf)
    for s in range(S):
        occ[:, ext[s]] = np.logaddexp(occ[:, ext[s]], la[:, s] + lb[:, s] - lp[:, ext[s]])
    return -ll, np.exp(occ - ll)


def ctc_loss(probs, labels, input_lengths, label_lengths=None, softmax_input=False):
    """-> (costs (N,), grads (T, N, A)) as in the module docstring. ``softmax_input``: ``probs`` holds
    pre-softmax activations (cuDNN's CUDNN_LOSS_NORMALIZATION_SOFTMAX): softmax over A is applied first."""
    probs = f64(probs)
    if softmax_input:
        e = np.exp(probs - probs.max(axis=-1, keepdims=True))
        probs = e / e.sum(axis=-1, keepdims=True)
    T, N, A = probs.shape
    labs = _split(labels, label_lengths, N)
    lens = np.asarray(input_lengths).reshape(-1).astype(np.int64)
    costs = np.zeros(N)
    grads = np.zeros_like(probs)
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
    for n in range(N):
        Tn = int(lens[n])
        if any(not 1 <= c < A for c in labs[n]):
            raise ValueError(f"entry {n}: labels must lie in [1, {A - 1}] (0 is the blank)")
        cost, occ = _one(logp[:Tn, n], labs[n])
        costs[n] = cost
        if occ is not None:
            # occ = sum alpha * beta / (probs * p): d cost / d u = probs - occ
            grads[:Tn, n] = probs[:Tn, n] - occ
    return costs, grads
