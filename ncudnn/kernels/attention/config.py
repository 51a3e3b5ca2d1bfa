"""Compile-time knobs of the flash-attention kernels, their ``check`` and the problem-level ``keep``.

A forward block owns BLOCK_M query rows of one (batch, head) and streams the keys BLOCK_N at a time;
a backward dK/dV block owns BLOCK_N keys of one (batch, kv head) and streams the query rows of every
query head of its group BLOCK_M at a time, a dQ block owns BLOCK_M query rows and streams the keys.
THREADS threads share each tile's work (scores: BLOCK_M x BLOCK_N entries, accumulators: rows x head
dim, both split evenly over the threads, accumulators in registers). The tiles live in shared memory
as float32 (Q, one K-or-V buffer, the score tile; the backward also dO and both K and V; the K / V
rows padded by one word against shared-memory bank conflicts), so the
static 48 KiB per block bounds the tile sizes for a head dimension; :func:`smem_bytes` is the count.
"""
from dataclasses import dataclass, replace

#: static shared memory a block may declare (bytes)
SMEM_LIMIT = 48 * 1024
TILES = (8, 16, 32, 64)
THREAD_COUNTS = (32, 64, 128, 256)


@dataclass(frozen=True)
class AttnConfig:
    BLOCK_M: int = 32     # query rows per block (forward, dQ) / per streamed tile (dK/dV)
    BLOCK_N: int = 32     # keys per streamed tile (forward, dQ) / per block (dK/dV)
    THREADS: int = 128

    def replace(self, **kw):
        return replace(self, **kw)

    def check(self, d_qk, d_v, backward=False):
        """(ok, reason): whether this config builds for head dims ``d_qk`` / ``d_v``."""
        if self.BLOCK_M not in TILES or self.BLOCK_N not in TILES:
            return False, f"BLOCK_M {self.BLOCK_M} / BLOCK_N {self.BLOCK_N} not in {TILES}"
        if self.THREADS not in THREAD_COUNTS:
            return False, f"THREADS {self.THREADS} not in {THREAD_COUNTS}"
        if self.THREADS < self.BLOCK_M or self.THREADS < self.BLOCK_N:
            return False, f"THREADS {self.THREADS} < the rows of a tile (one thread a row in the softmax)"
        if (self.BLOCK_M * self.BLOCK_N) % self.THREADS:
            return False, f"the {self.BLOCK_M}x{self.BLOCK_N} score tile does not split over {self.THREADS} threads"
        rows = self.BLOCK_N if backward else self.BLOCK_M
        for name, d in (("d_qk", d_qk), ("d_v", d_v)):
            if (rows * d) % self.THREADS:
                return False, f"the {rows}x{d} ({name}) accumulator tile does not split over {self.THREADS} threads"
        if (self.BLOCK_M * d_qk) % self.THREADS and backward:
            return False, f"the {self.BLOCK_M}x{d_qk} dQ tile does not split over {self.THREADS} threads"
        if self.acc_per_thread(d_qk, d_v, backward) > 128:
            return False, f"{self.acc_per_thread(d_qk, d_v, backward)} accumulators a thread (> 128)"
        nbytes = smem_bytes(self, d_qk, d_v, backward)
        if nbytes > SMEM_LIMIT:
            return False, f"{nbytes} bytes of shared memory > {SMEM_LIMIT}"
        return True, ""

    def acc_per_thread(self, d_qk, d_v, backward=False):
        if backward:
            return max(self.BLOCK_N * (d_qk + d_v), self.BLOCK_M * d_qk) // self.THREADS
        return self.BLOCK_M * d_v // self.THREADS


def smem_bytes(cfg, d_qk, d_v, backward=False):
    """Static shared memory of the kernel for ``cfg`` (float32 tiles plus per-row statistics)."""
    m, n = cfg.BLOCK_M, cfg.BLOCK_N
    if backward:   # Q, dO, K, V (rows padded by a word), P, dS, two row vectors
        words = m * d_qk + m * d_v + n * (d_qk + 1) + n * (d_v + 1) + 2 * m * n + 2 * m
    else:          # Q, K-or-V (rows padded by a word), S, three row vectors
        words = m * d_qk + n * (max(d_qk, d_v) + 1) + m * n + 3 * m
    return 4 * words


def keep(cfg, d_qk, d_v, backward=False):
    """(ok, reason) of ``cfg`` for a problem: :meth:`AttnConfig.check`."""
    return cfg.check(d_qk, d_v, backward)


def configs(d_qk, d_v, backward=False):
    """Every config that builds for these head dims, largest tiles first."""
    out = []
    for m in reversed(TILES):
        for n in reversed(TILES):
            for t in THREAD_COUNTS:
                c = AttnConfig(m, n, t)
                if c.check(d_qk, d_v, backward)[0]:
                    out.append(c)
    return out


#: the shapes the heuristics offer beside the default (the autotuner searches :func:`configs`)
SHORTLIST = ((64, 64, 256), (32, 32, 128), (16, 16, 64), (8, 8, 32))


def shortlist(d_qk, d_v, backward=False):
    """The default config, then the SHORTLIST configs that build, without repeats."""
    out = [default_config(d_qk, d_v, backward)]
    for m, n, t in SHORTLIST:
        c = AttnConfig(m, n, t)
        if c not in out and c.check(d_qk, d_v, backward)[0]:
            out.append(c)
    return [c for c in out if c is not None]


def default_config(d_qk, d_v, backward=False):
    """The first config of a fixed preference (32x32 or smaller tiles, 128 threads where they split)."""
    for m, n, t in ((32, 32, 128), (32, 16, 128), (16, 32, 128), (16, 16, 128), (16, 16, 64), (16, 8, 64),
                    (8, 16, 64), (8, 8, 64), (8, 8, 32)):
        c = AttnConfig(m, n, t)
        if c.check(d_qk, d_v, backward)[0]:
            return c
    cs = configs(d_qk, d_v, backward)
    return cs[-1] if cs else None
