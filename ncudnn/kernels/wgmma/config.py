"""wgmma GEMM knobs: a frozen config, the config list, ``check``.

A block computes a BLOCK_M x BLOCK_N tile of C with WGS consumer warpgroups; warpgroup w owns rows
``64 * MI * w ..`` (MI m64 slices, each one ``wgmma.m64n{BLOCK_N}k16`` chain), all of BLOCK_N. The k loop
walks 64-element k tiles (one 128-byte swizzle row) through a STAGES-deep cp.async ring; every thread
of the block loads (no producer warpgroup), STAGES - 2 tiles ahead (EARLY: STAGES - 1, one more barrier). GROUP_M groups block rows in the tile order (L2 reuse).
"""
from dataclasses import dataclass, replace

__all__ = ["WgmmaConfig", "CONFIGS", "check", "smem_bytes", "stage_bytes", "staging_bytes", "BLOCK_K",
           "STAGE_PAD"]

#: k elements of one k tile (16-bit types: one 128-byte swizzled row)
BLOCK_K = 64
#: f32 padding of a staged epilogue row (conflict-free 8-byte fragment writes)
STAGE_PAD = 8


@dataclass(frozen=True)
class WgmmaConfig:
    BLOCK_N: int = 256
    WGS: int = 2            # consumer warpgroups
    MI: int = 1             # m64 slices per warpgroup
    STAGES: int = 4
    GROUP_M: int = 8
    EARLY: int = 0          # 1: loads STAGES - 1 k tiles ahead (one more barrier per k tile), 0: STAGES - 2
    L2PF: int = 0           # cp.async L2 prefetch-size hint in bytes (64, 128, 256), 0: none
    MNLD: int = 1           # MN-major loads: 1 affine slot addresses (power-of-two threads), 0 per-slot math
    EPI: int = 1            # epilogue: 1 16-byte vector stores of C (epi_vec), 2 the same with .cs (evict-first)
    #                         hints, 3 1 plus the packed 16-bit fast path (alpha-only epilogue, beta 0), 0 one
    #                         output per thread per step

    def replace(self, **kw):
        return replace(self, **kw)

    @property
    def BLOCK_M(self):
        return 64 * self.MI * self.WGS

    @property
    def BLOCK_K(self):
        return BLOCK_K

    @property
    def SPLIT_K(self):
        """No split-K (the tensor-core engines' cost model asks every kernel config for its split count)."""
        return 1

    @property
    def threads(self):
        return 128 * self.WGS

    @property
    def name(self):
        return (f"{self.BLOCK_M}x{self.BLOCK_N}x{BLOCK_K}_wg{self.WGS}x{self.MI}_s{self.STAGES}_g{self.GROUP_M}"
                + ("_early" if self.EARLY else "") + (f"_l2{self.L2PF}" if self.L2PF else "")
                + ("_mn0" if not self.MNLD else "") + ({0: "_epi0", 2: "_epics", 3: "_epipk"}.get(self.EPI, "")))


def stage_bytes(cfg):
    return (cfg.BLOCK_M + cfg.BLOCK_N) * BLOCK_K * 2


def staging_bytes(cfg):
    """Shared bytes the epilogue stages the f32 tile through (reusing the ring)."""
    return cfg.BLOCK_M * (cfg.BLOCK_N + STAGE_PAD) * 4


def smem_bytes(cfg):
    """Dynamic shared memory of one block: the ring (or the staged tile, if larger) + 1024 bytes of
    alignment slack (swizzle atoms are 1024-byte aligned)."""
    return max(cfg.STAGES * stage_bytes(cfg), staging_bytes(cfg)) + 1024


def check(cfg, max_smem=227 * 1024):
    """(ok, reason): whether the kernel factory can build ``cfg``."""
    if cfg.BLOCK_N % 64 or not 64 <= cfg.BLOCK_N <= 256:
        return False, f"BLOCK_N={cfg.BLOCK_N} must be 64, 128, 192 or 256 (64-column swizzle panels)"
    if cfg.WGS < 1 or cfg.MI < 1 or cfg.threads > 1024:
        return False, f"warpgroups {cfg.WGS} x {cfg.MI} m64 slices out of range"
    if cfg.MI * cfg.BLOCK_N // 2 > 128:
        return False, f"{cfg.MI * cfg.BLOCK_N // 2} accumulator registers per thread > 128"
    for name, rows in (("A", cfg.BLOCK_M), ("B", cfg.BLOCK_N)):
        if (rows * 8) % cfg.threads:
            return False, f"{name} tile's 16-byte chunks do not divide among {cfg.threads} threads"
    if cfg.STAGES < 3 - cfg.EARLY:
        return False, f"STAGES < {3 - cfg.EARLY} (the ring keeps one k tile for the wgmma in flight)"
    if cfg.L2PF not in (0, 64, 128, 256):
        return False, f"L2PF={cfg.L2PF} is not 0, 64, 128 or 256"
    if cfg.EARLY not in (0, 1):
        return False, f"EARLY={cfg.EARLY} is not 0 or 1"
    if cfg.MNLD not in (0, 1):
        return False, f"MNLD={cfg.MNLD} is not 0 or 1"
    if cfg.EPI not in (0, 1, 2, 3):
        return False, f"EPI={cfg.EPI} is not 0, 1, 2 or 3"
    if smem_bytes(cfg) > max_smem:
        return False, f"{smem_bytes(cfg)} bytes of shared memory > {max_smem}"
    if cfg.GROUP_M < 1:
        return False, "GROUP_M < 1"
    return True, ""


#: configs, best first for large problems (sm_90: 227 KB shared per block), all EARLY (faster on the H200 at
#: 8192^3 for FP16 and TF32; dev/perf_notes.md, "Tensor-core matmul")
CONFIGS = (
    WgmmaConfig(256, 2, 1, 4, 8, 1),
    WgmmaConfig(128, 2, 1, 5, 8, 1),
    WgmmaConfig(256, 2, 1, 3, 8, 1),
    WgmmaConfig(128, 2, 2, 4, 8, 1),
    WgmmaConfig(128, 1, 1, 6, 8, 1),
    WgmmaConfig(64, 1, 1, 6, 8, 1),
)
