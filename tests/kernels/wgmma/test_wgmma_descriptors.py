"""wgmma descriptors and the simulator's operand decoder against the layout helpers (pure host code)."""
import numpy as np
import pytest

from ncudnn.kernels.wgmma import layout as L
from ncudnn.kernels.wgmma.sim import operand_offsets


def test_descriptor_fields_roundtrip(rng):
    for _ in range(50):
        addr = int(rng.integers(0, 1 << 14)) << 4
        lbo = int(rng.integers(0, 1 << 14)) << 4
        sbo = int(rng.integers(0, 1 << 14)) << 4
        swz = int(rng.integers(0, 4))
        d = L.encode_desc(addr, lbo, sbo, swz)
        assert L.decode_desc(d) == (addr, lbo, sbo, swz, 0)
        c = L.desc_const(lbo, sbo, swz)
        assert -(1 << 63) <= c < (1 << 63)
        assert L.decode_desc(c | (addr >> 4)) == (addr, lbo, sbo, swz, 0)


def test_descriptor_bit_positions():
    d = L.encode_desc(0x10, 0x20, 0x30, L.SWIZZLE_128B)
    assert d == 1 | (2 << 16) | (3 << 32) | (1 << 62)


def _swizzle(phys):
    return phys ^ (((phys >> 7) & 7) << 4)


@pytest.mark.parametrize("rows", [64, 128, 256])
def test_kmajor_sw128_decoder_matches_layout(rows):
    for kk in range(4):   # a k16 step advances the start address by 32 bytes
        d = L.encode_desc(1024 + 32 * kk, 16, 1024, L.SWIZZLE_128B)
        off = operand_offsets(d, rows, 16, mn_major=False)
        want = np.array([[1024 + L.kmajor_sw128_offset(r, 16 * kk + k) for k in range(16)] for r in range(rows)])
        assert np.array_equal(off, want)


@pytest.mark.parametrize("n", [64, 128, 256])
def test_mnmajor_sw128_decoder_matches_layout(n):
    rows_k = 64
    for kk in range(4):   # a k16 step advances the start address by 16 k rows (2048 bytes)
        d = L.encode_desc(2048 * kk, rows_k * 128, 1024, L.SWIZZLE_128B)
        off = operand_offsets(d, n, 16, mn_major=True)
        want = np.array([[L.mnmajor_sw128_offset(16 * kk + k, j, rows_k) for k in range(16)] for j in range(n)])
        assert np.array_equal(off, want)


def test_interleaved_decoder_matches_layout():
    K = 64
    for kk in range(4):
        d = L.encode_desc(256 * kk, 128, K // 8 * 128, L.SWIZZLE_NONE)
        off = operand_offsets(d, 64, 16, mn_major=False)
        want = np.array([[L.kmajor_interleaved_offset(r, 16 * kk + k, 128, K // 8 * 128) for k in range(16)]
                         for r in range(64)])
        assert np.array_equal(off, want)


def test_sw128_rows_hit_distinct_chunks():
    """The 8 rows of an atom put logical chunk c in 8 different 16-byte chunks (conflict-free)."""
    for c in range(8):
        assert sorted(L.sw128_chunk(r, c) for r in range(8)) == list(range(8))
    assert _swizzle(1024 + 128 * 3 + 16 * 5) == 1024 + 128 * 3 + 16 * (5 ^ 3)
