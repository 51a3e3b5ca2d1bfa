"""CUDA-simulator fallbacks of the tensor-core / async-copy intrinsics of :mod:`ncudnn.kernels.primitives.ptx`.

The one place these fallbacks live (the warp shuffles' fallbacks are in ``warp.py``).
``ptx.py`` binds its public names to these functions when ``NUMBA_ENABLE_CUDASIM`` is set; the
fragment layouts are the ones documented there (PTX ISA), so a kernel written against ``ptx``
computes the same thing here as on a GPU.

Warp-collective instructions (``mma.sync``, ``ldmatrix``) need every lane's operands. The simulator
runs each CUDA thread of a block as a Python thread, concurrently, so a collective is a per-warp
rendezvous: each lane posts its operands in a slot, a ``threading.Barrier`` whose *action* (run by
one thread once all lanes of the warp arrived) computes every lane's result, and each lane takes
its own. Inputs and results are separate lists, so one barrier per collective suffices: the next
action cannot run before every lane has read its previous result. All 32 lanes must call (no
divergence), as on the hardware; a lane that never arrives fails the kernel after a timeout.

cp.async copies immediately (a valid schedule: the data is there by ``wait_group``); commit / wait
are no-ops. Products in ``mma`` are exact and summed in float64, then rounded to float32 (the
hardware's internal precision is at least as good as float32 accumulation of exact products).
"""
import threading

import ml_dtypes
import numpy as np

#: a lane that never reaches a collective fails the launch after this long instead of hanging it (long enough for
#: 256 simulated threads doing per-element Python work, e.g. Philox dropout, between two mma rendezvous)
_BARRIER_TIMEOUT_S = 300.0
_lock = threading.Lock()


class _Warp:
    def __init__(self, n):
        self.slots = [None] * n
        self.results = [None] * n
        self.barrier = threading.Barrier(n, action=self._run, timeout=_BARRIER_TIMEOUT_S)

    def _run(self):
        fn = self.slots[0][0]
        if any(s[0] is not fn for s in self.slots):
            raise RuntimeError("warp-collective PTX fallback: lanes of one warp called different "
                               "collectives (divergence)")
        self.results = fn([s[1] for s in self.slots])


def _collective(fn, payload):
    """Post ``payload`` for this lane; ``fn(payloads of all lanes) -> results`` runs once per warp."""
    t = threading.current_thread()
    mgr = t._manager
    warp, lane = divmod(t.thread_id, 32)
    with _lock:
        warps = mgr.__dict__.setdefault("_ncudnn_ptx_warps", {})
        w = warps.get(warp)
        if w is None:
            nthreads = int(np.prod(mgr._block_dim))
            n = min(32, nthreads - warp * 32)
            if n != 32:
                raise RuntimeError("warp-collective PTX needs whole warps (block size a multiple of 32)")
            w = warps[warp] = _Warp(n)
    w.slots[lane] = (fn, payload)
    w.barrier.wait()
    return w.results[lane]


def _bytes(arr):
    """A flat uint8 view of a simulator array (shared: NumPy; global: FakeCUDAArray)."""
    a = getattr(arr, "_ary", arr)
    return np.asarray(a).reshape(-1).view(np.uint8)


def _itemsize(arr):
    return getattr(arr, "_ary", arr).dtype.itemsize


# ------------------------------------------------------------------------------------------ mma

def _halves(u):
    u = int(u) & 0xFFFFFFFF
    return u & 0xFFFF, u >> 16


def _bytes4(u):
    u = int(u) & 0xFFFFFFFF
    return [(u >> (8 * i)) & 0xFF for i in range(4)]


def _decode(bits, kind):
    b = np.asarray(bits)
    if kind == "bf16":
        return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "f16":
        return b.astype(np.uint16).view(np.float16).astype(np.float64)
    if kind == "tf32":
        return (b.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    dt = ml_dtypes.float8_e4m3fn if kind == "e4m3" else ml_dtypes.float8_e5m2
    return b.astype(np.uint8).view(dt).astype(np.float64)


def _gather(payloads, kind, K):
    """Full A (16xK), B (Kx8) and C (16x8) from the 32 lanes' fragments (PTX ISA layouts)."""
    A = np.zeros((16, K), np.uint32)
    B = np.zeros((K, 8), np.uint32)
    C = np.zeros((16, 8), np.float64)
    for lane, (a, b, c) in enumerate(payloads):
        g, t = lane >> 2, lane & 3
        for i in range(4):
            row = g + 8 * (i & 1)
            if kind in ("bf16", "f16"):
                col = 2 * t + 8 * (i >> 1)
                A[row, col], A[row, col + 1] = _halves(a[i])
            elif kind == "tf32":
                A[row, t + 4 * (i >> 1)] = int(a[i]) & 0xFFFFFFFF
            else:
                col = 4 * t + 16 * (i >> 1)
                A[row, col:col + 4] = _bytes4(a[i])
        for i in range(2):
            if kind in ("bf16", "f16"):
                k = 2 * t + 8 * i
                B[k, g], B[k + 1, g] = _halves(b[i])
            elif kind == "tf32":
                B[t + 4 * i, g] = int(b[i]) & 0xFFFFFFFF
            else:
                k = 4 * t + 16 * i
                B[k:k + 4, g] = _bytes4(b[i])
        for i in range(4):
            C[g + 8 * (i >> 1), 2 * t + (i & 1)] = float(c[i])
    return _decode(A, kind), _decode(B, kind), C


def _mma_all(kind, K):
    def run(payloads):
        A, B, C = _gather(payloads, kind, K)
        D = (A @ B + C).astype(np.float32)
        out = []
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            out.append((D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]))
        return out
    return run


def _make_mma(kind, K):
    run = _mma_all(kind, K)

    def mma(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _collective(run, ((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3)))
    mma.__name__ = f"mma_{kind}"
    return mma


mma_m16n8k16_bf16 = _make_mma("bf16", 16)
mma_m16n8k16_f16 = _make_mma("f16", 16)
mma_m16n8k8_tf32 = _make_mma("tf32", 8)
mma_m16n8k32_e4m3 = _make_mma("e4m3", 32)
mma_m16n8k32_e5m2 = _make_mma("e5m2", 32)


# ------------------------------------------------------------------------------------- ldmatrix

def _row(arr, off):
    """The 8 16-bit values of the 16-byte row at element ``off`` of ``arr``."""
    start = int(off) * _itemsize(arr)
    if start % 16:
        raise ValueError(f"ldmatrix: row address {start} bytes into the array is not 16-byte aligned")
    return _bytes(arr)[start:start + 16].view(np.uint16)


def _make_ldmatrix(num, trans):
    def run(payloads):
        mats = []
        for j in range(num):
            mats.append(np.stack([_row(*payloads[8 * j + r]) for r in range(8)]).astype(np.uint32))
        out = []
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            regs = []
            for m in mats:
                lo, hi = (m[2 * t, g], m[2 * t + 1, g]) if trans else (m[g, 2 * t], m[g, 2 * t + 1])
                regs.append(int(lo) | (int(hi) << 16))
            out.append(regs[0] if num == 1 else tuple(regs))
        return out

    def ldmatrix(arr, off):
        return _collective(run, (arr, off))
    ldmatrix.__name__ = f"ldmatrix_x{num}{'_trans' if trans else ''}"
    return ldmatrix


ldmatrix_x1 = _make_ldmatrix(1, False)
ldmatrix_x2 = _make_ldmatrix(2, False)
ldmatrix_x4 = _make_ldmatrix(4, False)
ldmatrix_x1_trans = _make_ldmatrix(1, True)
ldmatrix_x2_trans = _make_ldmatrix(2, True)
ldmatrix_x4_trans = _make_ldmatrix(4, True)


def _elem(arr, saddr):
    """Element offset of the byte address ``saddr`` (``cvta_shared(arr, 0)`` is 0 here)."""
    b = int(saddr)
    if b % _itemsize(arr):
        raise ValueError(f"shared address {b} is not a multiple of the element size of the array")
    return b // _itemsize(arr)


def ldmatrix_x4_a(arr, saddr):
    return ldmatrix_x4(arr, _elem(arr, saddr))


def ldmatrix_x4_trans_a(arr, saddr):
    return ldmatrix_x4_trans(arr, _elem(arr, saddr))


# ------------------------------------------------------------------------------------- cp.async

def _copy(dst, doff, src, soff, nbytes, size):
    d0 = int(doff) * _itemsize(dst)
    s0 = int(soff) * _itemsize(src)
    if d0 % size or s0 % size:
        raise ValueError(f"cp.async of {size} bytes needs {size}-byte aligned addresses "
                         f"(dst {d0}, src {s0} bytes into the arrays)")
    d = _bytes(dst)
    d[d0:d0 + size] = 0
    if nbytes:
        d[d0:d0 + nbytes] = _bytes(src)[s0:s0 + nbytes]


def cp_async_ca_4(dst, doff, src, soff):
    _copy(dst, doff, src, soff, 4, 4)


def cp_async_ca_8(dst, doff, src, soff):
    _copy(dst, doff, src, soff, 8, 8)


def cp_async_ca_16(dst, doff, src, soff):
    _copy(dst, doff, src, soff, 16, 16)


def cp_async_cg_16(dst, doff, src, soff):
    _copy(dst, doff, src, soff, 16, 16)


def cp_async_cg_16_zfill(dst, doff, src, soff, nbytes):
    n = int(nbytes)
    if not 0 <= n <= 16:
        raise ValueError(f"cp.async src-size {n} outside 0..16")
    _copy(dst, doff, src, soff, n, 16)


def cp_async_cg_16_zfill_a(dst, saddr, src, soff, nbytes):
    cp_async_cg_16_zfill(dst, _elem(dst, saddr), src, soff, nbytes)


def cp_async_commit():
    pass


def cp_async_wait_group(n):
    pass


def cp_async_wait_all():
    pass


def atom_add_release_gpu(arr, i, v):
    """``atomicAdd`` on a uint32 element (the simulator's threads are Python threads: under the lock)."""
    with _lock:
        old = int(arr[i])
        arr[i] = (old + int(v)) & 0xFFFFFFFF
    return np.uint32(old)


def ld_acquire_gpu(arr, i):
    with _lock:
        return np.uint32(arr[i])


def cvta_shared(arr, off):
    """No shared window in the simulator: the byte offset of ``arr[off]`` in its array."""
    return int(off) * _itemsize(arr)


# -------------------------------------------------------------------------- packing / unpacking

def _round_bits(x, dt, width):
    v = np.array(x, dtype=np.float32).astype(dt)
    return int(v.view(np.uint16 if width == 16 else np.uint8))


def pack_bf16x2(lo, hi):
    return _round_bits(lo, ml_dtypes.bfloat16, 16) | (_round_bits(hi, ml_dtypes.bfloat16, 16) << 16)


def pack_f16x2(lo, hi):
    return _round_bits(lo, np.float16, 16) | (_round_bits(hi, np.float16, 16) << 16)


def unpack_bf16x2(u):
    lo, hi = _halves(u)
    return (np.uint32(lo << 16).view(np.float32), np.uint32(hi << 16).view(np.float32))


def unpack_f16x2(u):
    lo, hi = _halves(u)
    return (np.float32(np.uint16(lo).view(np.float16)), np.float32(np.uint16(hi).view(np.float16)))


def ex2_approx(x):
    """ex2.approx.ftz.f32: 2^x in float32 (exact here), subnormal results flushed to +0, 2^-inf = 0."""
    with np.errstate(over="ignore", under="ignore"):
        y = np.exp2(np.float32(x))
    return np.float32(0.0) if np.isfinite(y) and abs(y) < np.finfo(np.float32).tiny else y


def rcp_approx(x):
    """rcp.approx.ftz.f32: 1 / x in float32 (exact here), a subnormal x flushed to a signed zero first."""
    x = np.float32(x)
    if x != 0 and np.isfinite(x) and abs(x) < np.finfo(np.float32).tiny:
        x = np.float32(np.copysign(0.0, x))
    with np.errstate(divide="ignore"):
        return np.float32(np.float32(1.0) / x)


def f32_to_tf32(x):
    """cvt.rna.tf32.f32: round to 10 mantissa bits, ties away from zero; NaN / inf kept."""
    u = int(np.array(x, dtype=np.float32).view(np.uint32))
    if (u & 0x7F800000) == 0x7F800000:
        return u
    return ((u + 0x1000) & 0xFFFFE000) & 0xFFFFFFFF


def _sat_fp8(x, dt):
    f = np.float32(x)
    if np.isnan(f):
        return int(np.array(f).astype(dt).view(np.uint8))
    big = float(ml_dtypes.finfo(dt).max)
    return _round_bits(np.clip(f, -big, big), dt, 8)


def pack_e4m3x4(x0, x1, x2, x3):
    b = [_sat_fp8(x, ml_dtypes.float8_e4m3fn) for x in (x0, x1, x2, x3)]
    return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)


def pack_e5m2x4(x0, x1, x2, x3):
    b = [_sat_fp8(x, ml_dtypes.float8_e5m2) for x in (x0, x1, x2, x3)]
    return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
