"""reference.rnn: against a per-sample scalar-style implementation and finite differences."""
import math

import numpy as np
import pytest

from ncudnn.reference import rnn_backward, rnn_forward, rnn_gate_count

MODES = ["CUDNN_RNN_RELU", "CUDNN_RNN_TANH", "CUDNN_LSTM", "CUDNN_GRU"]


def _weights(rng, mode, L, D, I, H):
    G = rnn_gate_count(mode)
    return [[dict(W=rng.uniform(-0.6, 0.6, size=(G, H, I if l == 0 else D * H)),
                  R=rng.uniform(-0.6, 0.6, size=(G, H, H)), bW=rng.uniform(-0.3, 0.3, size=(G, H)),
                  bR=rng.uniform(-0.3, 0.3, size=(G, H))) for _ in range(D)] for l in range(L)]


def sig(v):
    return 1 / (1 + math.exp(-v))


def step(mode, w, xv, h, c):
    """One sample, one step, written gate by gate with Python floats."""
    H = len(h)

    def pre(g, k, rh=None):
        ax = float(w["W"][g, k] @ xv) + w["bW"][g, k]
        ah = float(w["R"][g, k] @ h) + w["bR"][g, k]
        return ax, ah
    hn, cn = np.zeros(H), c.copy()
    for k in range(H):
        if mode in ("CUDNN_RNN_RELU", "CUDNN_RNN_TANH"):
            a = sum(pre(0, k))
            hn[k] = max(a, 0.0) if mode == "CUDNN_RNN_RELU" else math.tanh(a)
        elif mode == "CUDNN_LSTM":
            i, f, g, o = (sum(pre(gi, k)) for gi in range(4))
            cn[k] = sig(f) * c[k] + sig(i) * math.tanh(g)
            hn[k] = sig(o) * math.tanh(cn[k])
        else:
            r, z = sig(sum(pre(0, k))), sig(sum(pre(1, k)))
            ax, ah = pre(2, k)
            hn[k] = (1 - z) * math.tanh(ax + r * ah) + z * h[k]
    return hn, cn


def slow_rnn(mode, x, hx, cx, weights, lens):
    T, N = x.shape[:2]
    L, D = len(weights), len(weights[0])
    H = hx.shape[2]
    inp = x
    hy, cy = hx.copy(), cx.copy()
    for l in range(L):
        out = np.zeros((T, N, D * H))
        for d in range(D):
            for n in range(N):
                h, c = hx[l * D + d, n].copy(), cx[l * D + d, n].copy()
                steps = range(lens[n]) if d == 0 else range(lens[n] - 1, -1, -1)
                for t in steps:
                    h, c = step(mode, weights[l][d], inp[t, n], h, c)
                    out[t, n, d * H:(d + 1) * H] = h
                hy[l * D + d, n], cy[l * D + d, n] = h, c
        inp = out
    return inp, hy, cy


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("L,D", [(1, 1), (2, 2)])
def test_forward_matches_slow_loop(mode, L, D, rng):
    T, N, I, H = 4, 3, 3, 2
    w = _weights(rng, mode, L, D, I, H)
    x = rng.uniform(-1, 1, size=(T, N, I))
    hx = rng.uniform(-1, 1, size=(L * D, N, H))
    cx = rng.uniform(-1, 1, size=(L * D, N, H))
    lens = [4, 2, 3]
    y, hy, cy = rnn_forward(mode, x, hx, cx, w, seq_lengths=lens)
    wy, why, wcy = slow_rnn(mode, x, hx, cx, w, lens)
    np.testing.assert_allclose(y, wy, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hy, why, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cy, wcy, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", MODES)
def test_backward_finite_difference(mode, rng):
    T, N, I, H, L, D = 3, 2, 2, 2, 2, 2
    w = _weights(rng, mode, L, D, I, H)
    x = rng.uniform(-1, 1, size=(T, N, I))
    hx = rng.uniform(-1, 1, size=(L * D, N, H))
    cx = rng.uniform(-1, 1, size=(L * D, N, H))
    lens = [3, 2]
    y, hy, cy = rnn_forward(mode, x, hx, cx, w, seq_lengths=lens)
    dy, dhy, dcy = (rng.uniform(-1, 1, size=a.shape) for a in (y, hy, cy))
    g = rnn_backward(mode, x, hx, cx, w, dy, dhy, dcy, seq_lengths=lens)

    def loss(xx=x, hh=hx, cc=cx, ww=w):
        a, b, c = rnn_forward(mode, xx, hh, cc, ww, seq_lengths=lens)
        return np.vdot(a, dy) + np.vdot(b, dhy) + (np.vdot(c, dcy) if mode == "CUDNN_LSTM" else 0)

    def fd(arr, f, h=1e-6):
        out = np.zeros_like(arr)
        for i in np.ndindex(*arr.shape):
            old = arr[i]
            arr[i] = old + h
            fp = f()
            arr[i] = old - h
            fm = f()
            arr[i] = old
            out[i] = (fp - fm) / (2 * h)
        return out
    tol = dict(rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g["dx"], fd(x, lambda: loss()), **tol)
    np.testing.assert_allclose(g["dhx"], fd(hx, lambda: loss()), **tol)
    if mode == "CUDNN_LSTM":
        np.testing.assert_allclose(g["dcx"], fd(cx, lambda: loss()), **tol)
    for l in range(L):
        for d in range(D):
            for k in ("W", "R", "bW", "bR"):
                np.testing.assert_allclose(g["dweights"][l][d][k], fd(w[l][d][k], lambda: loss()),
                                           **tol)


def test_lstm_projection_and_cell_clip(rng):
    T, N, I, H, Hp, L, D = 3, 2, 2, 3, 2, 2, 2
    clip = (-0.3, 0.4)
    w = [[dict(W=rng.uniform(-0.8, 0.8, size=(4, H, I if l == 0 else D * Hp)),
               R=rng.uniform(-0.8, 0.8, size=(4, H, Hp)), bW=rng.uniform(-0.5, 0.5, size=(4, H)),
               bR=rng.uniform(-0.5, 0.5, size=(4, H)), P=rng.uniform(-1, 1, size=(Hp, H)))
          for _ in range(D)] for l in range(L)]
    x = rng.uniform(-1, 1, size=(T, N, I))
    hx = rng.uniform(-1, 1, size=(L * D, N, Hp))
    cx = rng.uniform(-1, 1, size=(L * D, N, H))
    y, hy, cy = rnn_forward("CUDNN_LSTM", x, hx, cx, w, cell_clip=clip)
    assert y.shape == (T, N, D * Hp) and hy.shape == (L * D, N, Hp) and cy.shape == (L * D, N, H)
    assert cy.min() >= clip[0] and cy.max() <= clip[1]
    # one step of layer 0, forward direction, by hand (a one-layer run exposes layer 0's output)
    y0 = rnn_forward("CUDNN_LSTM", x, hx[:D], cx[:D], w[:1], cell_clip=clip)[0]
    w0 = w[0][0]
    a = np.einsum("ghi,i->gh", w0["W"], x[0, 0]) + w0["bW"] + np.einsum("ghk,k->gh", w0["R"],
                                                                        hx[0, 0]) + w0["bR"]
    s = 1 / (1 + np.exp(-a))
    c1 = np.clip(s[1] * cx[0, 0] + s[0] * np.tanh(a[2]), *clip)
    np.testing.assert_allclose(y0[0, 0, :Hp], w0["P"] @ (s[3] * np.tanh(c1)), rtol=1e-12)
    dy, dhy, dcy = (rng.uniform(-1, 1, size=t.shape) for t in (y, hy, cy))
    g = rnn_backward("CUDNN_LSTM", x, hx, cx, w, dy, dhy, dcy, cell_clip=clip)

    def loss():
        a, b, c = rnn_forward("CUDNN_LSTM", x, hx, cx, w, cell_clip=clip)
        return np.vdot(a, dy) + np.vdot(b, dhy) + np.vdot(c, dcy)

    def fd(arr, h=1e-6):
        out = np.zeros_like(arr)
        for i in np.ndindex(*arr.shape):
            old = arr[i]
            arr[i] = old + h
            fp = loss()
            arr[i] = old - h
            fm = loss()
            arr[i] = old
            out[i] = (fp - fm) / (2 * h)
        return out
    tol = dict(rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g["dx"], fd(x), **tol)
    np.testing.assert_allclose(g["dhx"], fd(hx), **tol)
    np.testing.assert_allclose(g["dcx"], fd(cx), **tol)
    for k in ("P", "R", "W"):
        np.testing.assert_allclose(g["dweights"][1][1][k], fd(w[1][1][k]), **tol)
        np.testing.assert_allclose(g["dweights"][0][0][k], fd(w[0][0][k]), **tol)
