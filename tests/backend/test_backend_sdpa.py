"""The backend SDPA forward and backward operation descriptors (cuDNN 9's OPERATION_SDPA_FWD / _BWD):
built, finalized, lowered onto the attention engines and executed through the C-style calls, against
the float64 oracle (ncudnn.reference.attention); shape errors are BAD_PARAM at finalize and the
options the engines cannot run are NOT_SUPPORTED naming the attribute."""
import numpy as np
import pytest
from numba import cuda

from backend_build import A, D, DT, S, T, expect, finalize, graph, make, tensor
from ncudnn import reference as R
from ncudnn.testing import assert_close, random
from test_backend_execute_ops import poisoned, run

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
F, B = "CUDNN_ATTR_OPERATION_SDPA_FWD_", "CUDNN_ATTR_OPERATION_SDPA_BWD_"
BATCH, H, HKV, SQ, SKV, DH = 2, 4, 2, 5, 7, 8
Q, K, V, O, STATS = [BATCH, H, SQ, DH], [BATCH, HKV, SKV, DH], [BATCH, HKV, SKV, DH], [BATCH, H, SQ, DH], [BATCH, H, SQ, 1]
SCALE = 0.35


def _desc(kind, prefix, tensors, fin=True, extra=None):
    attrs = {A[prefix + name]: (DESC, t) for name, t in tensors.items()}
    attrs.update(extra or {})
    return make(kind, attrs, fin)


def fwd_op(fin=True, stats=True, scale=True, extra=None):
    ts = {"QDESC": tensor(1, Q), "KDESC": tensor(2, K), "VDESC": tensor(3, V), "ODESC": tensor(4, O)}
    if stats:
        ts["STATSDESC"] = tensor(5, STATS)
    if scale:
        ts["SCALEDESC"] = tensor(6, [1, 1, 1, 1], by_value=True)
    return _desc(D.CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, F, ts, fin, extra)


def _inputs(rng):
    return random(rng, Q), random(rng, K), random(rng, V)


def test_forward_executes_against_the_oracle(rng):
    q, k, v = _inputs(rng)
    o, st = poisoned(O), poisoned(STATS)
    run(graph([fwd_op()]), {1: cuda.to_device(q), 2: cuda.to_device(k), 3: cuda.to_device(v), 4: o, 5: st,
                            6: np.float32(SCALE)})
    ro, rs = R.sdpa_forward(q, k, v, SCALE)
    assert_close(o.copy_to_host(), ro, "float32")
    assert_close(st.copy_to_host(), rs, "float32")


def test_forward_without_stats_or_scale(rng):
    """No SCALEDESC: the scores are not scaled (scale 1), as in cuDNN; no STATSDESC: inference."""
    q, k, v = _inputs(rng)
    o = poisoned(O)
    run(graph([fwd_op(stats=False, scale=False)]), {1: cuda.to_device(q), 2: cuda.to_device(k), 3: cuda.to_device(v),
                                                    4: o})
    assert_close(o.copy_to_host(), R.sdpa_forward(q, k, v, 1.0)[0], "float32")


def test_backward_executes_against_the_oracle(rng):
    q, k, v = _inputs(rng)
    ro, rs = R.sdpa_forward(q, k, v, SCALE)
    do = random(rng, O)
    o32, s32 = ro.astype(np.float32), rs.astype(np.float32)
    dq, dk, dv = poisoned(Q), poisoned(K), poisoned(V)
    ts = {"QDESC": tensor(1, Q), "KDESC": tensor(2, K), "VDESC": tensor(3, V), "ODESC": tensor(4, O),
          "STATSDESC": tensor(5, STATS), "SCALEDESC": tensor(6, [1, 1, 1, 1], by_value=True),
          "DODDESC": tensor(7, O), "DQDESC": tensor(8, Q), "DKDESC": tensor(9, K), "DVDESC": tensor(10, V)}
    op = _desc(D.CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR, B, ts)
    dev = cuda.to_device
    run(graph([op]), {1: dev(q), 2: dev(k), 3: dev(v), 4: dev(o32), 5: dev(s32), 6: np.float32(SCALE), 7: dev(do),
                      8: dq, 9: dk, 10: dv})
    rq, rk, rv = R.sdpa_backward(q, k, v, o32, do, s32, SCALE)
    for got, want, name in ((dq, rq, "dQ"), (dk, rk, "dK"), (dv, rv, "dV")):
        assert_close(got.copy_to_host(), want, "float32", name=name)


def test_shape_errors_are_bad_param_at_finalize():
    bad_o = {"QDESC": tensor(1, Q), "KDESC": tensor(2, K), "VDESC": tensor(3, V), "ODESC": tensor(4, [BATCH, H, SQ, 3])}
    d = _desc(D.CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, F, bad_o, fin=False)
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC", str([BATCH, H, SQ, DH]))
    heads = {"QDESC": tensor(1, [BATCH, 3, SQ, DH]), "KDESC": tensor(2, K), "VDESC": tensor(3, V),
             "ODESC": tensor(4, [BATCH, 3, SQ, DH])}
    d = _desc(D.CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, F, heads, fin=False)
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "not a multiple")
    d = fwd_op(fin=False, extra={A[F + "DROPOUT_PROBABILITY"]: (T.CUDNN_TYPE_FLOAT, 1.5)})
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "DROPOUT_PROBABILITY")


@pytest.mark.parametrize("attr,why", [("PAGE_TABLE_KDESC", "paged"), ("CU_SEQ_LEN_QDESC", "ragged"),
                                      ("DESCALE_QDESC", "FP8"), ("BLOCK_MASK_DESC", "block-sparse")])
def test_options_the_engines_cannot_run_are_not_supported(attr, why):
    op = fwd_op(extra={A[F + attr]: (DESC, tensor(20, [1, 1, 1, 1]))})
    st = finalize(graph([op], fin=False))
    expect(st, S.CUDNN_STATUS_NOT_SUPPORTED, f"CUDNN_ATTR_OPERATION_SDPA_FWD_{attr}", why)


def test_forward_padding_mask_from_sequence_lengths(rng):
    """SEQ_LEN_Q / SEQ_LEN_KV set: each batch attends over its own lengths (padding rows are
    unspecified in cuDNN: compared on the valid rows only)."""
    q, k, v = _inputs(rng)
    lq, lkv = np.array([3, 5], np.int32).reshape(BATCH, 1, 1, 1), np.array([7, 2], np.int32).reshape(BATCH, 1, 1, 1)
    o = poisoned(O)
    lens = {"SEQ_LEN_QDESC": tensor(11, [BATCH, 1, 1, 1], dtype=DT.CUDNN_DATA_INT32),
            "SEQ_LEN_KVDESC": tensor(12, [BATCH, 1, 1, 1], dtype=DT.CUDNN_DATA_INT32)}
    ts = {"QDESC": tensor(1, Q), "KDESC": tensor(2, K), "VDESC": tensor(3, V), "ODESC": tensor(4, O), **lens}
    op = _desc(D.CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, F, ts)
    run(graph([op]), {1: cuda.to_device(q), 2: cuda.to_device(k), 3: cuda.to_device(v), 4: o,
                      11: cuda.to_device(lq), 12: cuda.to_device(lkv)})
    ro, _ = R.sdpa_forward(q, k, v, 1.0, seq_len_q=lq.reshape(-1), seq_len_kv=lkv.reshape(-1))
    got = o.copy_to_host()
    for b in range(BATCH):
        assert_close(got[b, :, :lq[b, 0, 0, 0]], ro[b, :, :lq[b, 0, 0, 0]], "float32", name=f"O batch {b}")
