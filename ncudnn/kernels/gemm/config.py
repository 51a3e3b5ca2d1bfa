"""Compile-time GEMM knobs (CUTLASS vocabulary), the config list and its ``keep`` prune.

A block computes a BLOCK_M x BLOCK_N tile of C; its threads form a (BLOCK_M/THREAD_M) x
(BLOCK_N/THREAD_N) grid, each owning THREAD_M x THREAD_N accumulators in registers. A warp covers a
WARP_M x WARP_N sub-tile (WARP_M/THREAD_M x WARP_N/THREAD_N lanes). With VEC=1 thread (ty, tx) owns
rows ``ty + i*(BLOCK_M/THREAD_M)`` and columns ``tx + j*(BLOCK_N/THREAD_N)`` (interleaved: a warp's
shared-memory fragment reads hit consecutive words, its stores to C are coalesced); with VEC=4 it
owns groups of 4 consecutive rows / columns (``ty*4 + g*(BLOCK_M*4/THREAD_M) + 0..3``), each group
read from shared memory by one 16-byte load (4x fewer shared-load instructions per FMA).
"""
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class GemmConfig:
    BLOCK_M: int = 128
    BLOCK_N: int = 128
    BLOCK_K: int = 8
    THREAD_M: int = 8
    THREAD_N: int = 8
    WARP_M: int = 32    # 0: derived (lanes laid out 4 x 8, or the whole block when it is < 32 threads)
    WARP_N: int = 64
    STAGES: int = 2     # 1: load -> sync -> compute; 2: register-prefetched shared double buffer
    SPLIT_K: int = 1    # > 1: K split over grid.z (see SPLIT_MODE)
    SPLIT_MODE: str = "workspace"   # "workspace" (deterministic) | "atomic" (NONDETERMINISTIC)
    SWIZZLE: int = 1    # GROUP_M of Triton's grouped tile order (1: row-major tile order)
    SMEM_PAD: int = 4   # extra words per shared row (breaks store bank conflicts)
    VEC: int = 1        # 4: fragments as 4 consecutive rows / cols read by one 16-byte shared load
    MAX_REGS: int = 0   # > 0: register cap per thread (ptxas -maxrregcount), e.g. 168 -> 3 blocks of 128
    UNROLL_K: int = 2   # k-steps of the inner product written out per loop trip (compile time grows fast)
    MAINLOOP: str = "generic"   # "fast": fastloop.py (16-byte global quads, all k-steps unrolled) for
    #                             strided fp32 A and B; other operands (conv, fp16/bf16/fp64) keep "generic"

    @property
    def threads_m(self):
        return self.BLOCK_M // self.THREAD_M

    @property
    def threads_n(self):
        return self.BLOCK_N // self.THREAD_N

    @property
    def num_threads(self):
        return self.threads_m * self.threads_n

    def lanes(self):
        """(lanes along m, lanes along n) of one warp."""
        if self.num_threads <= 32:
            return self.threads_m, self.threads_n
        if self.WARP_M and self.WARP_N:
            return self.WARP_M // self.THREAD_M, self.WARP_N // self.THREAD_N
        ln = min(8, self.threads_n)
        return 32 // ln, ln

    def smem_bytes(self, itemsize=4):
        return self.STAGES * self.BLOCK_K * (self.BLOCK_M + self.BLOCK_N + 2 * self.SMEM_PAD) * itemsize

    def replace(self, **kw):
        return replace(self, **kw)


def check(cfg, itemsize=4):
    """(ok, reason): whether ``cfg`` is a buildable configuration."""
    if cfg.BLOCK_M % cfg.THREAD_M or cfg.BLOCK_N % cfg.THREAD_N:
        return False, "BLOCK_M/N must be multiples of THREAD_M/N"
    nt = cfg.num_threads
    if nt > 1024:
        return False, f"{nt} threads per block > 1024"
    for name, tile in (("A", cfg.BLOCK_M * cfg.BLOCK_K), ("B", cfg.BLOCK_N * cfg.BLOCK_K)):
        if tile % nt:
            return False, f"{name} tile of {tile} elements does not split over {nt} threads"
    lm, ln = cfg.lanes()
    if nt > 32:
        if lm * ln != 32:
            return False, f"warp tile {cfg.WARP_M}x{cfg.WARP_N} is not 32 lanes of {cfg.THREAD_M}x{cfg.THREAD_N}"
        if cfg.threads_m % lm or cfg.threads_n % ln:
            return False, "warp tile does not divide the block tile"
        if nt % 32:
            return False, "threads per block not a multiple of 32"
    if cfg.STAGES not in (1, 2):
        return False, "STAGES must be 1 or 2"
    if cfg.SPLIT_K < 1 or cfg.SPLIT_MODE not in ("workspace", "atomic"):
        return False, "bad split-K"
    if cfg.VEC not in (1, 4):
        return False, "VEC must be 1 or 4"
    if cfg.VEC == 4 and (cfg.THREAD_M % 4 or cfg.THREAD_N % 4 or cfg.SMEM_PAD % 4 or itemsize != 4):
        return False, "VEC=4 needs THREAD_M/N and SMEM_PAD multiples of 4 and 4-byte accumulators"
    if cfg.UNROLL_K < 1 or cfg.BLOCK_K % cfg.UNROLL_K:
        return False, "UNROLL_K must divide BLOCK_K"
    if cfg.SWIZZLE < 1:
        return False, "SWIZZLE must be >= 1"
    if cfg.MAINLOOP not in ("generic", "fast"):
        return False, "MAINLOOP must be 'generic' or 'fast'"
    if cfg.MAINLOOP == "fast":
        if cfg.VEC != 4 or cfg.STAGES != 2 or cfg.BLOCK_K % 4:
            return False, "MAINLOOP='fast' needs VEC=4, STAGES=2 and BLOCK_K a multiple of 4"
        for name, tile in (("A", cfg.BLOCK_M * cfg.BLOCK_K), ("B", cfg.BLOCK_N * cfg.BLOCK_K)):
            if (tile // 4) % nt:
                return False, f"MAINLOOP='fast': {name} tile of {tile // 4} quads does not split over {nt} threads"
    if cfg.smem_bytes(itemsize) > 48 * 1024:
        return False, "static shared memory > 48 KB"
    return True, ""


#: Hand-picked list, largest first. FP32 SIMT on sm_90: 8x8 accumulators per thread give 64 FMAs per
#: 4 (VEC=4) or 16 (VEC=1) shared loads; ptxas puts the 128x128 blocks at ~167 registers (1 block
#: of 256 threads per SM) and the 128-thread ones at ~220-230 (2 blocks per SM), spill-free.
CONFIGS = (
    GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4,
               SWIZZLE=8),
    GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64),
    GemmConfig(BLOCK_M=128, BLOCK_N=64, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4),
    GemmConfig(BLOCK_M=64, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4),
    GemmConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=8, THREAD_M=4, THREAD_N=8, WARP_M=16, WARP_N=64, VEC=4),
    GemmConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=16, THREAD_M=4, THREAD_N=4, WARP_M=16, WARP_N=32),
    GemmConfig(BLOCK_M=32, BLOCK_N=32, BLOCK_K=8, THREAD_M=2, THREAD_N=2, WARP_M=8, WARP_N=16),
    GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=16, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4),
    # fast mainloop (fastloop.py): 16-byte global quads, every k-step unrolled; 128 registers
    # (spill-free on sm_90) -> 2 blocks of 256 threads per SM
    GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4,
               SWIZZLE=8, MAINLOOP="fast", MAX_REGS=128),
)


def keep(cfg, problem):
    """Prune for a problem dict (M, N, K[, dtype "float64" for fp64 accumulation][, deterministic]):
    buildable and sensible."""
    ok, _ = check(cfg, 8 if problem.get("dtype") == "float64" else 4)
    if not ok:
        return False
    M, N, K = problem["M"], problem["N"], problem["K"]
    if cfg.SPLIT_K > 1:
        if cfg.SPLIT_MODE == "atomic" and problem.get("deterministic", False):
            return False
        if K < cfg.SPLIT_K * cfg.BLOCK_K * 4:
            return False
    # tiles far larger than the problem waste the whole block
    if cfg.BLOCK_M > 2 * max(M, 16) or cfg.BLOCK_N > 2 * max(N, 16):
        return False
    return True


#: smaller fast-mainloop blocks for GEMMs whose M or N is under 128 or whose grid must split K many ways
#: (1x1 conv wgrad: conv_gemm_1x1.WGRAD_TILES). sm_90 (nvJitLink, km / kn operands): 128x64 and 64x128 at
#: 128 registers spill-free; 64x64 t8x8 (64 threads, two quads per operand per thread) spills 196 B at
#: 128 and takes 166 at a cap of 168 (6 blocks / SM); 64x64 t8x4 (128 threads) 109.
FAST_SMALL = (
    GemmConfig(BLOCK_M=128, BLOCK_N=64, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4,
               UNROLL_K=2, MAINLOOP="fast", MAX_REGS=128),
    GemmConfig(BLOCK_M=64, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4,
               UNROLL_K=2, MAINLOOP="fast", MAX_REGS=128),
    GemmConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4,
               UNROLL_K=2, MAINLOOP="fast", MAX_REGS=168),
    GemmConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=8, THREAD_M=8, THREAD_N=4, WARP_M=32, WARP_N=32, VEC=4,
               UNROLL_K=2, MAINLOOP="fast", MAX_REGS=128),
)


#: blocks for plain fp32 matmul on row-major A ("mk", k-fast: each quad stored as 4 scalar st.shared, a
#: transpose) and B ("kn"), sm_90 registers: FAST_SMALL's 128x64 / 64x128 spill 16-24 B under a cap of
#: 128 with this A, so they are capped at 168 here (154 used: 3 blocks of 128 threads per SM); the 64x64
#: blocks as in FAST_SMALL (t8x8: 154, 6 blocks of 64 threads; t8x4: 107, 4 blocks of 128); then a
#: 16-row block for M <= 16 (GEMV-like: B streamed once, split over K): 16x128x32, 4x4 per thread,
#: 128 threads, one A quad and eight B quads per thread per k-tile
FAST_SKINNY = (FAST_SMALL[0].replace(MAX_REGS=168), FAST_SMALL[1].replace(MAX_REGS=168), FAST_SMALL[2],
               FAST_SMALL[3],
               GemmConfig(BLOCK_M=16, BLOCK_N=128, BLOCK_K=32, THREAD_M=4, THREAD_N=4, WARP_M=16, WARP_N=32,
                          VEC=4, UNROLL_K=2, MAINLOOP="fast", MAX_REGS=128))
