"""Winograd wgrad kernels (kernels/winograd/wgrad.py) launched by wgrad_launch.run_wgrad against the
float64 oracle (reference.conv_wgrad) at tiny odd shapes in the simulator: both tiles, padding 0 / 1 /
2, NCHW / NHWC, split reductions, beta blending, CONVOLUTION mode; the F(3, r) matrices exact; the
split choice; the kernels compile for sm_90."""
from fractions import Fraction

import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.gemm.config import GemmConfig
from ncudnn.kernels.winograd import wgrad as ww
from ncudnn.kernels.winograd.wgrad_launch import WgradShape, run_wgrad
from ncudnn.reference import conv as ref
from ncudnn.testing import poison_value, rel_err, size
from ncudnn.kernels.winograd import kernels as wk
from ncudnn.testing import assert_close
from ncudnn.kernels.winograd.transforms import as_float, transform

#: a few-thread GEMM tile for the simulator; the GPU run takes the engine's 128x128 tile
SIM_CFG = GemmConfig(BLOCK_M=8, BLOCK_N=8, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0, UNROLL_K=1)
GPU_CFG = GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=8, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4)
#: max relative error (L2) of fp32 I/O per tile (docs/winograd.md)
TOL = {2: 5e-6, 4: 2e-5}


def _strides(dims, nhwc):
    n, c, h, w = dims
    return (h * w * c, 1, w * c, c) if nhwc else (c * h * w, h * w, w, 1)


def _dev(a, nhwc):
    return cuda.to_device(np.ascontiguousarray(a.transpose(0, 2, 3, 1) if nhwc else a).reshape(-1))


def _run(rng, N, C, H, W, K, pad, r, nhwc, splits=None, beta=0.0, flip=False, cfg=None):
    cfg = cfg or size(SIM_CFG, GPU_CFG)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    P, Q = H + 2 * pad - 2, W + 2 * pad - 2
    dy = rng.standard_normal((N, K, P, Q)).astype(np.float32)
    w_shape = (K, C, 3, 3)
    sh = WgradShape(N, C, H, W, K, P, Q, (pad, pad), _strides(x.shape, nhwc), _strides(dy.shape, nhwc),
                    _strides(w_shape, nhwc), r, cfg, cfast=nhwc, flip=flip, splits=splits)
    if beta:
        dw0 = rng.standard_normal(w_shape).astype(np.float32)
    else:
        dw0 = np.full(w_shape, poison_value(np.float32), np.float32)
    d_dw = _dev(dw0, nhwc)
    ws = cuda.to_device(np.full(sh.workspace_elems, np.nan, np.float32))
    run_wgrad(sh, _dev(x, nhwc), _dev(dy, nhwc), d_dw, ws, alpha=1.5, beta=beta)
    out = d_dw.copy_to_host().reshape((K, 3, 3, C) if nhwc else w_shape)
    if nhwc:
        out = out.transpose(0, 3, 1, 2)
    want = 1.5 * ref.conv_wgrad(x, dy, w_shape, pre_pad=pad, post_pad=pad, cross_correlation=not flip)
    if beta:
        want = want + beta * dw0.astype(np.float64)
    return rel_err(out, want), sh


@pytest.mark.parametrize("r", [2, 4])
@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("pad", [0, 1, 2])
def test_wgrad_oracle(rng, r, nhwc, pad):
    dims = size((2, 3, 5, 6, 5), (8, 64, 15, 13, 48))
    err, _ = _run(rng, *dims, pad, r, nhwc)
    assert err < TOL[r], err


@pytest.mark.parametrize("r", [2, 4])
def test_wgrad_split_beta_flip(rng, r):
    err, sh = _run(rng, 3, 2, 7, 5, 3, 1, r, False, splits=2, beta=0.5, flip=True)
    assert sh.S == 2 and sh.TPAD >= sh.T
    assert err < TOL[r], err


@pytest.mark.parametrize("r,flip,beta", [(2, True, 0.5), (4, False, 0.0)])
def test_wgrad_packed_out_multiblock(rng, r, flip, beta):
    """The packed output kernel (KCRS dw through shared memory, coalesced stores) on K x C = 306 filters
    = two blocks of 256, the second partial, S = 2 splits: dw = alpha A^T (sum_s M_s) A + beta dw
    (float64 from the exact A^T), flipped for CONVOLUTION mode."""
    K_, C_, S_ = 17, 18, 2
    a = r + 2
    AT = np.array([[float(v) for v in row] for row in ww.transform(r).AT])
    mb = rng.standard_normal((a * a, S_, K_, C_)).astype(np.float32)
    dw0 = rng.standard_normal((K_, C_, 3, 3)).astype(np.float32) if beta else \
        np.full((K_, C_, 3, 3), poison_value(np.float32), np.float32)
    strides = (9 * C_, 9, 3, 1)
    assert ww.packed_dw(strides, C_) and K_ * C_ > ww.THREADS
    d_dw = cuda.to_device(dw0.reshape(-1))
    kern = ww.make_out(r, "float32", packed=True)
    kern[ww.blocks(K_ * C_), ww.THREADS](cuda.to_device(mb.reshape(-1)), d_dw, K_, C_, S_,
                                         *ww.dw_addressing(strides, flip), np.float32(1.5), np.float32(beta))
    msum = mb.astype(np.float64).sum(axis=1).reshape(a, a, K_, C_)
    want = 1.5 * np.einsum("ix,xykc,jy->kcij", AT, msum, AT)
    if flip:
        want = want[:, :, ::-1, ::-1]
    if beta:
        want = want + beta * dw0.astype(np.float64)
    err = rel_err(d_dw.copy_to_host().reshape(K_, C_, 3, 3), want)
    assert err < 1e-6, err


def test_packed_dw_detects_kcrs_only():
    C = 5
    assert ww.packed_dw((9 * C, 9, 3, 1), C) and ww.packed_dw((9 * C, 9, 1, 3), C)
    assert not ww.packed_dw((9 * C, 1, 3 * C, C), C)          # KRSC (already coalesced)
    assert not ww.packed_dw((10 * C, 10, 3, 1), C)            # padded filters
    assert not ww.packed_dw((9, 9 * 7, 3, 1), C)              # CKRS


@pytest.mark.parametrize("r", [2, 4])
def test_transform_exact(rng, r):
    """A^T [(G g G^T) * (B^T d B)] A is the 3x3 correlation of an alpha x alpha d with an r x r g."""
    t = ww.transform(r)
    a = t.alpha
    mat = lambda p, q: [[sum(x * y for x, y in zip(row, col)) for col in zip(*q)] for row in p]  # noqa: E731
    tr = lambda p: [list(v) for v in zip(*p)]  # noqa: E731
    d = [[Fraction(int(v), 5) for v in row] for row in rng.integers(-40, 40, (a, a))]
    g = [[Fraction(int(v), 3) for v in row] for row in rng.integers(-40, 40, (r, r))]
    U, V = mat(mat(t.G, g), tr(t.G)), mat(mat(t.BT, d), tr(t.BT))
    Y = mat(mat(t.AT, [[U[i][j] * V[i][j] for j in range(a)] for i in range(a)]), tr(t.AT))
    for i in range(3):
        for j in range(3):
            assert Y[i][j] == sum(g[p][q] * d[p + i][q + j] for p in range(r) for q in range(r))


def test_splits_fill_the_machine():
    # ResNet-50 C256 14x14, F(3x3, 4x4): 144 GEMM blocks; with a small fixed cost per block and free
    # output passes, splitting fills 264 slots better
    s, tc = ww.splits(256, 256, 512, 36, 128, 128, 264, fixed_k=32, iter_k=0)
    assert s > 1 and tc % ww.CHUNK == 0 and s * tc >= 512
    # a reduction too short to split stays whole
    assert ww.splits(256, 256, 100, 36, 128, 128, 264) == (1, 112)


def test_splits_pay_for_output_passes():
    """Each split is one more latency-bound pass of the output kernel over M (OUT_ITER_K) and each
    block a fixed FIXED_K: C128 28x28 F(3x3, 4x4) (T = 1568) splits less than by waves alone, and an M
    past the L2 (doubled pass cost) splits less again."""
    free = ww.splits(128, 128, 1568, 36, 128, 128, 132, fixed_k=32, iter_k=0)
    paid = ww.splits(128, 128, 1568, 36, 128, 128, 132)
    assert paid[0] < free[0] and paid[0] * paid[1] >= 1568 and paid[1] % ww.CHUNK == 0
    assert ww.OUT_ITER_K[36] > ww.OUT_ITER_K[16] > 0
    # C128 -> K256 56x56 F(3x3, 4x4): M of 36 x S x 256 x 128 floats; a small L2 makes splits dearer
    roomy = ww.splits(256, 128, 6272, 36, 128, 128, 132, l2_bytes=1 << 40)
    tight = ww.splits(256, 128, 6272, 36, 128, 128, 132, l2_bytes=1 << 20)
    assert tight[0] < roomy[0] and tight[0] * tight[1] >= 6272


@pytest.mark.slow
def test_compile_sm90():
    """The transforms (the output kernel also KCRS-packed) compile for sm_90 without spills or local
    memory (subprocess, no simulator)."""
    from ncudnn.kernels.runtime import compile_check
    from ncudnn.kernels.winograd import wgrad_cases  # noqa: F401  (registers)

    names = [n for n in compile_check.registered_cases() if n.startswith("wgrad_f3r")]
    assert len(names) == 12
    res = compile_check.run_compile_check(names, jobs=2, timeout=600)
    bad = [r.summary() for r in res if not r.ok]
    assert not bad, "\n".join(bad)
    assert all(r.spill_stores == 0 and r.stack_frame == 0 for r in res if r.cubin_info)


@pytest.mark.slow
def test_gemm_layouts_compile_sm90():
    """The batched GEMM in the wgrad layouts compiles for sm_90: the engine's 128x128x16 tile without
    spills (the fast-mainloop 128x128x8 spills 8-12 bytes at its 128-register cap: reported only)."""
    from ncudnn.kernels.runtime import compile_check
    from ncudnn.kernels.winograd import wgrad_cases  # noqa: F401  (registers)

    names = [n for n in compile_check.registered_cases() if n.startswith("wgrad_gemm_")]
    assert len(names) == 4
    res = compile_check.run_compile_check(names, jobs=2, timeout=900)
    print("\n".join(r.summary() for r in res))
    bad = [r.summary() for r in res if not r.ok and "fast" not in r.name]
    assert not bad, "\n".join(bad)
    assert all(r.spill_stores == 0 for r in res if r.cubin_info and "fast" not in r.name)


# the weight gradient's x transform is the fprop input transform over tiles padded to TPAD: both B^T d B
def _oracle(x, m, pad, TH, TW, BT):
    """V[xi, c, t] of every tile (float64)."""
    N, C, H, W = x.shape
    a = BT.shape[0]
    xp = np.zeros((N, C, H + 2 * pad + a + m * TH, W + 2 * pad + a + m * TW))
    xp[:, :, pad:pad + H, pad:pad + W] = x
    out = np.zeros((a * a, C, N * TH * TW))
    for n in range(N):
        for th in range(TH):
            for tw in range(TW):
                d = xp[:, :, th * m:th * m + a, tw * m:tw * m + a][n]          # C x a x a
                v = np.einsum("ij,cjk,lk->cil", BT, d, BT)
                out[:, :, (n * TH + th) * TW + tw] = v.reshape(len(v), -1).T
    return out


@pytest.mark.parametrize("m", [2, 4])
def test_wgrad_x_transform_is_the_fprop_input_transform(rng, m):
    N, C, H, W, pad = 2, 3, 5, 6, 1
    TH, TW = -(-H // m), -(-W // m)
    T = N * TH * TW
    TPAD = T + 5
    BT = as_float(transform(m).BT)
    assert np.array_equal(as_float(ww.transform(m).BT), BT)     # F(3, m) and F(m, 3) share B^T
    x = rng.uniform(-1, 1, (N, C, H, W)).astype(np.float32)
    a2 = (m + 2) ** 2
    want = _oracle(x.astype(np.float64), m, pad, TH, TW, BT)
    st = (C * H * W, H * W, W, 1)
    v = cuda.to_device(np.full(a2 * C * T, poison_value(np.float32), np.float32))
    wk.make_input(m)[wk.blocks(C * T), wk.THREADS](cuda.to_device(x.ravel()), v, C, H, W, TH, TW, T, pad, pad, *st)
    assert_close(v.copy_to_host().reshape(a2, C, T), want, "float32")
    vp = cuda.to_device(np.full(a2 * C * TPAD, poison_value(np.float32), np.float32))
    ww.make_x(m)[wk.blocks(C * TPAD), wk.THREADS](cuda.to_device(x.ravel()), vp, C, H, W, TH, TW, T, TPAD, pad,
                                                  pad, *st)
    got = vp.copy_to_host().reshape(a2, C, TPAD)
    assert_close(got[:, :, :T], want, "float32")
    assert not got[:, :, T:].any()                               # padded tiles are zeros
