"""Reference for scaled dot-product attention (cuDNN SDPA / flash attention) forward and backward.

Layouts: q (B, H, Sq, D), k (B, Hk, Sk, D), v (B, Hk, Sk, Dv), o (B, H, Sq, Dv). GQA / MQA: Hk
divides H and query head h reads kv head h // (H / Hk). Per (b, h):

    S = scale * q @ k^T  (+ bias, broadcast numpy-style to (B, H, Sq, Sk))
    masked entries of S are -inf:
      causal, diagonal_alignment 'top_left' [default]: key j > query i;
      'bottom_right': j > i + (Sk - Sq)  (the last query row sees every key);
      sliding_window_length W [optional]: j <= i + shift - W, shift = 0 ('top_left') or Sk - Sq
        ('bottom_right'), so with causal each query sees its W most recent keys (itself included);
      seq_len_kv (B,) [optional, padding mask]: j >= seq_len_kv[b].
    stats = logsumexp_j S   (B, H, Sq, 1): cuDNN's softmax "Stats" output (max + log sum exp)
    P = exp(S - stats)      (softmax; computed before dropout, so stats ignore dropout)
    o = (P * dropout_mask * dropout_scale) @ v   (dropout_mask 0/1 broadcastable to (B,H,Sq,Sk);
                                                  dropout_scale is cuDNN's 1 / (1 - p))
A query row whose every key is masked has stats = -inf and o = 0 (ncudnn's convention). Rows
i >= seq_len_q[b] (padding queries) are written as o = 0, stats = 0 and get zero gradients; their
values in a real kernel are unspecified, so tests should compare valid rows only.

Backward (flash-attention form, exact for the o it is given):
    dP = (do @ v^T) * dropout_mask * dropout_scale,  Dr = rowsum(do * o),  dS = P * (dP - Dr)
    dq = scale * dS @ k;  dk = scale * dS^T @ q;  dv = (P * dropout_mask * dropout_scale)^T @ do
with dk / dv summed over the query heads that share a kv head; dbias = dS summed over the axes
on which bias was broadcast.
"""
import numpy as np

from ._util import f64

__all__ = ["sdpa_forward", "sdpa_backward"]


def _expand(t, H):
    Hk = t.shape[1]
    if H % Hk:
        raise ValueError(f"kv heads {Hk} must divide query heads {H}")
    return np.repeat(t, H // Hk, axis=1)


def _mask(B, H, Sq, Sk, causal, diagonal_alignment, seq_len_kv, window=None):
    keep = np.ones((B, H, Sq, Sk), dtype=bool)
    i = np.arange(Sq)[:, None]
    j = np.arange(Sk)[None, :]
    if diagonal_alignment not in ("top_left", "bottom_right"):
        raise ValueError(f"diagonal_alignment {diagonal_alignment!r}")
    shift = 0 if diagonal_alignment == "top_left" else Sk - Sq
    if causal:
        keep &= j <= i + shift
    if window is not None:
        keep &= j > i + shift - int(window)
    if seq_len_kv is not None:
        keep &= j[None, None] < np.asarray(seq_len_kv).reshape(B, 1, 1, 1)
    return keep


def _row_valid(B, Sq, seq_len_q):
    if seq_len_q is None:
        return np.ones((B, 1, Sq, 1), dtype=bool)
    return np.arange(Sq)[None, None, :, None] < np.asarray(seq_len_q).reshape(B, 1, 1, 1)


def _probs(q, k, scale, causal, bias, diagonal_alignment, seq_len_kv, window):
    B, H, Sq, _ = q.shape
    ke = _expand(k, H)
    s = scale * np.einsum("bhid,bhjd->bhij", q, ke)
    if bias is not None:
        s = s + f64(bias)
    keep = _mask(B, H, Sq, ke.shape[2], causal, diagonal_alignment, seq_len_kv, window)
    s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    e = np.where(keep, np.exp(s - m_safe), 0.0)
    tot = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        stats = m_safe + np.log(tot)
    p = np.where(tot > 0, e / np.where(tot > 0, tot, 1.0), 0.0)
    return p, stats


def _dropped(p, dropout_mask, dropout_scale):
    return p if dropout_mask is None else p * f64(dropout_mask) * dropout_scale


def sdpa_forward(q, k, v, scale, causal=False, bias=None, dropout_mask=None, dropout_scale=1.0,
                 diagonal_alignment="top_left", seq_len_q=None, seq_len_kv=None,
                 sliding_window_length=None):
    """Attention forward -> (o (B, H, Sq, Dv), stats (B, H, Sq, 1)); see the module docstring."""
    q, k, v = f64(q), f64(k), f64(v)
    B, H, Sq, _ = q.shape
    p, stats = _probs(q, k, scale, causal, bias, diagonal_alignment, seq_len_kv,
                      sliding_window_length)
    o = np.einsum("bhij,bhjd->bhid", _dropped(p, dropout_mask, dropout_scale), _expand(v, H))
    rows = _row_valid(B, Sq, seq_len_q)
    return np.where(rows, o, 0.0), np.where(rows, stats, 0.0)


def _reduce_to(g, shape):
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(i for i, (s, n) in enumerate(zip(shape, g.shape)) if s == 1 and n != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def sdpa_backward(q, k, v, o, do, stats, scale, causal=False, bias=None, dropout_mask=None,
                  dropout_scale=1.0, diagonal_alignment="top_left", seq_len_q=None,
                  seq_len_kv=None, sliding_window_length=None, return_dbias=False):
    """Attention backward -> (dq, dk, dv), plus dbias (bias's shape) when return_dbias.

    P is rebuilt from ``stats`` as exp(S - stats) (masked entries 0), as a flash kernel does.
    """
    q, k, v, o, do = f64(q), f64(k), f64(v), f64(o), f64(do)
    stats = f64(stats)
    B, H, Sq, _ = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    ke, ve = _expand(k, H), _expand(v, H)
    s = scale * np.einsum("bhid,bhjd->bhij", q, ke)
    if bias is not None:
        s = s + f64(bias)
    keep = _mask(B, H, Sq, Sk, causal, diagonal_alignment, seq_len_kv, sliding_window_length)
    keep = keep & _row_valid(B, Sq, seq_len_q) & np.isfinite(stats)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.where(keep, np.exp(np.where(keep, s - stats, 0.0)), 0.0)
    do = np.where(_row_valid(B, Sq, seq_len_q), do, 0.0)
    pd = _dropped(p, dropout_mask, dropout_scale)
    dp = _dropped(np.einsum("bhid,bhjd->bhij", do, ve), dropout_mask, dropout_scale)
    dr = (do * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - dr)
    dq = scale * np.einsum("bhij,bhjd->bhid", ds, ke)
    g = H // Hk
    dk = (scale * np.einsum("bhij,bhid->bhjd", ds, q)).reshape(B, Hk, g, Sk, -1).sum(axis=2)
    dv = np.einsum("bhij,bhid->bhjd", pd, do).reshape(B, Hk, g, Sk, -1).sum(axis=2)
    if return_dbias:
        if bias is None:
            raise ValueError("return_dbias needs bias")
        return dq, dk, dv, _reduce_to(ds, np.shape(bias))
    return dq, dk, dv
