"""The backend SOFTMAX and TRANSPOSE operation descriptors (issue #28): create / set / get / finalize round
trips, bad input with its documented status and a last error naming the attribute, and graphs holding
them lowered onto the IR and executed against the float64 oracle (fresh random inputs, poisoned
outputs)."""
import numpy as np
from numba import cuda

from backend_build import A, D, S, T, create, expect, finalize, get, graph, make, ok, pointwise_desc, \
    pointwise_op, set_attr, tensor
from ncudnn.testing import assert_close, random
from ncudnn.types import cudnnPointwiseMode_t as PM
from test_backend_execute_ops import first_config_or_skip, poisoned, run

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
P = "CUDNN_ATTR_OPERATION_SOFTMAX_"
X, ROWS = [2, 3, 4, 6], [2, 3, 4, 1]
PERM = A.CUDNN_ATTR_OPERATION_TRANSPOSE_PERMUTATION


def softmax_op(fin=True, x=None, y=None, **outs):
    """outs: stats / max / sum_exp / sink = (uid, dims); log2=True sets STATS_LOG2."""
    attrs = {A[P + "XDESC"]: (DESC, x or tensor(1, X)), A[P + "YDESC"]: (DESC, y or tensor(2, X))}
    names = {"stats": "STATS_DESC", "max": "MAX_DESC", "sum_exp": "SUM_EXP_DESC", "sink": "SINK_DESC"}
    for k, n in names.items():
        if k in outs:
            uid, dims = outs[k]
            attrs[A[P + n]] = (DESC, tensor(uid, dims))
    if outs.get("log2"):
        attrs[A[P + "STATS_LOG2"]] = (T.CUDNN_TYPE_BOOLEAN, True)
    return make(D.CUDNN_BACKEND_OPERATION_SOFTMAX_DESCRIPTOR, attrs, fin)


def oracle(x):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    e = np.exp(x - m)
    z = e.sum(-1, keepdims=True)
    return e / z, m, z, m + np.log(z)


def test_softmax_round_trip():
    d = softmax_op(stats=(3, ROWS), log2=True)
    assert get(d, A[P + "STATS_LOG2"], T.CUDNN_TYPE_BOOLEAN) == (1, [True])
    n, (stats,) = get(d, A[P + "STATS_DESC"], DESC, 1)
    assert n == 1 and stats.type == D.CUDNN_BACKEND_TENSOR_DESCRIPTOR and stats.finalized
    assert get(softmax_op(), A[P + "STATS_LOG2"], T.CUDNN_TYPE_BOOLEAN) == (1, [False])  # the default


def test_softmax_executes_against_the_oracle(rng):
    x = random(rng, X)
    g = graph([softmax_op()])
    assert [n.OP for n in g.state["graph"].nodes] == ["reduction", "pointwise", "pointwise", "reduction", "pointwise"]
    assert first_config_or_skip(g, "softmax").state["engine"].name == "softmax_fused"  # one kernel
    y = poisoned(X)
    run(g, {1: cuda.to_device(x), 2: y})
    assert_close(y.copy_to_host(), oracle(x)[0], "float32")


def test_softmax_with_stats_max_and_sum_exp(rng):
    x = random(rng, X)
    y, st, m, z = poisoned(X), poisoned(ROWS), poisoned(ROWS), poisoned(ROWS)
    run(graph([softmax_op(stats=(3, ROWS), max=(4, ROWS), sum_exp=(5, ROWS))]),
        {1: cuda.to_device(x), 2: y, 3: st, 4: m, 5: z})
    ry, rm, rz, rs = oracle(x)
    for got, want, name in ((y, ry, "Y"), (st, rs, "STATS"), (m, rm, "MAX"), (z, rz, "SUM_EXP")):
        assert_close(got.copy_to_host(), want, "float32", name=name)


def test_softmax_stats_in_base_two(rng):
    x = random(rng, X)
    y, st = poisoned(X), poisoned(ROWS)
    run(graph([softmax_op(stats=(3, ROWS), log2=True)]), {1: cuda.to_device(x), 2: y, 3: st})
    assert_close(st.copy_to_host(), oracle(x)[3] / np.log(2.0), "float32")
    assert_close(y.copy_to_host(), oracle(x)[0], "float32")


def test_softmax_bad_input():
    d = create(D.CUDNN_BACKEND_OPERATION_SOFTMAX_DESCRIPTOR)
    expect(set_attr(d, A[P + "XDESC"], T.CUDNN_TYPE_INT64, 1), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
           A[P + "XDESC"], "CUDNN_TYPE_BACKEND_DESCRIPTOR")
    expect(set_attr(d, A[P + "XDESC"], DESC, [tensor(1, X), tensor(7, X)]), S.CUDNN_STATUS_BAD_PARAM,
           A[P + "XDESC"], "elementCount 2")
    expect(set_attr(d, A[P + "STATS_LOG2"], T.CUDNN_TYPE_FLOAT, 1.0), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
           A[P + "STATS_LOG2"])
    ok(set_attr(d, A[P + "XDESC"], DESC, tensor(1, X)))
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "required attribute(s) not set", A[P + "YDESC"])
    expect(finalize(softmax_op(fin=False, y=tensor(2, [2, 3, 4, 5]))), S.CUDNN_STATUS_BAD_PARAM,
           A[P + "YDESC"], str(X))
    expect(finalize(softmax_op(fin=False, stats=(3, X))), S.CUDNN_STATUS_BAD_PARAM, A[P + "STATS_DESC"], str(ROWS))
    expect(finalize(softmax_op(fin=False, x=tensor(1, [6]), y=tensor(2, [6]))), S.CUDNN_STATUS_BAD_PARAM,
           A[P + "XDESC"], "at least 2 dimensions")


def test_softmax_sink_is_not_supported_when_lowered():
    g = make(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATIONGRAPH_OPS: (DESC, [softmax_op(sink=(6, [1, 3, 1, 1]))]),
        A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE: (T.CUDNN_TYPE_HANDLE, graph_handle())}, fin=False)
    expect(finalize(g), S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_BACKEND_OPERATION_SOFTMAX_DESCRIPTOR", A[P + "SINK_DESC"])


def graph_handle():
    from backend_build import handle
    return handle()


XT, PT = [2, 3, 4, 5], [0, 2, 3, 1]
YT = [XT[p] for p in PT]


def transpose_op(perm=PT, x=None, y=None, fin=True):
    return make(D.CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_TRANSPOSE_XDESC: (DESC, x or tensor(1, XT)),
        A.CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC: (DESC, y or tensor(2, [XT[p] for p in perm])),
        PERM: (T.CUDNN_TYPE_INT64, list(perm))}, fin)


def test_transpose_round_trip():
    assert get(transpose_op(), PERM, T.CUDNN_TYPE_INT64) == (4, PT)


def test_transpose_executes_against_the_oracle(rng):
    x = random(rng, XT)
    y = poisoned(YT)
    run(graph([transpose_op()]), {1: cuda.to_device(x), 2: y})
    np.testing.assert_array_equal(y.copy_to_host(), x.transpose(PT))


def test_transpose_of_a_virtual_tensor(rng):
    """relu(X) -> virtual -> transpose -> Y: the virtual side keeps its geometry, Y is seen permuted."""
    x = random(rng, XT)
    v = tensor(3, XT, virtual=True)
    relu = pointwise_op(pointwise_desc(PM.CUDNN_POINTWISE_RELU_FWD), x=tensor(1, XT), y=v)
    y = poisoned(YT)
    run(graph([relu, transpose_op(x=v)]), {1: cuda.to_device(x), 2: y})
    assert_close(y.copy_to_host(), np.maximum(x.astype(np.float64), 0).transpose(PT), "float32")


def test_transpose_whose_output_another_operation_reads(rng):
    """Y real and read by a relu: X (named by the transpose only) is the side seen through the permutation."""
    x = random(rng, XT)
    relu = pointwise_op(pointwise_desc(PM.CUDNN_POINTWISE_RELU_FWD), x=tensor(2, YT), y=tensor(3, YT))
    y, z = poisoned(YT), poisoned(YT)
    run(graph([transpose_op(), relu]), {1: cuda.to_device(x), 2: y, 3: z})
    np.testing.assert_array_equal(y.copy_to_host(), x.transpose(PT))
    assert_close(z.copy_to_host(), np.maximum(x.astype(np.float64), 0).transpose(PT), "float32")


def test_transpose_into_a_strided_output(rng):
    x = random(rng, XT)
    wide = YT[:-1] + [YT[-1] * 2]  # Y a view of every other column of a wider buffer
    strides = [wide[1] * wide[2] * wide[3], wide[2] * wide[3], wide[3], 2]
    big = poisoned(wide)
    run(graph([transpose_op(y=tensor(2, YT, strides))]), {1: cuda.to_device(x), 2: big[:, :, :, ::2]})
    out = big.copy_to_host()
    np.testing.assert_array_equal(out[..., ::2], x.transpose(PT))
    assert np.isnan(out[..., 1::2]).all(), "written beside the view"


def test_transpose_bad_input():
    d = create(D.CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR)
    expect(set_attr(d, PERM, T.CUDNN_TYPE_FLOAT, [0.0, 1.0]), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, PERM)
    expect(set_attr(d, PERM, T.CUDNN_TYPE_INT64, []), S.CUDNN_STATUS_BAD_PARAM, PERM, "elementCount 0")
    ok(set_attr(d, A.CUDNN_ATTR_OPERATION_TRANSPOSE_XDESC, DESC, tensor(1, XT)))
    ok(set_attr(d, A.CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC, DESC, tensor(2, YT)))
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "required attribute(s) not set", PERM)
    expect(finalize(transpose_op(perm=[0, 2, 2, 1], y=tensor(2, YT), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           PERM, "not a permutation")
    expect(finalize(transpose_op(y=tensor(2, XT), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           A.CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC, str(YT))


def test_transpose_between_virtual_tensors_is_not_supported():
    v1, v2 = tensor(3, XT, virtual=True), tensor(4, YT, virtual=True)
    relu = pointwise_op(pointwise_desc(PM.CUDNN_POINTWISE_RELU_FWD), x=tensor(1, XT), y=v1)
    relu2 = pointwise_op(pointwise_desc(PM.CUDNN_POINTWISE_RELU_FWD), x=v2, y=tensor(2, YT))
    g = make(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATIONGRAPH_OPS: (DESC, [relu, transpose_op(x=v1, y=v2), relu2]),
        A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE: (T.CUDNN_TYPE_HANDLE, graph_handle())}, fin=False)
    expect(finalize(g), S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR",
           "each virtual or used by another operation")
