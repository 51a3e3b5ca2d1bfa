"""reference.mha (legacy multi-head attention) against per-query loops and finite differences."""
import math

import numpy as np
import pytest

from ncudnn.reference import mha_backward, mha_forward


def _setup(rng, biases):
    B, Tq, Tk, Cq, Ck, Cv, Hn, Pq, Pv, Co = 2, 3, 4, 3, 2, 3, 2, 2, 3, 3
    w = dict(Wq=rng.uniform(-1, 1, size=(Hn, Pq, Cq)), Wk=rng.uniform(-1, 1, size=(Hn, Pq, Ck)),
             Wv=rng.uniform(-1, 1, size=(Hn, Pv, Cv)), Wo=rng.uniform(-1, 1, size=(Hn, Co, Pv)))
    if biases:
        w.update(bq=rng.uniform(-1, 1, size=(Hn, Pq)), bk=rng.uniform(-1, 1, size=(Hn, Pq)),
                 bv=rng.uniform(-1, 1, size=(Hn, Pv)), bo=rng.uniform(-1, 1, size=(Co,)))
    q = rng.uniform(-1, 1, size=(B, Tq, Cq))
    k = rng.uniform(-1, 1, size=(B, Tk, Ck))
    v = rng.uniform(-1, 1, size=(B, Tk, Cv))
    return q, k, v, w


def loop_mha(q, k, v, w, sm, lq, lk, lo, hi):
    B, Tq = q.shape[:2]
    Hn, Co = w["Wo"].shape[:2]
    out = np.zeros((B, Tq, Co))
    for b, i in np.ndindex(B, Tq):
        keys = [j for j in range(lo[i], hi[i]) if j < lk[b]]
        if i >= lq[b] or not keys:
            continue
        acc = np.array(w.get("bo", np.zeros(Co)), dtype=float)
        for h in range(Hn):
            Qi = w["Wq"][h] @ q[b, i] + w.get("bq", np.zeros((Hn, 1)))[h]
            sc = {}
            for j in keys:
                Kj = w["Wk"][h] @ k[b, j] + w.get("bk", np.zeros((Hn, 1)))[h]
                sc[j] = sm * float(Qi @ Kj)
            mx = max(sc.values())
            den = sum(math.exp(s - mx) for s in sc.values())
            hv = sum(math.exp(sc[j] - mx) / den * (w["Wv"][h] @ v[b, j]
                                                    + w.get("bv", np.zeros((Hn, 1)))[h])
                     for j in keys)
            acc = acc + w["Wo"][h] @ hv
        out[b, i] = acc
    return out


@pytest.mark.parametrize("biases", [False, True])
def test_forward_matches_loop(biases, rng):
    q, k, v, w = _setup(rng, biases)
    lq, lk, lo, hi = [3, 2], [4, 3], [0, 0, 1], [2, 3, 4]
    out = mha_forward(q, k, v, w, 0.7, seq_len_q=lq, seq_len_kv=lk, lo_win=lo, hi_win=hi)
    np.testing.assert_allclose(out, loop_mha(q, k, v, w, 0.7, lq, lk, lo, hi), rtol=1e-12,
                               atol=1e-14)
    res = mha_forward(q, k, v, w, 0.7, residual=q)
    np.testing.assert_allclose(res - q, mha_forward(q, k, v, w, 0.7), rtol=1e-12, atol=1e-14)


def _fd(f, a, h=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(*a.shape):
        old = a[i]
        a[i] = old + h
        fp = f()
        a[i] = old - h
        fm = f()
        a[i] = old
        g[i] = (fp - fm) / (2 * h)
    return g


@pytest.mark.parametrize("biases", [False, True])
def test_backward_finite_difference(biases, rng):
    q, k, v, w = _setup(rng, biases)
    kw = dict(seq_len_q=[3, 2], seq_len_kv=[4, 3], lo_win=[0, 0, 1], hi_win=[2, 4, 4])
    dout = rng.uniform(-1, 1, size=(2, 3, 3))
    g = mha_backward(q, k, v, w, 0.6, dout, residual=True, **kw)

    def loss():
        return np.vdot(mha_forward(q, k, v, w, 0.6, residual=q, **kw), dout)
    tol = dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g["dq"], _fd(loss, q), **tol)
    np.testing.assert_allclose(g["dk"], _fd(loss, k), **tol)
    np.testing.assert_allclose(g["dv"], _fd(loss, v), **tol)
    for name in w:
        np.testing.assert_allclose(g["dweights"][name], _fd(loss, w[name]), **tol)
    assert set(g["dweights"]) == set(w)
