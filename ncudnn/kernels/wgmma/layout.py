"""Shared-memory matrix descriptors and operand layouts of ``wgmma`` (PTX ISA, "Matrix Descriptor Format").

A descriptor is a 64-bit value: start address >> 4 in bits 0-13, leading-dimension byte offset (LBO)
>> 4 in bits 16-29, stride-dimension byte offset (SBO) >> 4 in bits 32-45, base offset in bits 49-51,
swizzle mode in bits 62-63 (0 none, 1 = 128-byte, 2 = 64-byte, 3 = 32-byte). Kernels compute the
constant part once (:func:`desc_const`) and OR in ``(shared address >> 4) & 0x3FFF``; a k step inside
a tile adds its byte offset >> 4 to the descriptor.

Layouts (16-bit elements; a "core matrix" is 8 rows of 16 contiguous bytes):

* ``K-major, no swizzle`` (:func:`kmajor_interleaved_offset`): core matrix (i, kc) (rows 8i.., k
  chunk kc) is 128 contiguous bytes at ``i * SBO + kc * LBO``.
* ``K-major, 128-byte swizzle`` (:func:`kmajor_sw128_offset`): rows of 64 elements (128 bytes); the
  16-byte chunk c of row r sits at chunk ``c ^ (r % 8)``; 8 rows are a 1024-byte atom, 1024-aligned;
  SBO = 1024 (next 8 rows), LBO unused (encoded 1). A k16 step advances the start address by 32 bytes.
* ``MN-major, 128-byte swizzle`` (:func:`mnmajor_sw128_offset`, the operand read with the transpose
  flag): rows are k, each 64 consecutive m / n elements; atom = 8 k-rows x 64 elements, swizzled as
  above; atoms of consecutive k-row groups are 1024 bytes apart, atoms of the next 64 m / n are
  ``rows_k * 128`` bytes apart. A k16 step advances the start address by 2048 bytes.

Everything here is plain Python (host side: descriptors, probe images, the simulator's decoder).
"""

__all__ = ["SWIZZLE_NONE", "SWIZZLE_128B", "SWIZZLE_64B", "SWIZZLE_32B", "encode_desc", "decode_desc",
           "desc_const", "kmajor_interleaved_offset", "kmajor_sw128_offset", "mnmajor_sw128_offset",
           "sw128_chunk"]

SWIZZLE_NONE, SWIZZLE_128B, SWIZZLE_64B, SWIZZLE_32B = 0, 1, 2, 3


def encode_desc(addr, lbo, sbo, swizzle, base_offset=0):
    """The 64-bit descriptor (as a Python int) of a shared operand at byte address ``addr``."""
    return (((addr >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32)
            | ((base_offset & 7) << 49) | ((swizzle & 3) << 62))


def desc_const(lbo, sbo, swizzle):
    """Descriptor bits that do not depend on the address, as a signed int64 value (kernels OR the
    address in)."""
    v = encode_desc(0, lbo, sbo, swizzle)
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_desc(desc):
    """(addr, lbo, sbo, swizzle, base_offset) in bytes of a descriptor (int, any sign)."""
    d = int(desc) & ((1 << 64) - 1)
    return ((d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4, (d >> 62) & 3,
            (d >> 49) & 7)


def sw128_chunk(row, chunk):
    """Physical 16-byte chunk of logical ``chunk`` in ``row`` of a 128-byte-swizzled atom."""
    return chunk ^ (row & 7)


def kmajor_interleaved_offset(row, k, lbo, sbo):
    """Byte offset of element (row, k) in the K-major no-swizzle layout."""
    return (row >> 3) * sbo + (k >> 3) * lbo + (row & 7) * 16 + (k & 7) * 2


def kmajor_sw128_offset(row, k):
    """Byte offset of element (row, k) of a K-major tile with 64-element rows, 128-byte swizzle
    (k < 64; wider k tiles are separate 64-column panels)."""
    return row * 128 + sw128_chunk(row, k >> 3) * 16 + (k & 7) * 2


def mnmajor_sw128_offset(k, mn, rows_k):
    """Byte offset of element (k, mn) of an MN-major tile of ``rows_k`` k-rows, 128-byte swizzle."""
    panel = (mn >> 6) * rows_k * 128
    c = (mn & 63) >> 3
    return panel + k * 128 + sw128_chunk(k, c) * 16 + (mn & 7) * 2
