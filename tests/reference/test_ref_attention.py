"""reference.attention: forward against a per-row scalar loop, backward by finite differences."""
import math

import numpy as np
import pytest

from ncudnn.reference import alibi_slopes, sdpa_backward, sdpa_forward


def loop_attention(q, k, v, scale, causal, align, bias=None, mask=None, dscale=1.0, seq_kv=None,
                   seq_q=None, slopes=None):
    """One query row at a time, plain Python softmax; kv head = h // (H // Hk)."""
    B, H, Sq, _ = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    o = np.zeros((B, H, Sq, v.shape[-1]))
    lse = np.zeros((B, H, Sq, 1))
    for b, h, i in np.ndindex(B, H, Sq):
        hk = h // (H // Hk)
        lk = Sk if seq_kv is None else seq_kv[b]
        lq = Sq if seq_q is None else seq_q[b]
        if i >= lq:
            continue
        scores = {}
        for j in range(lk):
            if causal and j > (i if align == "top_left" else i + lk - lq):
                continue
            sc = scale * float(np.dot(q[b, h, i], k[b, hk, j]))
            if bias is not None:
                sc += float(np.broadcast_to(bias, (B, H, Sq, Sk))[b, h, i, j])
            if slopes is not None:
                sc += slopes[h] * (j - i)
            scores[j] = sc
        m = max(scores.values())
        tot = sum(math.exp(s - m) for s in scores.values())
        lse[b, h, i, 0] = m + math.log(tot)
        for j, s in scores.items():
            pj = math.exp(s - m) / tot
            if mask is not None:
                pj *= float(np.broadcast_to(mask, (B, H, Sq, Sk))[b, h, i, j]) * dscale
            o[b, h, i] += pj * v[b, hk, j]
    return o, lse


CASES = [  # B, H, Hk, Sq, Sk, D, Dv, causal, alignment
    (2, 2, 2, 3, 4, 5, 5, False, "top_left"),
    (1, 4, 2, 4, 4, 3, 2, True, "top_left"),
    (2, 3, 1, 3, 5, 4, 4, True, "bottom_right"),
    (1, 2, 1, 5, 3, 2, 3, True, "top_left"),
]


def _inputs(rng, c):
    B, H, Hk, Sq, Sk, D, Dv = c[:7]
    return (rng.uniform(-1, 1, size=(B, H, Sq, D)), rng.uniform(-1, 1, size=(B, Hk, Sk, D)),
            rng.uniform(-1, 1, size=(B, Hk, Sk, Dv)))


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("extras", ["none", "bias", "dropout", "seqlen"])
def test_forward_matches_loop(case, extras, rng):
    q, k, v = _inputs(rng, case)
    B, H, _, Sq, Sk = case[:5]
    causal, align = case[7], case[8]
    kw, lk = {}, {}
    if extras == "bias":
        kw["bias"] = lk["bias"] = rng.uniform(-1, 1, size=(1, H, Sq, Sk))
    if extras == "dropout":
        mask = (rng.uniform(size=(B, H, Sq, Sk)) > 0.3).astype(np.float32)
        kw.update(dropout_mask=mask, dropout_scale=1 / 0.7)
        lk.update(mask=mask, dscale=1 / 0.7)
    if extras == "seqlen":
        kw["seq_len_kv"] = lk["seq_kv"] = [Sk] + [Sk - 1] * (B - 1) if align == "top_left" else [Sk] * B
    o, stats = sdpa_forward(q, k, v, 0.37, causal=causal, diagonal_alignment=align, **kw)
    wo, ws = loop_attention(q, k, v, 0.37, causal, align, **lk)
    np.testing.assert_allclose(o, wo, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(stats, ws, rtol=1e-12, atol=1e-14)


def test_hand_case():
    # one query, two keys with scores 0 and log 3 -> weights 1/4, 3/4
    q = np.array([[[[1.0]]]])
    k = np.array([[[[0.0], [math.log(3.0)]]]])
    v = np.array([[[[4.0], [8.0]]]])
    o, stats = sdpa_forward(q, k, v, 1.0)
    assert o[0, 0, 0, 0] == pytest.approx(7.0, rel=1e-15)
    assert stats[0, 0, 0, 0] == pytest.approx(math.log(4.0), rel=1e-15)
    # fully masked row (bottom_right with Sq > Sk): o = 0, stats = -inf
    o, stats = sdpa_forward(np.ones((1, 1, 3, 1)), np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)),
                            1.0, causal=True, diagonal_alignment="bottom_right")
    assert o[0, 0, 0, 0] == 0.0 and stats[0, 0, 0, 0] == -np.inf and o[0, 0, 2, 0] == 1.0


def _fd(f, a, h=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(*a.shape):
        old = a[i]
        a[i] = old + h
        fp = f(a)
        a[i] = old - h
        fm = f(a)
        a[i] = old
        g[i] = (fp - fm) / (2 * h)
    return g


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("extras", ["none", "bias_dropout"])
def test_backward_finite_difference(case, extras, rng):
    q, k, v = _inputs(rng, case)
    B, H, _, Sq, Sk = case[:5]
    kw = dict(causal=case[7], diagonal_alignment=case[8])
    if extras == "bias_dropout":
        kw.update(bias=rng.uniform(-1, 1, size=(B, 1, Sq, Sk)),
                  dropout_mask=(rng.uniform(size=(B, H, Sq, Sk)) > 0.25).astype(np.float64),
                  dropout_scale=1 / 0.75)
    scale = 0.6
    o, stats = sdpa_forward(q, k, v, scale, **kw)
    w = rng.uniform(-1, 1, size=o.shape)
    res = sdpa_backward(q, k, v, o, w, stats, scale, return_dbias="bias" in kw, **kw)
    dq, dk, dv = res[:3]

    def loss(qq=q, kk=k, vv=v, bb=None):
        extra = dict(kw) if bb is None else dict(kw, bias=bb)
        return np.sum(w * sdpa_forward(qq, kk, vv, scale, **extra)[0])
    tol = dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dq, _fd(lambda a: loss(qq=a), q.copy()), **tol)
    np.testing.assert_allclose(dk, _fd(lambda a: loss(kk=a), k.copy()), **tol)
    np.testing.assert_allclose(dv, _fd(lambda a: loss(vv=a), v.copy()), **tol)
    if "bias" in kw:
        np.testing.assert_allclose(res[3], _fd(lambda a: loss(bb=a), kw["bias"].copy()), **tol)


def test_padded_rows_get_zero(rng):
    q, k, v = _inputs(rng, (2, 2, 2, 4, 4, 3, 3))
    o, stats = sdpa_forward(q, k, v, 0.5, seq_len_q=[4, 2], seq_len_kv=[4, 3])
    assert np.all(o[1, :, 2:] == 0) and np.any(o[1, :, :2] != 0)
    dq, dk, dv = sdpa_backward(q, k, v, o, np.ones_like(o), stats, 0.5, seq_len_q=[4, 2],
                               seq_len_kv=[4, 3])
    assert np.all(dq[1, :, 2:] == 0) and np.all(dk[1, :, 3:] == 0) and np.all(dv[1, :, 3:] == 0)


@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_sliding_window(align, rng):
    B, H, Sq, Sk, D, W = 1, 2, 4, 6, 3, 2
    q, k, v = _inputs(rng, (B, H, H, Sq, Sk, D, D))
    kw = dict(causal=True, diagonal_alignment=align, sliding_window_length=W)
    o, stats = sdpa_forward(q, k, v, 0.5, **kw)
    shift = 0 if align == "top_left" else Sk - Sq
    for i in range(Sq):
        js = [j for j in range(Sk) if i + shift - W < j <= i + shift]
        assert len(js) == min(W, i + shift + 1)
        s = np.einsum("hd,hjd->hj", q[0, :, i], k[0][:, js]) * 0.5
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        np.testing.assert_allclose(o[0, :, i], np.einsum("hj,hjd->hd", p, v[0][:, js]), rtol=1e-12)
    w = rng.uniform(-1, 1, size=o.shape)
    dq, dk, dv = sdpa_backward(q, k, v, o, w, stats, 0.5, **kw)
    np.testing.assert_allclose(dk, _fd(lambda a: np.sum(w * sdpa_forward(q, a, v, 0.5, **kw)[0]),
                                       k.copy()), rtol=1e-6, atol=1e-8)


def test_alibi_slopes_values():
    np.testing.assert_array_equal(alibi_slopes(8), [2.0 ** -e for e in range(1, 9)])
    np.testing.assert_array_equal(alibi_slopes(6), [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8,
                                                    2.0 ** -1, 2.0 ** -3])
    assert alibi_slopes(3)[2] == np.float32(2.0 ** -2.0)  # n = 2: 2^(-8 * 0.5 / 2)


@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_alibi_and_per_batch_seqlens(align, rng):
    B, H, Sq, Sk, D = 3, 4, 4, 5, 3
    q, k, v = _inputs(rng, (B, H, 2, Sq, Sk, D, D))
    sq, skv = [4, 2, 3], [5, 3, 4]
    kw = dict(causal=True, diagonal_alignment=align, seq_len_q=np.array(sq).reshape(B, 1, 1, 1),
              seq_len_kv=np.array(skv).reshape(B, 1, 1, 1), alibi=True)
    o, stats = sdpa_forward(q, k, v, 0.7, **kw)
    wo, ws = loop_attention(q, k, v, 0.7, True, align, seq_kv=skv, seq_q=sq,
                            slopes=alibi_slopes(H))
    for b in range(B):
        np.testing.assert_allclose(o[b, :, :sq[b]], wo[b, :, :sq[b]], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(stats[b, :, :sq[b]], ws[b, :, :sq[b]], rtol=1e-12)
    w = rng.uniform(-1, 1, size=o.shape)
    dq, dk, dv = sdpa_backward(q, k, v, o, w, stats, 0.7, **kw)
    np.testing.assert_allclose(dq, _fd(lambda a: np.sum(w * sdpa_forward(a, k, v, 0.7, **kw)[0]),
                                       q.copy()), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dv, _fd(lambda a: np.sum(w * sdpa_forward(q, k, a, 0.7, **kw)[0]),
                                       v.copy()), rtol=1e-6, atol=1e-8)
