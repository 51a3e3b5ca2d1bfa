"""Reference for the legacy multi-head attention: cudnnMultiHeadAttnForward, BackwardData and
BackwardWeights (no attention dropout), float64.

Shapes (batch-major; the legacy API's seq-data layouts are permutations of these):
q (B, Tq, Cq), k (B, Tk, Ck), v (B, Tk, Cv); weights per head h as a dict of
Wq (Hn, Pq, Cq), Wk (Hn, Pq, Ck), Wv (Hn, Pv, Cv), Wo (Hn, Co, Pv) and, with projection biases
(CUDNN_ATTN_ENABLE_PROJ_BIASES), bq (Hn, Pq), bk (Hn, Pq), bv (Hn, Pv), bo (Co,). Per head:

    Q_h = q Wq_h^T + bq_h,  K_h = k Wk_h^T + bk_h,  V_h = v Wv_h^T + bv_h
    A_h = softmax_j(sm_scaler * Q_h K_h^T)   over the visible keys of query i:
          lo_win[i] <= j < hi_win[i] and j < seq_len_kv[b]
    out = sum_h (A_h V_h) Wo_h^T + bo  (+ residual, usually q itself, when given; needs Co == Cq)

Rows i >= seq_len_q[b] and rows with no visible key are 0 (and pass no gradient). lo_win / hi_win
default to the whole key range (cuDNN's loWinIdx / hiWinIdx per query time step).
``mha_backward`` returns the gradients of <out, dout>: dq (residual path included), dk, dv and the
weight gradients in the weights dict's layout (cudnnMultiHeadAttnBackwardData / Weights).
"""
import numpy as np

from ._util import f64

__all__ = ["mha_forward", "mha_backward"]

_KEYS = ("Wq", "Wk", "Wv", "Wo", "bq", "bk", "bv", "bo")


def _prep(q, k, v, weights, seq_len_q, seq_len_kv, lo_win, hi_win):
    q, k, v = f64(q), f64(k), f64(v)
    w = {key: f64(weights[key]) for key in _KEYS if weights.get(key) is not None}
    B, Tq, Tk = q.shape[0], q.shape[1], k.shape[1]
    lq = np.full(B, Tq) if seq_len_q is None else np.asarray(seq_len_q).reshape(-1)
    lk = np.full(B, Tk) if seq_len_kv is None else np.asarray(seq_len_kv).reshape(-1)
    lo = np.zeros(Tq, dtype=np.int64) if lo_win is None else np.asarray(lo_win).reshape(-1)
    hi = np.full(Tq, Tk) if hi_win is None else np.asarray(hi_win).reshape(-1)
    j = np.arange(Tk)
    keep = ((j >= lo[:, None]) & (j < hi[:, None]))[None] & (j < lk[:, None, None])[:, :]
    keep = keep & (np.arange(Tq)[None, :, None] < lq[:, None, None])       # (B, Tq, Tk)
    return q, k, v, w, keep


def _proj(x, W, b):
    out = np.einsum("btc,hpc->bhtp", x, W)
    return out if b is None else out + b[None, :, None, :]


def _attend(Q, K, keep, sm):
    s = np.where(keep[:, None], sm * np.einsum("bhip,bhjp->bhij", Q, K), -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.where(keep[:, None], np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    tot = e.sum(-1, keepdims=True)
    return np.where(tot > 0, e / np.where(tot > 0, tot, 1.0), 0.0)


def mha_forward(q, k, v, weights, sm_scaler, residual=None, seq_len_q=None, seq_len_kv=None,
                lo_win=None, hi_win=None):
    """-> out (B, Tq, Co); see the module docstring."""
    q, k, v, w, keep = _prep(q, k, v, weights, seq_len_q, seq_len_kv, lo_win, hi_win)
    Q, K, V = (_proj(x, w[W], w.get(b)) for x, W, b in ((q, "Wq", "bq"), (k, "Wk", "bk"),
                                                          (v, "Wv", "bv")))
    A = _attend(Q, K, keep, sm_scaler)
    out = np.einsum("bhtp,hop->bto", np.einsum("bhij,bhjp->bhip", A, V), w["Wo"])
    if "bo" in w:
        out = out + w["bo"]
    if residual is not None:
        out = out + f64(residual)
    rows = keep.any(-1)[..., None]
    return np.where(rows, out, 0.0)


def mha_backward(q, k, v, weights, sm_scaler, dout, residual=False, seq_len_q=None,
                 seq_len_kv=None, lo_win=None, hi_win=None):
    """-> dict(dq, dk, dv, dweights) for <mha_forward(...), dout>; residual=True when the forward
    added q as the residual (its gradient then flows into dq)."""
    q, k, v, w, keep = _prep(q, k, v, weights, seq_len_q, seq_len_kv, lo_win, hi_win)
    Q, K, V = (_proj(x, w[W], w.get(b)) for x, W, b in ((q, "Wq", "bq"), (k, "Wk", "bk"),
                                                          (v, "Wv", "bv")))
    A = _attend(Q, K, keep, sm_scaler)
    Hh = np.einsum("bhij,bhjp->bhip", A, V)
    g = np.where(keep.any(-1)[..., None], f64(dout), 0.0)
    dW = {"Wo": np.einsum("bto,bhtp->hop", g, Hh)}
    if "bo" in w:
        dW["bo"] = g.sum(axis=(0, 1))
    dH = np.einsum("bto,hop->bhtp", g, w["Wo"])
    dA = np.einsum("bhip,bhjp->bhij", dH, V)
    dV = np.einsum("bhij,bhip->bhjp", A, dH)
    dS = A * (dA - (dA * A).sum(-1, keepdims=True))
    dQ = sm_scaler * np.einsum("bhij,bhjp->bhip", dS, K)
    dK = sm_scaler * np.einsum("bhij,bhip->bhjp", dS, Q)
    out = {}
    for name, x, dP, W, b in (("q", q, dQ, "Wq", "bq"), ("k", k, dK, "Wk", "bk"),
                              ("v", v, dV, "Wv", "bv")):
        out["d" + name] = np.einsum("bhtp,hpc->btc", dP, w[W])
        dW[W] = np.einsum("bhtp,btc->hpc", dP, x)
        if b in w:
            dW[b] = dP.sum(axis=(0, 2))
    if residual:
        out["dq"] = out["dq"] + g
    out["dweights"] = dW
    return out
