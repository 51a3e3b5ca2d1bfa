"""cudnnMultiHeadAttnForward against the float64 oracle (reference.mha), the attention / sequence-data
descriptors, the weight layout cudnnGetMultiHeadAttnWeights reports, the buffer sizes, and the refusals
(BAD_PARAM / NOT_SUPPORTED with a last-error message)."""
import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
from ncudnn.legacy.mha_desc import CUDNN_ATTN_ENABLE_PROJ_BIASES, CUDNN_ATTN_QUERYMAP_ONE_TO_ONE
from ncudnn.memory import device_pointer
from ncudnn.reference.mha import mha_forward
from ncudnn.testing import assert_close, poison_value

from .conftest import dev

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
F32, F16, F64 = ncudnn.CUDNN_DATA_FLOAT, ncudnn.CUDNN_DATA_HALF, ncudnn.CUDNN_DATA_DOUBLE
NP = {F32: np.float32, F16: np.float16}
TOL = {F32: "float32", F16: 1e-2}   # HALF: Q, K, V and the attention output are stored in HALF between steps
TIME, BATCH, BEAM, VECT = 0, 1, 2, 3
NAMES = ("Wq", "Wk", "Wv", "Wo", "bq", "bk", "bv", "bo")
B, H, C, P = 2, 2, 8, 8


def last():
    return ncudnn.cudnnGetLastErrorString()


def attn_desc(dtype=F32, biases=True, tq=4, tk=5, o_proj=C, sm=0.5, drop=None, heads=H):
    st, a = L.cudnnCreateAttnDescriptor()
    assert st == OK
    mode = CUDNN_ATTN_ENABLE_PROJ_BIASES if biases else 0
    st = L.cudnnSetAttnDescriptor(a, mode, heads, sm, dtype, F32, 0, drop, None, C, C, C, P, P, P, o_proj,
                                  tq, tk, B, 1)
    assert st == (OK,), last()
    return a


def seq_desc(t, c, lens, dtype=F32, axes=(BATCH, BEAM, TIME, VECT), fill=None):
    st, s = L.cudnnCreateSeqDataDescriptor()
    dims = [0] * 4
    dims[TIME], dims[BATCH], dims[BEAM], dims[VECT] = t, B, 1, c
    assert L.cudnnSetSeqDataDescriptor(s, dtype, 4, dims, list(axes), B, list(lens), fill) == (OK,), last()
    return s


def to_layout(x, axes):
    """[B, T, C] host data in the memory order ``axes`` (outermost first), beam 1."""
    full = x[:, None]                        # [B, N, T, C]
    pos = {BATCH: 0, BEAM: 1, TIME: 2, VECT: 3}
    return np.ascontiguousarray(full.transpose([pos[a] for a in axes]))


def from_layout(y, axes, t, c):
    shape = {BATCH: B, BEAM: 1, TIME: t, VECT: c}
    y = y.reshape([shape[a] for a in axes])
    return y.transpose([list(axes).index(a) for a in (BATCH, BEAM, TIME, VECT)])[:, 0]


def fill_weights(h, a, rng, dtype):
    """The weights buffer with random blocks written where cudnnGetMultiHeadAttnWeights says; the weights
    dict for the oracle."""
    st, wsize, _, _ = L.cudnnGetMultiHeadAttnBuffers(h, a)
    assert st == OK
    npdt = NP[dtype]
    host = np.zeros(wsize // np.dtype(npdt).itemsize, npdt)
    probe = dev(host)
    base, weights = device_pointer(probe), {}
    for kind, name in enumerate(NAMES):
        td = L.cudnnCreateTensorDescriptor()[1]
        st, addr = L.cudnnGetMultiHeadAttnWeights(h, a, kind, wsize, probe, td)
        assert st == OK, last()
        if addr is None:
            continue
        st, wdt, nd, dims, strides = L.cudnnGetTensorNdDescriptor(td, 3)
        assert (st, wdt, nd) == (OK, dtype, 3)
        off = (addr - base) // host.itemsize
        vals = (0.4 * rng.standard_normal(dims)).astype(npdt)
        view = np.lib.stride_tricks.as_strided(host[off:], shape=dims, strides=[s * host.itemsize for s in strides])
        view[...] = vals
        weights[name] = vals[..., 0] if name in ("bq", "bk", "bv") else (vals.reshape(-1) if name == "bo" else vals)
    return wsize, dev(host), weights


def run_forward(h, a, rng, dtype=F32, lq=(4, 2), lk=(5, 3), tq=4, tk=5, lo=None, hi=None, residual=False,
                axes=(BATCH, BEAM, TIME, VECT), co=C, training=False):
    npdt = NP[dtype]
    wsize, wdev, weights = fill_weights(h, a, rng, dtype)
    q, k, v = (rng.standard_normal((B, t, C)).astype(npdt) for t in (tq, tk, tk))
    qd, kd, vd = seq_desc(tq, C, lq, dtype, axes), seq_desc(tk, C, lk, dtype, axes), seq_desc(tk, C, lk, dtype, axes)
    od = seq_desc(tq, co, lq, dtype, axes)
    out = cuda.to_device(np.full(B * tq * co, poison_value(npdt), npdt))
    _, _, wss, rss = L.cudnnGetMultiHeadAttnBuffers(h, a)
    space = cuda.to_device(np.zeros(rss if training else wss, np.uint8))
    lo = [0] * tq if lo is None else lo
    hi = [tk] * tq if hi is None else hi
    qdev = dev(to_layout(q, axes))
    args = (h, a, -1, lo, hi, dev(np.array(lq, np.int32)), dev(np.array(lk, np.int32)), qd, qdev,
            qdev if residual else None, kd, dev(to_layout(k, axes)), vd, dev(to_layout(v, axes)), od, out, wsize, wdev)
    ret = L.cudnnMultiHeadAttnForward(*args, *((0, None, rss, space) if training else (wss, space, 0, None)))
    if "Wo" not in weights:   # oProjSize 0: the heads' outputs side by side, out[.., h * Pv + p] = A_h[.., p]
        weights["Wo"] = np.zeros((H, H * P, P))
        for i in range(H):
            weights["Wo"][i, i * P:(i + 1) * P] = np.eye(P)
    ref = mha_forward(q, k, v, weights, a.smScaler, residual=q if residual else None, seq_len_q=lq, seq_len_kv=lk,
                      lo_win=lo, hi_win=hi)
    return ret, (from_layout(out.copy_to_host(), axes, tq, co) if ret[0] == OK else None), ref


@pytest.mark.parametrize("dtype", [F32, F16], ids=["float", "half"])
@pytest.mark.parametrize("biases", [False, True], ids=["nobias", "bias"])
def test_forward_matches_oracle(handle, rng, dtype, biases):
    a = attn_desc(dtype, biases)
    ret, got, ref = run_forward(handle, a, rng, dtype)
    assert ret == (OK,), last()
    assert_close(got, ref, TOL[dtype], "out")
    assert np.all(got[1, 2:] == 0), "padding rows are 0 (paddingFill NULL)"


@pytest.mark.parametrize("window", ["causal", "band"])
def test_forward_causal_and_band_windows(handle, rng, window):
    tq = tk = 5
    a = attn_desc(tq=tq, tk=tk)
    hi = [i + 1 for i in range(tq)] if window == "causal" else [min(i + 2, tk) for i in range(tq)]
    lo = [0] * tq if window == "causal" else [max(i - 1, 0) for i in range(tq)]
    ret, got, ref = run_forward(handle, a, rng, tq=tq, tk=tk, lq=(5, 3), lk=(5, 4), lo=lo, hi=hi)
    assert ret == (OK,), last()
    assert_close(got, ref, "float32", "out")


def test_forward_time_major_with_residuals_training(handle, rng):
    a = attn_desc(biases=True, tq=3, tk=4)
    ret, got, ref = run_forward(handle, a, rng, tq=3, tk=4, lq=(3, 1), lk=(4, 2), residual=True,
                                axes=(TIME, BATCH, BEAM, VECT), training=True)
    assert ret == (OK,), last()
    assert_close(got, ref, "float32", "out")


def test_forward_without_output_projection(handle, rng):
    a = attn_desc(biases=False, o_proj=0)
    assert a.proj()[3] == H * P
    ret, got, ref = run_forward(handle, a, rng, co=H * P)
    assert ret == (OK,), last()
    assert_close(got, ref, "float32", "out")


def test_attn_descriptor_round_trip():
    st, a = L.cudnnCreateAttnDescriptor()
    assert L.cudnnGetAttnDescriptor(a)[0] == S.CUDNN_STATUS_BAD_PARAM and "not been set" in last()
    drop = L.cudnnCreateDropoutDescriptor()[1]
    args = (CUDNN_ATTN_ENABLE_PROJ_BIASES | CUDNN_ATTN_QUERYMAP_ONE_TO_ONE, 4, 0.125, F16, F32,
            ncudnn.CUDNN_TENSOR_OP_MATH, drop, None, 16, 12, 10, 8, 8, 6, 16, 7, 9, 3, 2)
    assert L.cudnnSetAttnDescriptor(a, *args) == (OK,), last()
    assert L.cudnnGetAttnDescriptor(a) == (OK, *args)
    assert L.cudnnDestroyAttnDescriptor(a) == (OK,)
    assert L.cudnnGetAttnDescriptor(a)[0] == S.CUDNN_STATUS_BAD_PARAM and "destroyed" in last()


def test_seq_data_descriptor_round_trip():
    st, s = L.cudnnCreateSeqDataDescriptor()
    dims = [5, B, 1, 8]
    axes = [TIME, BATCH, BEAM, VECT]
    assert L.cudnnSetSeqDataDescriptor(s, F16, 4, dims, axes, B, [5, 3], 0.5) == (OK,), last()
    assert L.cudnnGetSeqDataDescriptor(s, 4, 2) == (OK, F16, 4, dims, axes, 2, [5, 3], 0.5)
    assert L.cudnnGetSeqDataDescriptor(s, 2, 1) == (OK, F16, 4, dims[:2], axes[:2], 2, [5], 0.5)
    assert L.cudnnDestroySeqDataDescriptor(s) == (OK,)


@pytest.mark.parametrize("change, needle", [
    ({2: 3}, "nbDims"),
    ({4: [VECT, BATCH, BEAM, TIME]}, "innermost"),
    ({4: [TIME, TIME, BEAM, VECT]}, "permutation"),
    ({5: 3}, "seqLengthArraySize"),
    ({6: [5, 6]}, "seqLengthArray"),
    ({3: [5, 0, 1, 8]}, "positive"),
    ({1: 99}, "dataType"),
])
def test_seq_data_bad_arguments(change, needle):
    s = L.cudnnCreateSeqDataDescriptor()[1]
    args = [s, F32, 4, [5, B, 1, 8], [TIME, BATCH, BEAM, VECT], B, [5, 3], None]
    for i, v in change.items():
        args[i] = v
    assert L.cudnnSetSeqDataDescriptor(*args) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert needle in last()


@pytest.mark.parametrize("index, value, needle", [
    (1, 4, "attnMode"), (2, 0, "nHeads"), (3, -1.0, "smScaler"), (5, F16, "computePrec"),
    (13, 4, "kProjSize"), (9, 0, "qSize"), (18, 0, "maxBatchSize"), (19, 0, "maxBeamSize"),
    (7, "drop", "attnDropoutDesc"),
])
def test_attn_bad_arguments(index, value, needle):
    a = L.cudnnCreateAttnDescriptor()[1]
    args = [a, 0, H, 1.0, F32, F32, 0, None, None, C, C, C, P, P, P, C, 4, 5, B, 1]
    args[index] = value
    assert L.cudnnSetAttnDescriptor(*args)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert needle in last()
    assert L.cudnnGetAttnDescriptor(a)[0] == S.CUDNN_STATUS_BAD_PARAM   # left unset


def test_weight_layout_and_buffer_sizes(handle):
    a = attn_desc(biases=True, tq=4, tk=5)
    st, wsize, wss, rss = L.cudnnGetMultiHeadAttnBuffers(handle, a)
    blocks = [(H, P, C)] * 3 + [(H, C, P)] + [(H, P, 1)] * 3 + [(1, C, 1)]
    assert st == OK and wsize == 4 * sum(int(np.prod(d)) for d in blocks)
    inter = [B * 4 * H * P, B * 5 * H * P, B * 5 * H * P, B * 4 * H * P, B * 4 * C]
    assert wss == rss >= 4 * sum(inter)
    buf = dev(np.zeros(wsize // 4, np.float32))
    base, off = device_pointer(buf), 0
    for kind, dims in enumerate(blocks):
        td = L.cudnnCreateTensorDescriptor()[1]
        st, addr = L.cudnnGetMultiHeadAttnWeights(handle, a, kind, wsize, buf, td)
        assert st == OK and addr == base + 4 * off, (kind, last())
        st, _, nd, got_dims, strides = L.cudnnGetTensorNdDescriptor(td, 3)
        assert tuple(got_dims) == dims
        if kind == 3:   # Wo: row o of the [Co, H * Pv] matrix holds every head
            assert tuple(strides) == (P, H * P, 1)
        else:
            assert tuple(strides) == (dims[1] * dims[2], dims[2], 1)
        off += int(np.prod(dims))
    nob = attn_desc(biases=False)
    st, wsize2, _, _ = L.cudnnGetMultiHeadAttnBuffers(handle, nob)
    td = L.cudnnCreateTensorDescriptor()[1]
    assert L.cudnnGetMultiHeadAttnWeights(handle, nob, 4, wsize2, buf, td) == (OK, None)
    assert L.cudnnGetMultiHeadAttnWeights(handle, a, 0, wsize - 4, buf, td)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert "weightSizeInBytes" in last()
    assert L.cudnnGetMultiHeadAttnWeights(handle, a, 8, wsize, buf, td)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnGetMultiHeadAttnWeights(handle, a, 0, wsize, None, td)[0] == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER


def _forward_status(handle, rng, a, **kw):
    ret, _, _ = run_forward(handle, a, rng, **kw)
    return ret[0], last()


def test_refusals_say_why(handle, rng):
    st, msg = _forward_status(handle, rng, attn_desc(), lo=[0, 1, 0, 0])
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "window" in msg
    drop = L.cudnnCreateDropoutDescriptor()[1]
    states = dev(np.zeros(64, np.uint8))
    assert L.cudnnSetDropoutDescriptor(drop, handle, 0.25, states, 64, 7) == (OK,)
    st, msg = _forward_status(handle, rng, attn_desc(drop=drop))
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "dropout" in msg
    a = attn_desc()
    wsize, wdev, _ = fill_weights(handle, a, rng, F32)
    qd, kd = seq_desc(4, C, (4, 2)), seq_desc(5, C, (5, 3))
    x, lens = dev(np.zeros(B * 5 * C, np.float32)), dev(np.array([4, 2], np.int32))
    _, _, wss, _ = L.cudnnGetMultiHeadAttnBuffers(handle, a)
    ws = cuda.to_device(np.zeros(wss, np.uint8))

    def fwd(curr=-1, wss_=wss, qd_=qd, a_=a):
        return L.cudnnMultiHeadAttnForward(handle, a_, curr, [0] * 4, [5] * 4, lens, lens, qd_, x, None, kd, x, kd,
                                           x, qd, x, wsize, wdev, wss_, ws, 0, None)[0]
    assert fwd(curr=0) == S.CUDNN_STATUS_NOT_SUPPORTED and "currIdx" in last()
    assert fwd(wss_=wss - 1) == S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT and "workSpace" in last()
    assert fwd(qd_=seq_desc(4, C, (4, 2), F16)) == S.CUDNN_STATUS_BAD_PARAM and "data type" in last()
    big = seq_desc(6, C, (4, 2))
    assert fwd(qd_=big) == S.CUDNN_STATUS_BAD_PARAM
    assert fwd(a_=L.cudnnCreateAttnDescriptor()[1]) == S.CUDNN_STATUS_BAD_PARAM and "not been set" in last()
    a64 = L.cudnnCreateAttnDescriptor()[1]
    assert L.cudnnSetAttnDescriptor(a64, 0, H, 1.0, F64, F64, 0, None, None, C, C, C, P, P, P, C, 4, 5, B, 1) == (OK,)
    w64 = L.cudnnGetMultiHeadAttnBuffers(handle, a64)[1]
    q64, k64 = seq_desc(4, C, (4, 2), F64), seq_desc(5, C, (5, 3), F64)
    assert L.cudnnMultiHeadAttnForward(handle, a64, -1, [0] * 4, [5] * 4, lens, lens, q64, x, None, k64, x, k64, x,
                                       q64, x, w64, x, wss, ws, 0, None) == (S.CUDNN_STATUS_NOT_SUPPORTED,)
    assert "DOUBLE" in last()
