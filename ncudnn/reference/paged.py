"""Reference for PAGED_CACHE_LOAD: gather a contiguous K or V tensor from a paged cache.

container (num_pages, H, page_size, D); page_table (B, max_pages) of page ids (any shape holding
B * max_pages values, e.g. cuDNN's [B, 1, max_pages, 1]); seq_len (B,) valid lengths (any shape
holding B values, e.g. [B, 1, 1, 1]). The output y (B, H, S, D), S = ``max_seq_len``
(default max_pages * page_size), is

    y[b, h, s, :] = container[page_table[b, s // page_size], h, s % page_size, :]   for s < seq_len[b]

and 0 for s >= seq_len[b] (those rows are unspecified in a real kernel: compare valid rows only).
Page ids past a sequence's length are never read, so they may hold anything.
"""
import numpy as np

from ._util import f64

__all__ = ["paged_cache_load"]


def paged_cache_load(container, page_table, seq_len, max_seq_len=None):
    """-> y (B, H, S, D) float64; see module docstring."""
    cont = f64(container)
    P, H, page, D = cont.shape
    seq = np.asarray(seq_len).reshape(-1).astype(np.int64)
    B = seq.size
    table = np.asarray(page_table).reshape(B, -1).astype(np.int64)
    S = table.shape[1] * page if max_seq_len is None else int(max_seq_len)
    if S > table.shape[1] * page:
        raise ValueError(f"max_seq_len {S} exceeds page table capacity {table.shape[1] * page}")
    y = np.zeros((B, H, S, D))
    for b in range(B):
        n = min(int(seq[b]), S)
        s = np.arange(n)
        pages = table[b, s // page]
        if n and (pages.min() < 0 or pages.max() >= P):
            raise ValueError(f"batch {b}: page id out of range [0, {P})")
        y[b, :, :n] = cont[pages, :, s % page].transpose(1, 0, 2)
    return y
