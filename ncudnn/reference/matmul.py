"""Reference for the backend MATMUL operation: batched C = A @ B in float64.

``a`` is (..., M, K), ``b`` is (..., K, N); the batch dims broadcast numpy-style (a size-1 batch
dim, e.g. a shared weight, is reused across the other operand's batch: cuDNN's stride-0 batch).
1-D operands are not accepted (rank >= 2 is required).
Returns (broadcast batch..., M, N) float64, accumulated exactly in float64.
"""
import numpy as np

from ._util import f64

__all__ = ["matmul"]


def matmul(a, b):
    """Batched ``a @ b`` with numpy batch broadcasting; float64 result of shape (..., M, N)."""
    a, b = f64(a), f64(b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("matmul operands must be at least 2-D")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dims differ: {a.shape} @ {b.shape}")
    return np.matmul(a, b)
