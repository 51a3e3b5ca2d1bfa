"""cudnnMultiHeadAttnBackwardData / BackwardWeights after a training forward, against reference.mha's
mha_backward (gradients of <out, dout>; the residual's gradient is left to the caller, as in cuDNN)."""
import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
from ncudnn.memory import device_pointer
from ncudnn.reference.mha import mha_backward
from ncudnn.testing import assert_close, poison_value

from .conftest import dev
from .test_mha_forward import (BATCH, BEAM, NAMES, NP, TIME, VECT, B, C, F16, F32, H, P, attn_desc, fill_weights,
                               from_layout, last, seq_desc, to_layout)

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
TOL = {F32: "float32", F16: 2e-2}


def blocks_of(h, a, wsize, buf, host):
    """name -> the block of ``host`` (the weights' layout) as cudnnGetMultiHeadAttnWeights reports it."""
    base, out = device_pointer(buf), {}
    for kind, name in enumerate(NAMES):
        td = L.cudnnCreateTensorDescriptor()[1]
        st, addr = L.cudnnGetMultiHeadAttnWeights(h, a, kind, wsize, buf, td)
        if addr is None:
            continue
        _, _, _, dims, strides = L.cudnnGetTensorNdDescriptor(td, 3)
        off = (addr - base) // host.itemsize
        v = np.lib.stride_tricks.as_strided(host[off:], shape=dims, strides=[s * host.itemsize for s in strides])
        out[name] = v[..., 0] if name in ("bq", "bk", "bv") else (v.reshape(-1) if name == "bo" else v)
    return out


BM = (BATCH, BEAM, TIME, VECT)


@pytest.mark.parametrize("dtype, biases, axes, causal, o_proj", [
    (F32, True, BM, False, C), (F32, False, (TIME, BATCH, BEAM, VECT), False, C), (F16, True, BM, False, C),
    (F32, True, BM, True, 0),
], ids=["float-bias", "float-time-major", "half-bias", "float-causal-no-oproj"])
def test_backward_matches_oracle(handle, rng, dtype, biases, axes, causal, o_proj):
    tq, tk, lq, lk = 4, 5, (4, 2), (5, 3)
    npdt = NP[dtype]
    a = attn_desc(dtype, biases, tq, tk, o_proj=o_proj)
    co = o_proj or H * P
    wsize, wdev, weights = fill_weights(handle, a, rng, dtype)
    fixed_wo = "Wo" not in weights
    if fixed_wo:   # oProjSize 0: the heads side by side (test_mha_forward)
        weights["Wo"] = np.zeros((H, H * P, P))
        for i in range(H):
            weights["Wo"][i, i * P:(i + 1) * P] = np.eye(P)
    q, k, v = (rng.standard_normal((B, t, C)).astype(npdt) for t in (tq, tk, tk))
    dout = rng.standard_normal((B, tq, co)).astype(npdt)
    qd, kd, od = seq_desc(tq, C, lq, dtype, axes), seq_desc(tk, C, lk, dtype, axes), seq_desc(tq, co, lq, dtype, axes)
    _, _, wss, rss = L.cudnnGetMultiHeadAttnBuffers(handle, a)
    ws, rs = cuda.to_device(np.zeros(wss, np.uint8)), cuda.to_device(np.zeros(rss, np.uint8))
    sq, skv = dev(np.array(lq, np.int32)), dev(np.array(lk, np.int32))
    qdev, kdev, vdev = dev(to_layout(q, axes)), dev(to_layout(k, axes)), dev(to_layout(v, axes))
    out = cuda.to_device(np.zeros(B * tq * co, npdt))
    lo, hi = [0] * tq, ([i + 1 for i in range(tq)] if causal else [tk] * tq)
    assert L.cudnnMultiHeadAttnForward(handle, a, -1, lo, hi, sq, skv, qd, qdev, None, kd, kdev, kd, vdev, od, out,
                                       wsize, wdev, wss, ws, rss, rs) == (OK,), last()
    grads = {n: cuda.to_device(np.full(B * t * C, poison_value(npdt), npdt)) for n, t in (("dq", tq), ("dk", tk),
                                                                                          ("dv", tk))}
    ret = L.cudnnMultiHeadAttnBackwardData(handle, a, lo, hi, sq, skv, od, dev(to_layout(dout, axes)), qd, grads["dq"],
                                           qdev, kd, grads["dk"], kdev, kd, grads["dv"], vdev, wsize, wdev, wss, ws,
                                           rss, rs)
    assert ret == (OK,), last()
    ref = mha_backward(q, k, v, weights, a.smScaler, dout, seq_len_q=lq, seq_len_kv=lk, lo_win=lo, hi_win=hi)
    if fixed_wo:
        del ref["dweights"]["Wo"]
    for n, t in (("dq", tq), ("dk", tk), ("dv", tk)):
        assert_close(from_layout(grads[n].copy_to_host(), axes, t, C), ref[n], TOL[dtype], n)
    prior = (0.3 * rng.standard_normal(wsize // np.dtype(npdt).itemsize)).astype(npdt)
    for mode in (1, 0):   # SET, then ADD onto a random prior
        host = np.full_like(prior, poison_value(npdt)) if mode == 1 else prior.copy()
        dw = dev(host)
        ret = L.cudnnMultiHeadAttnBackwardWeights(handle, a, mode, qd, qdev, kd, kdev, kd, vdev, od,
                                                  dev(to_layout(dout, axes)), wsize, wdev, dw, wss, ws, rss, rs)
        assert ret == (OK,), last()
        got = blocks_of(handle, a, wsize, dw, dw.copy_to_host())
        before = blocks_of(handle, a, wsize, dw, prior)
        assert set(got) == set(ref["dweights"]), (sorted(got), sorted(ref["dweights"]))
        for n, want in ref["dweights"].items():
            want = want + before[n].astype(np.float64) if mode == 0 else want
            if n == "bk":   # the softmax ignores a key bias: its gradient is 0 up to rounding
                scale = np.abs(ref["dweights"]["Wk"]).max()
                atol = scale * (1e-5 if dtype == F32 else 1e-2)
                np.testing.assert_allclose(got[n].astype(np.float64), want, atol=atol)
                continue
            assert_close(got[n], want, TOL[dtype], f"{n} ({'ADD' if mode == 0 else 'SET'})")


def test_backward_needs_the_reserve_space(handle):
    a = attn_desc()
    wsize = L.cudnnGetMultiHeadAttnBuffers(handle, a)[1]
    qd, kd = seq_desc(4, C, (4, 2)), seq_desc(5, C, (5, 3))
    x, lens = dev(np.zeros(B * 5 * C, np.float32)), dev(np.array([4, 2], np.int32))
    ret = L.cudnnMultiHeadAttnBackwardData(handle, a, [0] * 4, [5] * 4, lens, lens, qd, x, qd, x, x, kd, x, x, kd, x,
                                           x, wsize, x, 0, None, 0, None)
    assert ret[0] in (S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    assert "reserveSpace" in last()
    assert L.cudnnMultiHeadAttnBackwardWeights(handle, a, 2, qd, x, kd, x, kd, x, qd, x, wsize, x, x, 0, None, 0,
                                               None)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert "addGrad" in last()
