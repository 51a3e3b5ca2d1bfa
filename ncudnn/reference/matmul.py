"""Reference for the backend MATMUL operation: batched C = A @ B in float64.

``a`` is (..., M, K), ``b`` is (..., K, N); the batch dims broadcast numpy-style (a size-1 batch
dim, e.g. a shared weight, is reused across the other operand's batch: cuDNN's stride-0 batch).
Rank >= 2 is required. Returns (broadcast batch..., M, N) float64, accumulated exactly.

Ragged sizes (CUDNN_ATTR_OPERATION_MATMUL_{M,N,K}_OVERRIDE_DESC and CUDNN_ATTR_MATMUL_PADDING_VALUE):
``m_override`` / ``n_override`` / ``k_override`` hold per-batch sizes (any shape broadcastable to
the batch dims, optionally with two trailing 1s, e.g. [B, 1, 1, 1]). For batch element b:
C[b, i, j] = sum_{k < K_b} A[b, i, k] B[b, k, j] for i < M_b and j < N_b; every other element of
C is ``padding_value``.
"""
import numpy as np

from ._util import f64

__all__ = ["matmul"]


def _override(v, batch, default):
    if v is None:
        return np.full(batch, default, dtype=np.int64)
    a = np.asarray(v).astype(np.int64)
    if a.ndim == len(batch) + 2:
        a = a[..., 0, 0]
    return np.broadcast_to(a, batch)


def matmul(a, b, *, m_override=None, n_override=None, k_override=None, padding_value=0.0):
    """Batched ``a @ b`` with numpy batch broadcasting and optional ragged overrides; float64."""
    a, b = f64(a), f64(b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("matmul operands must be at least 2-D")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dims differ: {a.shape} @ {b.shape}")
    if m_override is None and n_override is None and k_override is None:
        return np.matmul(a, b)
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    mo, no, ko = (_override(v, batch, d) for v, d in ((m_override, M), (n_override, N),
                                                       (k_override, K)))
    kk = np.arange(K)
    a = np.where(kk < ko[..., None, None], np.broadcast_to(a, batch + (M, K)), 0.0)
    c = np.matmul(a, b)
    keep = (np.arange(M)[:, None] < mo[..., None, None]) & (np.arange(N) < no[..., None, None])
    return np.where(keep, c, padding_value)
