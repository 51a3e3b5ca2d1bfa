"""The CTC loss of cudnn_adv.h (ncudnn.legacy.ctc) on engine "ctc": descriptors, costs and gradients of
cudnnCTCLoss (host labels) and cudnnCTCLoss_v8 (device labels) against the float64 oracle on fresh random
inputs, out-of-bounds entries under both gradient modes, workspace queries, and every refusal with its
status and message."""
import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
from ncudnn.reference import ctc_loss
from ncudnn.testing import assert_close

from .conftest import dev, poisoned

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
BAD = S.CUDNN_STATUS_BAD_PARAM
NS = S.CUDNN_STATUS_NOT_SUPPORTED
F32, F64 = ncudnn.CUDNN_DATA_FLOAT, ncudnn.CUDNN_DATA_DOUBLE
NONE, SOFTMAX = 0, 1
ZERO_OOB, SKIP_OOB = 0, 1
DET, NONDET = 0, 1
#: FLOAT: costs sum T log terms and the gradients T occupancy products, each rounded in float32; the
#: rel-norm error stays ~1e-6 at these lengths, elementwise within ATOL of the float64 oracle
TOL, ATOL = 3e-5, 2e-5


def tdesc3(dims, dtype=F32, strides=None):
    st, d = L.cudnnCreateTensorDescriptor()
    strides = strides or [dims[1] * dims[2], dims[2], 1]
    assert L.cudnnSetTensorNdDescriptor(d, dtype, len(dims), dims, strides)[0] == OK, \
        ncudnn.cudnnGetLastErrorString()
    return d


def ctc_desc(norm=NONE, grad_mode=ZERO_OOB, max_len=256, comp=F32):
    _, d = L.cudnnCreateCTCLossDescriptor()
    assert L.cudnnSetCTCLossDescriptor_v9(d, comp, norm, grad_mode, max_len) == (OK,), ncudnn.cudnnGetLastErrorString()
    return d


def draw_labels(rng, n_labels, A, repeat_p=0.4):
    """Labels in [1, A - 1], each repeating the previous one with probability ``repeat_p``."""
    out = []
    for _ in range(n_labels):
        out.append(out[-1] if out and rng.random() < repeat_p else int(rng.integers(1, A)))
    return out


def need(lab):
    return len(lab) + sum(a == b for a, b in zip(lab, lab[1:]))


def draw_problem(rng, T, N, A, norm, oob=()):
    """(x, labels per entry, input lengths): x probabilities (NONE) or activations (SOFTMAX); the entries in
    ``oob`` get labels that cannot fit their input length."""
    u = rng.standard_normal((T, N, A)).astype(np.float32) * 1.5
    e = np.exp(u - u.max(-1, keepdims=True))
    x = u if norm == SOFTMAX else (e / e.sum(-1, keepdims=True)).astype(np.float32)
    labs, lens = [], []
    for n in range(N):
        if n in oob:
            tn = int(rng.integers(1, T + 1))
            lab = draw_labels(rng, tn, A, 0.0)
            lab = lab[:1] * 2 + lab if A > 1 else lab   # a repeat: needs at least tn + 2 steps
            lens.append(tn)
        else:
            L_ = int(rng.integers(0, max(1, T // 2) + 1))
            lab = draw_labels(rng, L_, A)
            while need(lab) > T:
                lab = lab[:-1]
            lens.append(int(rng.integers(max(need(lab), 1), T + 1)))
        labs.append(lab)
    return x, labs, lens


def run(h, api, x, labs, lens, d, with_grads=True, grads_prior=None, algo=DET):
    """(status, costs, gradients) of one call on poisoned outputs (``grads_prior``: the gradients' contents)."""
    T, N, A = x.shape
    flat = [c for lab in labs for c in lab]
    ll = [len(lab) for lab in labs]
    pd = tdesc3(x.shape)
    gd = tdesc3(x.shape) if with_grads else None
    costs = poisoned(N)
    grads = (dev(grads_prior) if grads_prior is not None else poisoned(x.shape)) if with_grads else None
    if api == "v7":
        st, size = L.cudnnGetCTCLossWorkspaceSize(h, pd, gd, flat, ll, lens, algo, d)
        assert st == OK, ncudnn.cudnnGetLastErrorString()
        ws = cuda.device_array(size, np.uint8)
        ret = L.cudnnCTCLoss(h, pd, dev(x), flat, ll, lens, costs, gd, grads, algo, d, ws, size)
    else:
        st, size = L.cudnnGetCTCLossWorkspaceSize_v8(h, algo, d, pd, gd)
        assert st == OK, ncudnn.cudnnGetLastErrorString()
        ws = cuda.device_array(size, np.uint8)
        ret = L.cudnnCTCLoss_v8(h, algo, d, pd, dev(x), dev(np.array(flat or [0], np.int32)),
                                dev(np.array(ll, np.int32)), dev(np.array(lens, np.int32)), costs, gd, grads, size, ws)
    assert ret == (OK,), ncudnn.cudnnGetLastErrorString()
    return costs.copy_to_host(), (grads.copy_to_host() if with_grads else None)


def check(costs, grads, x, labs, lens, norm, skip=()):
    flat = [c for lab in labs for c in lab]
    rc, rg = ctc_loss(x, flat, lens, [len(lab) for lab in labs], softmax_input=norm == SOFTMAX)
    assert_close(costs, rc, TOL, "costs")
    np.testing.assert_allclose(costs, rc, rtol=TOL, atol=ATOL)
    if grads is None:
        return
    keep = [n for n in range(x.shape[1]) if n not in skip]
    assert_close(grads[:, keep], rg[:, keep], TOL, "gradients")
    np.testing.assert_allclose(grads[:, keep], rg[:, keep], rtol=0, atol=ATOL)


# ------------------------------------------------------------------------------------- numerics

CASES = [  # (T, N, A, normalization, api, out-of-bounds entries)
    (6, 3, 5, NONE, "v7", (1,)),
    (7, 2, 4, SOFTMAX, "v7", ()),
    (5, 4, 3, NONE, "v8", (2,)),
    (8, 1, 6, SOFTMAX, "v8", ()),
    (1, 2, 2, NONE, "v7", ()),
]


@pytest.mark.parametrize("T,N,A,norm,api,oob", CASES, ids=lambda v: str(v))
def test_costs_and_gradients_match_the_oracle(handle, rng, T, N, A, norm, api, oob):
    x, labs, lens = draw_problem(rng, T, N, A, norm, oob)
    d = ctc_desc(norm, ZERO_OOB)
    costs, grads = run(handle, api, x, labs, lens, d)
    check(costs, grads, x, labs, lens, norm)
    for n in oob:
        assert costs[n] == np.inf and not grads[:, n].any()   # ZERO_OOB: zeros, not left poisoned


def test_repeated_labels_need_a_blank_between_them(handle):
    """[1, 1] needs 3 steps: with 2 the entry is out of bounds, with 3 exactly one alignment (1, 0, 1)."""
    x = np.full((3, 2, 3), 1 / 3, np.float32)
    costs, grads = run(handle, "v7", x, [[1, 1], [1, 1]], [2, 3], ctc_desc())
    assert costs[0] == np.inf and not grads[:, 0].any()
    assert costs[1] == pytest.approx(3 * np.log(3), rel=1e-6)
    check(costs, grads, x, [[1, 1], [1, 1]], [2, 3], NONE, skip=(0,))


def test_skip_oob_leaves_the_gradients_of_out_of_bounds_entries_untouched(handle, rng):
    T, N, A = 5, 3, 4
    x, labs, lens = draw_problem(rng, T, N, A, SOFTMAX, oob=(0, 2))
    prior = rng.standard_normal((T, N, A)).astype(np.float32)
    for api in ("v7", "v8"):
        costs, grads = run(handle, api, x, labs, lens, ctc_desc(SOFTMAX, SKIP_OOB), grads_prior=prior)
        assert costs[0] == costs[2] == np.inf
        np.testing.assert_array_equal(grads[:, [0, 2]], prior[:, [0, 2]])
        check(costs, grads, x, labs, lens, SOFTMAX, skip=(0, 2))


def test_costs_only_with_null_gradients(handle, rng):
    x, labs, lens = draw_problem(rng, 6, 3, 5, NONE, oob=(2,))
    for api in ("v7", "v8"):
        costs, _ = run(handle, api, x, labs, lens, ctc_desc(), with_grads=False)
        check(costs, None, x, labs, lens, NONE)


def test_strided_probs_and_gradients(handle, rng):
    T, N, A = 4, 2, 3
    x, labs, lens = draw_problem(rng, T, N, A, NONE)
    strides = [1, T, T * N]              # A outermost in memory
    buf = np.ascontiguousarray(np.transpose(x, (2, 1, 0)))
    flat = [c for lab in labs for c in lab]
    pd, gd = tdesc3((T, N, A), strides=strides), tdesc3((T, N, A), strides=strides)
    d = ctc_desc()
    _, size = L.cudnnGetCTCLossWorkspaceSize(handle, pd, gd, flat, [len(x_) for x_ in labs], lens, DET, d)
    costs, grads = poisoned(N), poisoned((A, N, T))
    ret = L.cudnnCTCLoss(handle, pd, dev(buf), flat, [len(x_) for x_ in labs], lens, costs, gd, grads, DET, d,
                         cuda.device_array(size, np.uint8), size)
    assert ret == (OK,), ncudnn.cudnnGetLastErrorString()
    check(costs.copy_to_host(), np.transpose(grads.copy_to_host(), (2, 1, 0)), x, labs, lens, NONE)


def test_deterministic_and_both_algorithms_agree_bitwise(handle, rng):
    x, labs, lens = draw_problem(rng, 6, 2, 5, SOFTMAX)
    d = ctc_desc(SOFTMAX)
    a = run(handle, "v7", x, labs, lens, d, algo=DET)
    b = run(handle, "v7", x, labs, lens, d, algo=NONDET)
    c = run(handle, "v8", x, labs, lens, d, algo=DET)
    for other in (b, c):
        np.testing.assert_array_equal(a[0], other[0])
        np.testing.assert_array_equal(a[1], other[1])


# ----------------------------------------------------------------------------------- descriptors

def test_descriptor_set_get_round_trips_and_defaults():
    _, d = L.cudnnCreateCTCLossDescriptor()
    assert L.cudnnGetCTCLossDescriptor(d)[0] == BAD     # not set yet
    assert "not been set" in ncudnn.cudnnGetLastErrorString()
    assert L.cudnnSetCTCLossDescriptor(d, F32) == (OK,)
    assert L.cudnnGetCTCLossDescriptor(d) == (OK, F32)
    assert L.cudnnGetCTCLossDescriptor_v9(d) == (OK, F32, NONE, ZERO_OOB, 256)
    assert L.cudnnSetCTCLossDescriptorEx(d, F64, SOFTMAX, 1) == (OK,)
    assert L.cudnnGetCTCLossDescriptorEx(d) == (OK, F64, SOFTMAX, 1)
    assert L.cudnnSetCTCLossDescriptor_v8(d, F32, SOFTMAX, 0, 17) == (OK,)
    assert L.cudnnGetCTCLossDescriptor_v8(d) == (OK, F32, SOFTMAX, 0, 17)
    assert L.cudnnSetCTCLossDescriptor_v9(d, F32, NONE, SKIP_OOB, 5) == (OK,)
    assert L.cudnnGetCTCLossDescriptor_v9(d) == (OK, F32, NONE, SKIP_OOB, 5)
    assert L.cudnnSetCTCLossDescriptor(d, F32) == (OK,)   # the plain setter restores the defaults
    assert L.cudnnGetCTCLossDescriptor_v9(d) == (OK, F32, NONE, ZERO_OOB, 256)
    assert L.cudnnDestroyCTCLossDescriptor(d) == (OK,)
    assert L.cudnnGetCTCLossDescriptor(d)[0] == BAD and "destroyed" in ncudnn.cudnnGetLastErrorString()
    assert L.cudnnDestroyCTCLossDescriptor(None) == (OK,)


@pytest.mark.parametrize("call,words", [
    (lambda d: L.cudnnSetCTCLossDescriptor(d, 99), "compType"),
    (lambda d: L.cudnnSetCTCLossDescriptorEx(d, F32, 2, 0), "normMode"),
    (lambda d: L.cudnnSetCTCLossDescriptorEx(d, F32, 0, 5), "gradMode"),
    (lambda d: L.cudnnSetCTCLossDescriptor_v8(d, F32, 0, 0, -1), "maxLabelLength"),
    (lambda d: L.cudnnSetCTCLossDescriptor_v9(d, F32, 0, 2, 4), "ctcGradMode"),
    (lambda d: L.cudnnSetCTCLossDescriptor_v9(d, F32, 0, 0, "x"), "maxLabelLength"),
    (lambda d: L.cudnnSetCTCLossDescriptor(None, F32), "NULL"),
    (lambda d: L.cudnnSetCTCLossDescriptor(object(), F32), "not a cudnnCTCLossDescriptor_t"),
    (lambda d: L.cudnnGetCTCLossDescriptor_v8(None), "NULL"),
])
def test_descriptor_errors(call, words):
    _, d = L.cudnnCreateCTCLossDescriptor()
    assert call(d)[0] == BAD
    assert words in ncudnn.cudnnGetLastErrorString()


# ------------------------------------------------------------------------------------- workspace

def test_workspace_sizes_grow_with_the_label_length(handle):
    T, N, A = 6, 2, 5
    pd, gd = tdesc3((T, N, A)), tdesc3((T, N, A))
    d = ctc_desc(max_len=2)
    st, short = L.cudnnGetCTCLossWorkspaceSize(handle, pd, gd, [1, 2], [1, 1], [6, 6], DET, d)
    st2, long_ = L.cudnnGetCTCLossWorkspaceSize(handle, pd, gd, [1, 2, 3, 4, 1, 2], [3, 3], [6, 6], DET, d)
    assert st == st2 == OK and 0 < short < long_
    st, v8_small = L.cudnnGetCTCLossWorkspaceSize_v8(handle, DET, d, pd, gd)
    L.cudnnSetCTCLossDescriptor_v9(d, F32, NONE, ZERO_OOB, 100)
    st2, v8_big = L.cudnnGetCTCLossWorkspaceSize_v8(handle, DET, d, pd, gd)
    assert st == st2 == OK and 0 < v8_small < v8_big
    assert L.cudnnGetCTCLossWorkspaceSize_v8(handle, DET, d, pd, None)[0] == OK   # costs only


def test_a_workspace_too_small_or_null_is_refused_and_nothing_is_written(handle, rng):
    x, labs, lens = draw_problem(rng, 4, 2, 3, NONE)
    flat, ll = [c for lab in labs for c in lab], [len(lab) for lab in labs]
    pd, gd, d = tdesc3(x.shape), tdesc3(x.shape), ctc_desc()
    _, size = L.cudnnGetCTCLossWorkspaceSize(handle, pd, gd, flat, ll, lens, DET, d)
    costs = poisoned(2)
    for ws, n in ((cuda.device_array(size, np.uint8), size - 1), (None, 0)):
        ret = L.cudnnCTCLoss(handle, pd, dev(x), flat, ll, lens, costs, gd, poisoned(x.shape), DET, d, ws, n)
        assert ret == (S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,)
        assert f"{size} needed" in ncudnn.cudnnGetLastErrorString()
    _, size8 = L.cudnnGetCTCLossWorkspaceSize_v8(handle, DET, d, pd, gd)
    ret = L.cudnnCTCLoss_v8(handle, DET, d, pd, dev(x), dev(np.array(flat, np.int32)), dev(np.array(ll, np.int32)),
                            dev(np.array(lens, np.int32)), costs, gd, poisoned(x.shape), size8 - 256,
                            cuda.device_array(size8, np.uint8))
    assert ret == (S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,)
    assert np.isnan(costs.copy_to_host()).all()


# ------------------------------------------------------------------------------------ refusals

T0, N0, A0 = 4, 2, 3
GOOD = dict(labels=[1, 2, 2], ll=[1, 2], il=[4, 3])
MISSING = object()


def _call(h, api, *, probs_dims=(T0, N0, A0), grads_dims=(T0, N0, A0), dtype=F32, gdtype=F32, d=MISSING, algo=DET,
          labels=MISSING, ll=MISSING, il=MISSING, probs="dev", costs="dev", grads="dev", ws="dev", handle="h"):
    labels = GOOD["labels"] if labels is MISSING else labels
    ll = GOOD["ll"] if ll is MISSING else ll
    il = GOOD["il"] if il is MISSING else il
    d = ctc_desc() if d is MISSING else d
    pd = tdesc3(probs_dims, dtype) if len(probs_dims) == 3 else _nd(probs_dims, dtype)
    gd = tdesc3(grads_dims, gdtype) if grads_dims is not None else None
    x = dev(np.full(probs_dims, 1 / A0, np.float32 if dtype == F32 else np.float64))
    p = x if probs == "dev" else probs
    c = poisoned(N0) if costs == "dev" else costs
    g = (x if grads == "alias" else poisoned(grads_dims or (T0, N0, A0))) if grads in ("dev", "alias") else grads
    w = cuda.device_array(1 << 16, np.uint8) if ws == "dev" else ws
    hh = h if handle == "h" else handle
    if api == "v7":
        return L.cudnnCTCLoss(hh, pd, p, labels, ll, il, c, gd, g, algo, d, w, 1 << 16)
    lab = dev(np.array(labels or [0], np.int32)) if labels is not None else None
    return L.cudnnCTCLoss_v8(hh, algo, d, pd, p, lab, dev(np.array(ll, np.int32)), dev(np.array(il, np.int32)), c,
                             gd, g, 1 << 16, w)


def _nd(dims, dtype):
    st, d = L.cudnnCreateTensorDescriptor()
    L.cudnnSetTensorNdDescriptorEx(d, 0, dtype, len(dims), dims)
    return d


def _destroyed():
    d = ctc_desc()
    L.cudnnDestroyCTCLossDescriptor(d)
    return d


REFUSALS = [  # (name, kwargs, status, words in the message)
    ("null handle", dict(handle=None), BAD, "handle"),
    ("null ctc desc", dict(d=None), BAD, "NULL"),
    ("destroyed ctc desc", dict(d="destroyed"), BAD, "destroyed"),
    ("bad algo", dict(algo=7), BAD, "algo"),
    ("4-d probs", dict(probs_dims=(T0, N0, A0, 1), grads_dims=None), BAD, "(T, N, A)"),
    ("grads dims differ", dict(grads_dims=(T0, N0, A0 + 1)), BAD, "differ"),
    ("double probs", dict(dtype=F64, gdtype=F64), NS, "FLOAT"),
    ("double grads", dict(gdtype=F64), NS, "gradientsDesc data type"),
    ("double compType", dict(d="double"), NS, "compType"),
    ("null probs", dict(probs=None), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "probs is NULL"),
    ("null costs", dict(costs=None), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "costs is NULL"),
    ("input length > T", dict(il=[T0 + 1, 3]), BAD, "inputLengths[0]"),
    ("input length 0", dict(il=[4, 0]), BAD, "inputLengths[1]"),
    ("label length > 256", dict(labels=[1] * 257 + [1, 2], ll=[257, 2]), BAD, "labelLengths[0]"),
    ("negative label length", dict(ll=[-1, 2], labels=[1]), BAD, "labelLengths[0]"),
    ("blank label", dict(labels=[0, 2, 2]), BAD, "labels[0]"),
    ("label >= A", dict(labels=[1, 2, A0]), BAD, "labels[2]"),
    ("in place", dict(grads="alias"), NS, "in place"),
    ("grads without desc", dict(grads_dims=None), BAD, "gradientsDesc is NULL"),
]


@pytest.mark.parametrize("api", ["v7", "v8"])
@pytest.mark.parametrize("name,kw,status,words", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals(handle, api, name, kw, status, words):
    kw = dict(kw)
    if kw.get("d") == "destroyed":
        kw["d"] = _destroyed()
    elif kw.get("d") == "double":
        kw["d"] = ctc_desc(comp=F64)
    ret = _call(handle, api, **kw)
    assert ret == (status,), (name, ret, ncudnn.cudnnGetLastErrorString())
    msg = ncudnn.cudnnGetLastErrorString()
    assert words in msg and ("cudnnCTCLoss" in msg), msg


def test_v8_label_lengths_are_held_to_max_label_length(handle):
    assert _call(handle, "v8", d=ctc_desc(max_len=1)) == (BAD,)
    msg = ncudnn.cudnnGetLastErrorString()
    assert "maxLabelLength" in msg and "labelLengths[1]" in msg, msg
    assert _call(handle, "v7", d=ctc_desc(max_len=1)) == (OK,)    # cudnnCTCLoss sizes by the host lengths
    d = ctc_desc(max_len=300)
    assert _call(handle, "v8", d=d) == (BAD,) and "300" in ncudnn.cudnnGetLastErrorString()
    pd = tdesc3((T0, N0, A0))
    assert L.cudnnGetCTCLossWorkspaceSize_v8(handle, DET, d, pd, pd) == (BAD, None)


def test_host_arrays_short_or_null(handle):
    assert _call(handle, "v7", labels=[1, 2]) == (BAD,) and "labels has 2 entries" in ncudnn.cudnnGetLastErrorString()
    assert _call(handle, "v7", ll=[1]) == (BAD,) and "labelLengths" in ncudnn.cudnnGetLastErrorString()
    pd = tdesc3((T0, N0, A0))
    assert L.cudnnGetCTCLossWorkspaceSize(handle, pd, pd, None, [1, 1], [4, 4], DET, ctc_desc())[0] == BAD
    assert "labels is NULL" in ncudnn.cudnnGetLastErrorString()
    assert L.cudnnGetCTCLossWorkspaceSize(handle, pd, pd, [1, 1], [1, 1], [5, 4], DET, ctc_desc())[0] == BAD
    assert "inputLengths[0]" in ncudnn.cudnnGetLastErrorString()
    assert _call(handle, "v8", labels=None) == (S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER,)


def _ctc_functions():
    import json
    from importlib import resources

    api = json.loads(resources.files("ncudnn").joinpath("_data/cudnn_api.json").read_text())
    return {k: v for k, v in api["functions"].items() if "CTC" in k}


@pytest.mark.parametrize("name", sorted(_ctc_functions()))
def test_every_ctc_function_exists_with_the_c_parameters(name):
    import inspect

    f = getattr(ncudnn, name)
    assert getattr(L, name) is f
    c_names = [p.replace("*", " ").replace("[]", "").split()[-1] for p in _ctc_functions()[name]["params"]]
    py = list(inspect.signature(inspect.unwrap(f)).parameters)
    assert len(py) + f.n_outs == len(c_names), (py, c_names)
    assert py == [n for n in c_names if n in py] and all(n in c_names for n in py), (py, c_names)


def test_ctc_enums_have_the_c_values():
    assert ncudnn.cudnnCTCGradMode_t.CUDNN_CTC_SKIP_OOB_GRADIENTS == 1
    assert ncudnn.cudnnCTCLossAlgo_t.CUDNN_CTC_LOSS_ALGO_NON_DETERMINISTIC == 1
    assert ncudnn.cudnnLossNormalizationMode_t.CUDNN_LOSS_NORMALIZATION_SOFTMAX == 1
    assert ncudnn.cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN == 1
