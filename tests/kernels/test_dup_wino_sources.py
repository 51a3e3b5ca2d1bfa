"""The Winograd transform kernels share their generators (kernels.sandwich / tile_origin / input_window /
input_source): the weight gradient's x transform is the fprop input transform over tiles padded to TPAD,
and both compute B^T d B against a float64 oracle (simulator, fresh inputs, poisoned outputs)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.winograd import kernels as wk
from ncudnn.kernels.winograd import wgrad as ww
from ncudnn.kernels.winograd.transforms import as_float, transform
from ncudnn.testing import assert_close, poison_value


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
def test_dup_wino_input_and_wgrad_x_share_the_transform(rng, m):
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


def test_dup_wino_sources_are_one_generator():
    for r in (2, 4):
        for cfast in (False, True):
            x = ww.x_source(r, cfast)
            assert x == wk.input_source(r, cfast, BT=ww.transform(r).BT, name="wgrad_x", padded=True)
            assert x.replace("wgrad_x", "wino_input").replace(", TPAD", "").replace("TPAD", "T") \
                .replace("live and ", "").replace("    live = t < T\n", "") == wk.input_source(r, cfast)
