"""Tensor-core GEMM knobs: a frozen config, the config list, ``check`` / ``keep`` prunes.

CUTLASS vocabulary: a block computes a BLOCK_M x BLOCK_N tile of C with WARPS_M x WARPS_N warps,
each warp a (BLOCK_M / WARPS_M) x (BLOCK_N / WARPS_N) tile built from m16n8k16 mma.sync; the k loop
walks BLOCK_K slices through a STAGES-deep cp.async shared-memory ring. GROUP_M groups block rows
in the tile order (L2 reuse of B).
"""
from dataclasses import dataclass, replace

__all__ = ["TcGemmConfig", "CONFIGS", "VERSIONS", "check", "keep", "smem_bytes", "swz"]

#: mainloop versions the kernel factory generates
VERSIONS = (1, 3, 4)


@dataclass(frozen=True)
class TcGemmConfig:
    BLOCK_M: int = 128
    BLOCK_N: int = 128
    BLOCK_K: int = 32
    WARPS_M: int = 2
    WARPS_N: int = 2
    STAGES: int = 4
    GROUP_M: int = 8
    VERSION: int = 1        # mainloop version (kernel.py's docstring): 1, 3 or 4 (4: conv, C % BLOCK_K == 0)
    SPLIT_K: int = 1        # > 1 (conv only): the k tiles split over grid y, fp32 partials (kernels/tc_conv/splitk.py)

    def replace(self, **kw):
        return replace(self, **kw)

    @property
    def threads(self):
        return 32 * self.WARPS_M * self.WARPS_N

    @property
    def name(self):
        return (f"{self.BLOCK_M}x{self.BLOCK_N}x{self.BLOCK_K}_w{self.WARPS_M}x{self.WARPS_N}"
                f"_s{self.STAGES}_g{self.GROUP_M}" + (f"_v{self.VERSION}" if self.VERSION != 1 else "")
                + (f"_k{self.SPLIT_K}" if self.SPLIT_K != 1 else ""))


def smem_bytes(cfg):
    """Dynamic shared memory of one block: STAGES x (A tile + B tile) of 16-bit elements."""
    return cfg.STAGES * (cfg.BLOCK_M + cfg.BLOCK_N) * cfg.BLOCK_K * 2


def swz(row_expr, ch):
    """Source text of the XOR swizzle of a shared tile row (16-byte chunk ``c`` of row ``r`` lives at chunk
    ``c ^ swz(r)``; ``ch`` chunks a row: ``r & 7`` for >= 8, ``(r >> 1) & 3`` for 4, ``(r >> 2) & 1`` for 2)."""
    if ch >= 8:
        return f"(({row_expr}) & 7)"
    if ch == 4:
        return f"((({row_expr}) >> 1) & 3)"
    if ch == 2:
        return f"((({row_expr}) >> 2) & 1)"
    return "0"


def _pow2(x):
    return x > 0 and x & (x - 1) == 0


def check(cfg, max_smem=227 * 1024):
    """(ok, reason): whether the kernel factory can build ``cfg``."""
    wm, wn = cfg.BLOCK_M // max(cfg.WARPS_M, 1), cfg.BLOCK_N // max(cfg.WARPS_N, 1)
    for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        if not _pow2(getattr(cfg, name)):
            return False, f"{name}={getattr(cfg, name)} is not a power of two"
    if cfg.BLOCK_K < 16:
        return False, f"BLOCK_K={cfg.BLOCK_K} < 16 (one mma k step)"
    if cfg.WARPS_M < 1 or cfg.WARPS_N < 1 or cfg.threads > 1024:
        return False, f"warps {cfg.WARPS_M}x{cfg.WARPS_N} out of range"
    if wm < 16 or wm % 16 or cfg.BLOCK_M % cfg.WARPS_M:
        return False, f"warp tile M {wm} is not a multiple of 16"
    if wn < 16 or wn % 16 or cfg.BLOCK_N % cfg.WARPS_N:
        return False, f"warp tile N {wn} is not a multiple of 16 (ldmatrix.x4 covers two n8 tiles)"
    for name, outer in (("A", cfg.BLOCK_M), ("B", cfg.BLOCK_N)):
        if (outer * cfg.BLOCK_K // 8) % cfg.threads:
            return False, f"{name} tile's 16-byte chunks do not divide among {cfg.threads} threads"
    if cfg.STAGES < 2:
        return False, "STAGES < 2 (no pipelining)"
    if smem_bytes(cfg) > max_smem:
        return False, f"{smem_bytes(cfg)} bytes of shared memory > {max_smem}"
    if cfg.GROUP_M < 1:
        return False, "GROUP_M < 1"
    if cfg.SPLIT_K < 1:
        return False, f"SPLIT_K={cfg.SPLIT_K} < 1"
    if cfg.VERSION not in VERSIONS:
        return False, f"VERSION={cfg.VERSION} is not one of {VERSIONS}"
    return True, ""


#: GPU configs, best first for large problems (sm_90: 227 KB shared per block).
CONFIGS = (
    TcGemmConfig(128, 128, 32, 2, 2, 4),
    TcGemmConfig(128, 256, 32, 2, 4, 3),
    TcGemmConfig(256, 128, 32, 4, 2, 3),
    TcGemmConfig(128, 128, 64, 2, 4, 3),   # (2, 2) at BK=64 spills: 32 lane offsets + 128 acc
    TcGemmConfig(64, 128, 32, 2, 2, 4),
    TcGemmConfig(64, 64, 32, 2, 2, 4),
)


def keep(cfg, M, N, K):
    """Prune: drop configs whose tile wastes more than half of the problem in both M and N."""
    return check(cfg)[0] and not (cfg.BLOCK_M > 2 * M and cfg.BLOCK_N > 2 * N)
