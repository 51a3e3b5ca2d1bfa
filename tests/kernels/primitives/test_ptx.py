"""ptx intrinsics run through one-warp kernels (simulator fallbacks in CI, the real PTX on a GPU),
checked against NumPy with the fragment layouts documented in ncudnn/kernels/primitives/ptx.py."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda, float32, uint16, uint32

from ncudnn.kernels.primitives import ptx
from ncudnn.testing import poison_value

KINDS = {  # kind: (mma, K, numpy dtype of the inputs, bits per element)
    "bf16": (ptx.mma_m16n8k16_bf16, 16, ml_dtypes.bfloat16, 16),
    "f16": (ptx.mma_m16n8k16_f16, 16, np.float16, 16),
    "tf32": (ptx.mma_m16n8k8_tf32, 8, np.float32, 32),
    "e4m3": (ptx.mma_m16n8k32_e4m3, 32, ml_dtypes.float8_e4m3fn, 8),
    "e5m2": (ptx.mma_m16n8k32_e5m2, 32, ml_dtypes.float8_e5m2, 8),
}


def _frag_a(A, kind):
    """(32, 4) uint32: lane's A registers per the documented layout (A: uint bit patterns)."""
    out = np.zeros((32, 4), np.uint64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(4):
            row = g + 8 * (i & 1)
            if kind in ("bf16", "f16"):
                c = 2 * t + 8 * (i >> 1)
                out[lane, i] = int(A[row, c]) | int(A[row, c + 1]) << 16
            elif kind == "tf32":
                out[lane, i] = int(A[row, t + 4 * (i >> 1)])
            else:
                c = 4 * t + 16 * (i >> 1)
                out[lane, i] = sum(int(A[row, c + j]) << (8 * j) for j in range(4))
    return out.astype(np.uint32)


def _frag_b(B, kind):
    out = np.zeros((32, 2), np.uint64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(2):
            if kind in ("bf16", "f16"):
                k = 2 * t + 8 * i
                out[lane, i] = int(B[k, g]) | int(B[k + 1, g]) << 16
            elif kind == "tf32":
                out[lane, i] = int(B[t + 4 * i, g])
            else:
                k = 4 * t + 16 * i
                out[lane, i] = sum(int(B[k + j, g]) << (8 * j) for j in range(4))
    return out.astype(np.uint32)


def _mma_kernel(mma):
    @cuda.jit
    def k(fa, fb, c, d):
        lane = cuda.threadIdx.x
        g = lane >> 2
        t = lane & 3
        d0, d1, d2, d3 = mma(fa[lane, 0], fa[lane, 1], fa[lane, 2], fa[lane, 3], fb[lane, 0],
                             fb[lane, 1], c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t],
                             c[g + 8, 2 * t + 1])
        d[g, 2 * t] = d0
        d[g, 2 * t + 1] = d1
        d[g + 8, 2 * t] = d2
        d[g + 8, 2 * t + 1] = d3
    return k


@pytest.mark.parametrize("kind", list(KINDS))
def test_mma_matches_numpy(kind, rng):
    mma, K, dt, bits = KINDS[kind]
    a = rng.standard_normal((16, K)).astype(np.float32).astype(dt)
    b = rng.standard_normal((K, 8)).astype(np.float32).astype(dt)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    ubits = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
    ab, bb = a.view(ubits), b.view(ubits)
    if kind == "tf32":  # hardware reads tf32: keep 10 mantissa bits so the oracle is exact
        ab = ab & np.uint32(0xFFFFE000)
        bb = bb & np.uint32(0xFFFFE000)
        a, b = ab.view(np.float32), bb.view(np.float32)
    d = np.full((16, 8), poison_value(np.float32), np.float32)
    if kind in ("e4m3", "e5m2") and not ptx.SIM and cuda.get_current_device().compute_capability < (8, 9):
        pytest.skip("fp8 mma needs sm_89+")
    _mma_kernel(mma)[1, 32](_frag_a(ab, kind), _frag_b(bb, kind), c, d)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@cuda.jit
def _ldmatrix_kernel(src, out, out_t):
    """src: 32 rows of 8 uint16 (four 8x8 matrices); lane l addresses row l."""
    sm = cuda.shared.array(256, uint16)
    lane = cuda.threadIdx.x
    for i in range(8):
        sm[lane * 8 + i] = src[lane * 8 + i]
    cuda.syncthreads()
    r0, r1, r2, r3 = ptx.ldmatrix_x4(sm, lane * 8)
    out[lane, 0], out[lane, 1], out[lane, 2], out[lane, 3] = r0, r1, r2, r3
    q0, q1, q2, q3 = ptx.ldmatrix_x4_trans(sm, lane * 8)
    out_t[lane, 0], out_t[lane, 1], out_t[lane, 2], out_t[lane, 3] = q0, q1, q2, q3
    s0, s1 = ptx.ldmatrix_x2(sm, (lane % 16) * 8)
    out[lane, 4], out[lane, 5] = s0, s1
    out[lane, 6] = ptx.ldmatrix_x1(sm, (lane % 8) * 8)
    out_t[lane, 4] = ptx.ldmatrix_x1_trans(sm, (lane % 8) * 8)
    p0, p1 = ptx.ldmatrix_x2_trans(sm, (lane % 16) * 8)
    out_t[lane, 5], out_t[lane, 6] = p0, p1


def test_ldmatrix_layout(rng):
    src = rng.integers(0, 1 << 16, 256, dtype=np.uint16)
    mats = src.reshape(4, 8, 8).astype(np.uint32)
    out = np.full((32, 7), 0xDEADBEEF, np.uint32)
    out_t = np.full((32, 7), 0xDEADBEEF, np.uint32)
    _ldmatrix_kernel[1, 32](src, out, out_t)
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    for j in range(4):
        m = mats[j]
        np.testing.assert_array_equal(out[:, j], m[g, 2 * t] | m[g, 2 * t + 1] << 16)
        np.testing.assert_array_equal(out_t[:, j], m[2 * t, g] | m[2 * t + 1, g] << 16)
    np.testing.assert_array_equal(out[:, 4:6].T, [m[g, 2 * t] | m[g, 2 * t + 1] << 16 for m in mats[:2]])
    np.testing.assert_array_equal(out[:, 6], mats[0][g, 2 * t] | mats[0][g, 2 * t + 1] << 16)
    np.testing.assert_array_equal(out_t[:, 4], mats[0][2 * t, g] | mats[0][2 * t + 1, g] << 16)
    np.testing.assert_array_equal(out_t[:, 5:7].T,
                                  [m[2 * t, g] | m[2 * t + 1, g] << 16 for m in mats[:2]])


@cuda.jit
def _tile_kernel(a, b, d):
    """16x16 @ 16x8 bf16 through cp.async -> shared -> ldmatrix (A row-major; B (k, n) row-major,
    read with .trans) -> mma."""
    sa = cuda.shared.array(256, uint16)
    sb = cuda.shared.array(128, uint16)
    lane = cuda.threadIdx.x
    ptx.cp_async_cg_16(sa, lane * 8, a, lane * 8)             # A: 32 chunks of 16 bytes
    if lane < 16:                                             # B: one 16-byte k row per lane
        ptx.cp_async_ca_8(sb, lane * 8, b, lane * 8)
        ptx.cp_async_ca_4(sb, lane * 8 + 4, b, lane * 8 + 4)
        ptx.cp_async_ca_4(sb, lane * 8 + 6, b, lane * 8 + 6)
    ptx.cp_async_commit()
    ptx.cp_async_wait_group(0)
    cuda.syncthreads()
    r = lane % 16
    a0, a1, a2, a3 = ptx.ldmatrix_x4(sa, r * 16 + (lane // 16) * 8)
    b0, b1 = ptx.ldmatrix_x2_trans(sb, r * 8)
    z = float32(0.0)
    d0, d1, d2, d3 = ptx.mma_m16n8k16_bf16(a0, a1, a2, a3, b0, b1, z, z, z, z)
    g = lane >> 2
    t = lane & 3
    d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t], d[g + 8, 2 * t + 1] = d0, d1, d2, d3


def test_cp_async_ldmatrix_mma_tile(rng):
    a = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((16, 8)).astype(ml_dtypes.bfloat16)
    d = np.full((16, 8), poison_value(np.float32), np.float32)
    _tile_kernel[1, 32](a.view(np.uint16).reshape(-1), b.view(np.uint16).reshape(-1), d)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@cuda.jit
def _zfill_kernel(src, out):
    sm = cuda.shared.array(256, uint32)
    lane = cuda.threadIdx.x
    for i in range(4):
        sm[lane * 4 + i] = uint32(0xFFFFFFFF)
    cuda.syncthreads()
    ptx.cp_async_cg_16_zfill(sm, lane * 4, src, lane * 4, (lane % 5) * 4)
    ptx.cp_async_commit()
    ptx.cp_async_wait_all()
    cuda.syncthreads()
    for i in range(4):
        out[lane * 4 + i] = sm[lane * 4 + i]


def test_cp_async_zfill(rng):
    src = rng.integers(1, 1 << 32, 128, dtype=np.uint32)
    out = np.zeros(128, np.uint32)
    _zfill_kernel[1, 32](src, out)
    ref = src.reshape(32, 4).copy()
    for lane in range(32):
        ref[lane, lane % 5:] = 0
    np.testing.assert_array_equal(out.reshape(32, 4), ref)


@cuda.jit
def _pack_kernel(x, out_bf, out_f16, out_tf32, out_e4, out_e5, back):
    i = cuda.grid(1)
    if i < x.shape[0] // 4:
        x0, x1, x2, x3 = x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]
        u = ptx.pack_bf16x2(x0, x1)
        h = ptx.pack_f16x2(x2, x3)
        out_bf[i] = u
        out_f16[i] = h
        out_tf32[i] = ptx.f32_to_tf32(x0)
        out_e4[i] = ptx.pack_e4m3x4(x0, x1, x2, x3)
        out_e5[i] = ptx.pack_e5m2x4(x0, x1, x2, x3)
        back[4 * i], back[4 * i + 1] = ptx.unpack_bf16x2(u)
        back[4 * i + 2], back[4 * i + 3] = ptx.unpack_f16x2(h)


def test_packing_rounds_to_nearest_even(rng):
    n = 64
    x = (rng.standard_normal(4 * n) * 3).astype(np.float32)
    x[:4] = [1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -11, 1000.0]   # ties and fp8 saturation
    outs = [np.zeros(n, np.uint32) for _ in range(5)]
    back = np.full(4 * n, poison_value(np.float32), np.float32)
    fp8 = not ptx.SIM and cuda.get_current_device().compute_capability < (8, 9)
    if fp8:
        pytest.skip("fp8 conversions need sm_89+")
    _pack_kernel[1, 64](x, *outs, back)
    q = x.reshape(n, 4)
    bf = q.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)
    f16 = q.astype(np.float16).view(np.uint16).astype(np.uint32)
    np.testing.assert_array_equal(outs[0], bf[:, 0] | bf[:, 1] << 16)
    np.testing.assert_array_equal(outs[1], f16[:, 2] | f16[:, 3] << 16)
    u = q[:, 0].view(np.uint32).astype(np.uint64)
    np.testing.assert_array_equal(outs[2] & np.uint32(0xFFFFE000), ((u + 0x1000) & 0xFFFFE000).astype(np.uint32))
    for out, dt in ((outs[3], ml_dtypes.float8_e4m3fn), (outs[4], ml_dtypes.float8_e5m2)):
        big = float(ml_dtypes.finfo(dt).max)
        e = np.clip(q, -big, big).astype(dt).view(np.uint8).astype(np.uint32)
        np.testing.assert_array_equal(out, e[:, 0] | e[:, 1] << 8 | e[:, 2] << 16 | e[:, 3] << 24)
    ref_back = np.stack([q[:, 0].astype(ml_dtypes.bfloat16).astype(np.float32),
                         q[:, 1].astype(ml_dtypes.bfloat16).astype(np.float32),
                         q[:, 2].astype(np.float16).astype(np.float32),
                         q[:, 3].astype(np.float16).astype(np.float32)], 1).reshape(-1)
    np.testing.assert_array_equal(back, ref_back)
