"""CUDA-simulator model of the ``wgmma`` intrinsics of :mod:`.ptx` (same names, same semantics).

Each thread computes its own accumulator fragment at issue time from the shared array, decoding the
descriptors exactly as the layout model of :mod:`.layout` says (tf32: 4-byte elements, 4 to a 16-byte
chunk, low 13 mantissa bits dropped: on an H200 the m64n{64,128,256}k8 products match truncated inputs to
1.2e-6 and miss round-to-nearest ones by 5e-3, experiments/probe_wgmma.py) (a valid schedule: on the hardware the
operands are read between issue and the ``wait_group`` that retires the group, and kernels must not
write them in between). Products are exact and summed in float64, then rounded to float32.

Addresses: numba's simulator has no shared window, so ``cvta_shared`` returns the byte offset in the
array; descriptors built from it address the same array passed as ``sm``. The swizzle XORs byte-address
bits 4-6 with bits 7-9 (128-byte), 7-8 (64-byte) or bit 7 (32-byte), as the hardware does on the
absolute shared address (hence the 1024-byte alignment of swizzle atoms).
"""
import threading

import numpy as np

from .layout import decode_desc

__all__ = ["make_wgmma", "make_wgmma_rs", "hold_regs", "acc_scale_rows", "wgmma_fence", "wgmma_commit", "wgmma_wait", "wgmma_wait_acc",
           "fence_proxy_async", "acc_zeros", "udiv32", "store_acc", "get_cp_async_l2", "operand_offsets", "read_operand"]

_ROW_BYTES = {0: 16, 1: 128, 2: 64, 3: 32}
_SW_MASK = {0: 0, 1: 7, 2: 3, 3: 1}


def operand_offsets(desc, rows, k, mn_major, esz=2):
    """Byte addresses (rows x k int64 array) of the elements (row, kk) of a wgmma operand: A is
    (64 rows = m) x k, B is (n rows) x k, both indexed [m|n, k]; ``esz`` bytes per element (2, or 4 for
    tf32, K-major only)."""
    addr, lbo, sbo, swz, _ = decode_desc(desc)
    r = np.arange(rows, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    epc = 16 // esz                          # elements of one 16-byte core-matrix row
    if not mn_major:
        kstride = lbo if swz == 0 else 16
        off = (r >> 3) * sbo + (r & 7) * _ROW_BYTES[swz] + (kk // epc) * kstride + (kk % epc) * esz
    elif esz != 2:
        raise ValueError("MN-major (transposed) wgmma operands are 16-bit only")
    elif swz == 0:
        off = (kk & 7) * 16 + (r & 7) * 2 + (r >> 3) * sbo + (kk >> 3) * lbo
    else:
        per = _ROW_BYTES[swz] // 2          # elements of one swizzle-atom row
        off = (kk >> 3) * sbo + (kk & 7) * _ROW_BYTES[swz] + (r // per) * lbo + (r % per) * 2
    phys = addr + off
    return phys ^ (((phys >> 7) & _SW_MASK[swz]) << 4)


def read_operand(sm, desc, rows, k, mn_major, ab):
    """The operand as float64 (rows x k), read from the shared array ``sm`` through ``desc``; tf32: the
    32-bit words with their low 13 mantissa bits cleared (the tensor core ignores them)."""
    a = np.asarray(getattr(sm, "_ary", sm)).reshape(-1)
    if ab == "tf32":
        u32 = a.view(np.uint32)
        bits = u32[operand_offsets(desc, rows, k, mn_major, 4) >> 2] & np.uint32(0xFFFFE000)
        return bits.view(np.float32).astype(np.float64)
    u16 = a.view(np.uint16)
    bits = u16[operand_offsets(desc, rows, k, mn_major) >> 1]
    if ab == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.float16).astype(np.float64)


def _warpgroup_tid():
    return threading.current_thread().thread_id % 128


def make_wgmma(n, ab="bf16", trans_a=False, trans_b=False):
    nreg = n // 2
    kk = 8 if ab == "tf32" else 16

    def wgmma(sm, acc, desc_a, desc_b, scale_d):
        if len(acc) != nreg:
            raise ValueError(f"wgmma m64n{n}k{kk}: accumulator of {len(acc)} registers, expected {nreg}")
        tid = _warpgroup_tid()
        w, g, t = tid >> 5, (tid & 31) >> 2, tid & 3
        A = read_operand(sm, desc_a, 64, kk, trans_a, ab)
        B = read_operand(sm, desc_b, n, kk, trans_b, ab)
        rows = A[[16 * w + g, 16 * w + g + 8]]                # 2 x kk
        cols = np.arange(n).reshape(-1, 8)[:, [2 * t, 2 * t + 1]].reshape(-1)   # 8j + 2t, 8j + 2t + 1
        prod = rows @ B[cols].T                               # 2 x (n / 4)
        d = np.empty(nreg, dtype=np.float64)
        d[0::4] = prod[0, 0::2]
        d[1::4] = prod[0, 1::2]
        d[2::4] = prod[1, 0::2]
        d[3::4] = prod[1, 1::2]
        if scale_d:
            d += np.asarray(acc, dtype=np.float64)
        return tuple(np.float32(v) for v in d)
    wgmma.__name__ = f"wgmma_m64n{n}k{kk}_{ab}"
    return wgmma


def make_wgmma_rs(n, ab="bf16", trans_b=False):
    """A from registers: a warp-collective (``ptx_sim``'s per-warp rendezvous) that gathers the warp's 16 x 16
    A block from its lanes' packed pairs (mma.m16n8k16's A layout) and reads B through the descriptor."""
    from ..primitives.ptx_sim import _collective, _decode, _halves

    nreg = n // 2

    def run(payloads):
        A = np.zeros((16, 16), np.uint32)
        for lane, (regs, _, _, _, _) in enumerate(payloads):
            g, t = lane >> 2, lane & 3
            for i, r in enumerate(regs):
                row, col = g + 8 * (i & 1), 2 * t + 8 * (i >> 1)
                A[row, col], A[row, col + 1] = _halves(r)
        sm, desc_b = payloads[0][2], payloads[0][3]
        if any(p[3] != desc_b for p in payloads):
            raise RuntimeError("wgmma_rs: the lanes of a warp gave different B descriptors")
        D = _decode(A, ab) @ read_operand(sm, desc_b, n, 16, trans_b, ab).T      # 16 x n
        out = []
        for lane, (_, acc, _, _, scale_d) in enumerate(payloads):
            g, t = lane >> 2, lane & 3
            d = np.empty(nreg, dtype=np.float64)
            d[0::4] = D[g, 2 * t::8]
            d[1::4] = D[g, 2 * t + 1::8]
            d[2::4] = D[g + 8, 2 * t::8]
            d[3::4] = D[g + 8, 2 * t + 1::8]
            if scale_d:
                d += np.asarray(acc, dtype=np.float64)
            out.append(tuple(np.float32(v) for v in d))
        return out

    def wgmma_rs(sm, acc, a0, a1, a2, a3, desc_b, scale_d):
        if len(acc) != nreg:
            raise ValueError(f"wgmma_rs m64n{n}k16: accumulator of {len(acc)} registers, expected {nreg}")
        return _collective(run, ((a0, a1, a2, a3), acc, sm, int(desc_b), int(scale_d)))
    wgmma_rs.__name__ = f"wgmma_rs_m64n{n}k16_{ab}"
    return wgmma_rs


def hold_regs(r0, r1, r2, r3):
    pass


def acc_scale_rows(acc, sa, sb):
    return tuple(np.float32(v * (sa if i % 4 < 2 else sb)) for i, v in enumerate(acc))


def wgmma_fence():
    pass


def wgmma_commit():
    pass


def wgmma_wait(n):
    pass


def wgmma_wait_acc(n, acc):
    return acc


def fence_proxy_async():
    pass


def acc_zeros(n):
    return (np.float32(0.0),) * int(n)


def udiv32(a, b):
    return np.int32(int(a) // int(b))


def store_acc(arr, off, acc, row_stride):
    for r, v in enumerate(acc):
        j, q = divmod(r, 4)
        arr[int(off) + (q >> 1) * 8 * row_stride + 8 * j + (q & 1)] = v


def get_cp_async_l2(prefetch):
    """The hint changes nothing observable: the plain zero-filling 16-byte cp.async."""
    from ..primitives.ptx_sim import cp_async_cg_16_zfill
    if prefetch not in (64, 128, 256):
        raise ValueError(f"L2 prefetch size must be 64, 128 or 256 bytes, got {prefetch}")
    return cp_async_cg_16_zfill
