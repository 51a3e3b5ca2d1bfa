"""Reference for scaled dot-product attention (cuDNN SDPA / flash attention) forward and backward.

Layouts: q (B, H, Sq, D), k (B, Hk, Sk, D), v (B, Hk, Sk, Dv), o (B, H, Sq, Dv). GQA / MQA: Hk
divides H and query head h reads kv head h // (H / Hk). Per (b, h), in cudnn-frontend's order:

    S = scale * q @ k^T
      + bias                        (optional; broadcast numpy-style to (B, H, Sq, Sk))
      + slope_h * (j - i)           (alibi=True; slopes from ``alibi_slopes(H)``, the frontend's)
    masked entries of S (excluded from the softmax):
      seq_len_kv (B,) [padding mask]: key j >= seq_len_kv[b];
      causal: j > i + shift, with shift = 0 for diagonal_alignment 'top_left' [default] and
        shift = Skv_b - Sq_b for 'bottom_right' (Skv_b = seq_len_kv[b] or Sk, Sq_b = seq_len_q[b]
        or Sq: the last valid query row sees every valid key);
      sliding_window_length W (cudnn-frontend's diagonal_band_left_bound): j <= i + shift - W
        (with causal: the W most recent keys, itself included);
      right_bound R (diagonal_band_right_bound; causal is R = 0): j > i + shift + R.
    stats = logsumexp_j S   (B, H, Sq, 1): cuDNN's softmax "Stats" output (max + log sum exp)
    P = exp(S - stats)      (softmax; computed before dropout, so stats ignore dropout)
    o = (P * dropout_mask * dropout_scale) @ v   (dropout_mask 0/1 broadcastable to (B,H,Sq,Sk),
        cuDNN draws it as RNG BERNOULLI with probability 1 - p; dropout_scale = 1 / (1 - p))

Rows with no unmasked key, and padding rows i >= seq_len_q[b], are unspecified in cuDNN (its
graph masks with the finite float lowest): here they get o = 0, stats = -inf (no key) or 0
(padding row) and zero gradients; tests should compare valid rows only.

Backward (flash-attention form, exact for the o it is given):
    dP = (do @ v^T) * dropout_mask * dropout_scale,  Dr = rowsum(do * o),  dS = P * (dP - Dr)
    dq = scale * dS @ k;  dk = scale * dS^T @ q;  dv = (P * dropout_mask * dropout_scale)^T @ do
with dk / dv summed over the query heads that share a kv head; dbias = dS summed over the axes
on which bias was broadcast.
"""
import numpy as np

from ._util import f64

__all__ = ["sdpa_forward", "sdpa_backward", "alibi_slopes"]


def alibi_slopes(H):
    """cudnn-frontend's ALiBi slopes (float32 values): n = largest power of two <= H;
    head h < n: 2^(-8 (h+1) / n); the remaining heads take 2^(-8 (k + 1/2) / n), k = 0, 1, ..."""
    n = 1 << (int(H).bit_length() - 1)
    e = [h + 1.0 for h in range(n)] + [k + 0.5 for k in range(H - n)]
    return np.array([np.float32(2.0 ** (-8.0 * v / n)) for v in e], dtype=np.float64)


def _expand(t, H):
    Hk = t.shape[1]
    if H % Hk:
        raise ValueError(f"kv heads {Hk} must divide query heads {H}")
    return np.repeat(t, H // Hk, axis=1)


def _lens(seq_len, B, default):
    if seq_len is None:
        return np.full((B, 1, 1, 1), default, dtype=np.int64)
    return np.asarray(seq_len).reshape(B, 1, 1, 1).astype(np.int64)


def _scores(q, k, scale, bias, alibi, o):
    """S (B, H, Sq, Sk) before masking, and the keep mask; ``o`` holds the mask options."""
    B, H, Sq, _ = q.shape
    ke = _expand(k, H)
    Sk = ke.shape[2]
    s = scale * np.matmul(q, np.swapaxes(ke, -1, -2))
    if bias is not None:
        s = s + f64(bias)
    i = np.arange(Sq)[:, None]
    j = np.arange(Sk)[None, :]
    if alibi:
        s = s + alibi_slopes(H).reshape(1, H, 1, 1) * (j - i)
    if o["diagonal_alignment"] not in ("top_left", "bottom_right"):
        raise ValueError(f"diagonal_alignment {o['diagonal_alignment']!r}")
    lq, lk = _lens(o["seq_len_q"], B, Sq), _lens(o["seq_len_kv"], B, Sk)
    shift = 0 if o["diagonal_alignment"] == "top_left" else lk - lq
    keep = np.broadcast_to(j < lk, (B, H, Sq, Sk)).copy()
    right = 0 if o["causal"] else o["right_bound"]
    if right is not None:
        keep &= j <= i + shift + int(right)
    if o["sliding_window_length"] is not None:
        keep &= j > i + shift - int(o["sliding_window_length"])
    rows = np.arange(Sq)[None, None, :, None] < lq
    return s, keep, rows


def _dropped(p, dropout_mask, dropout_scale):
    return p if dropout_mask is None else p * f64(dropout_mask) * dropout_scale


def _opts(causal, diagonal_alignment, seq_len_q, seq_len_kv, sliding_window_length, right_bound=None):
    if causal and right_bound is not None:
        raise ValueError("causal is right_bound 0: give one of them")
    return dict(causal=causal, diagonal_alignment=diagonal_alignment, seq_len_q=seq_len_q,
                seq_len_kv=seq_len_kv, sliding_window_length=sliding_window_length, right_bound=right_bound)


def sdpa_forward(q, k, v, scale, causal=False, bias=None, dropout_mask=None, dropout_scale=1.0,
                 diagonal_alignment="top_left", seq_len_q=None, seq_len_kv=None,
                 sliding_window_length=None, alibi=False, right_bound=None):
    """Attention forward -> (o (B, H, Sq, Dv), stats (B, H, Sq, 1)); see the module docstring."""
    q, k, v = f64(q), f64(k), f64(v)
    H = q.shape[1]
    s, keep, rows = _scores(q, k, scale, bias, alibi, _opts(
        causal, diagonal_alignment, seq_len_q, seq_len_kv, sliding_window_length, right_bound))
    s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    e = np.where(keep, np.exp(s - m_safe), 0.0)
    tot = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        stats = m_safe + np.log(tot)
    p = np.where(tot > 0, e / np.where(tot > 0, tot, 1.0), 0.0)
    o = np.matmul(_dropped(p, dropout_mask, dropout_scale), _expand(v, H))
    return np.where(rows, o, 0.0), np.where(rows, stats, 0.0)


def _reduce_to(g, shape):
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(i for i, (s, n) in enumerate(zip(shape, g.shape)) if s == 1 and n != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def sdpa_backward(q, k, v, o, do, stats, scale, causal=False, bias=None, dropout_mask=None,
                  dropout_scale=1.0, diagonal_alignment="top_left", seq_len_q=None,
                  seq_len_kv=None, sliding_window_length=None, alibi=False, return_dbias=False,
                  right_bound=None):
    """Attention backward -> (dq, dk, dv), plus dbias (bias's shape) when return_dbias.

    P is rebuilt from ``stats`` as exp(S - stats) (masked entries 0), as a flash kernel does.
    """
    q, k, v, o, do, stats = (f64(a) for a in (q, k, v, o, do, stats))
    B, H, Sq, _ = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    ke, ve = _expand(k, H), _expand(v, H)
    s, keep, rows = _scores(q, k, scale, bias, alibi, _opts(
        causal, diagonal_alignment, seq_len_q, seq_len_kv, sliding_window_length, right_bound))
    keep = keep & rows & np.isfinite(stats)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.where(keep, np.exp(np.where(keep, s - stats, 0.0)), 0.0)
    do = np.where(rows, do, 0.0)
    pd = _dropped(p, dropout_mask, dropout_scale)
    dp = _dropped(np.matmul(do, np.swapaxes(ve, -1, -2)), dropout_mask, dropout_scale)
    dr = (do * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - dr)
    dq = scale * np.matmul(ds, ke)
    g = H // Hk
    dk = (scale * np.matmul(np.swapaxes(ds, -1, -2), q)).reshape(B, Hk, g, Sk, -1).sum(axis=2)
    dv = np.matmul(np.swapaxes(pd, -1, -2), do).reshape(B, Hk, g, Sk, -1).sum(axis=2)
    if return_dbias:
        if bias is None:
            raise ValueError("return_dbias needs bias")
        return dq, dk, dv, _reduce_to(ds, np.shape(bias))
    return dq, dk, dv
