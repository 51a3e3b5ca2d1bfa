"""Operation descriptors other than convolution: pointwise, matmul, reduction, genstats, BN finalize,
BN backward weights, norm forward/backward, resample forward/backward, concat, signal, reshape, RNG,
paged cache load, block-scale quantize/dequantize. Success cases and each documented BAD_PARAM /
NOT_SUPPORTED, with the attribute named."""
import pytest

from backend_build import (A, D, DT, S, T, create, expect, finalize, get, make, ok, pointwise_desc, pointwise_op,
                           set_attr, tensor)
from ncudnn.types import cudnnBackendNormFwdPhase_t as PH
from ncudnn.types import cudnnBackendNormMode_t as NM
from ncudnn.types import cudnnPointwiseMode_t as P

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
PW = D.CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR


# ------------------------------------------------------------------------------------ pointwise
def test_pointwise_unary_binary_ternary_backward():
    x, b, y = tensor(1, [2, 3, 4]), tensor(2, [1, 3, 1]), tensor(3, [2, 3, 4])
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ADD), x=x, b=b, y=y)
    assert op.state["pointwise"]["arity"] == 2
    assert get(op, A.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, T.CUDNN_TYPE_FLOAT) == (1, [1.0])
    assert get(op, A.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, T.CUDNN_TYPE_FLOAT) == (1, [1.0])
    pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_RELU_FWD), x=x, y=y)
    mask = tensor(4, [2, 3, 4], dtype=DT.CUDNN_DATA_BOOLEAN)
    pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_BINARY_SELECT), x=x, b=tensor(5, [2, 3, 4]), t=mask, y=y)
    pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_RELU_BWD), x=x, dy=tensor(6, [2, 3, 4]), dx=tensor(7, [2, 3, 4]))


@pytest.mark.parametrize("mode, tensors, attr, fragment", [
    (P.CUDNN_POINTWISE_ADD, "xy", "BDESC", "required by CUDNN_POINTWISE_ADD"),
    (P.CUDNN_POINTWISE_EXP, "xby", "BDESC", "must not be set"),
    (P.CUDNN_POINTWISE_BINARY_SELECT, "xby", "TDESC", "required"),
    (P.CUDNN_POINTWISE_RELU_BWD, "xy", "DYDESC", "required"),
    (P.CUDNN_POINTWISE_RELU_FWD, "x", "YDESC", "required"),
])
def test_pointwise_ports_by_mode(mode, tensors, attr, fragment):
    shapes = {k: tensor(i + 1, [2, 3]) for i, k in enumerate(tensors)}
    op = pointwise_op(pointwise_desc(mode), fin=False, **shapes)
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, PW.name, f"CUDNN_ATTR_OPERATION_POINTWISE_{attr}", fragment)


def test_pointwise_shape_rules():
    y = tensor(3, [2, 3, 4])
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ADD), x=tensor(1, [2, 3, 4]), b=tensor(2, [2, 2, 4]),
                      y=y, fin=False)
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_POINTWISE_BDESC", "broadcast")
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ABS), x=tensor(1, [2, 3]), y=y, fin=False)
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_POINTWISE_XDESC", "2 dimensions")
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_BINARY_SELECT), x=tensor(1, [2, 3, 4]), b=tensor(2, [1, 3, 4]),
                      t=tensor(4, [2, 3, 4]), y=y, fin=False)
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_POINTWISE_BDESC", "does not broadcast")
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_GEN_INDEX, extra={
        A.CUDNN_ATTR_POINTWISE_AXIS: (T.CUDNN_TYPE_INT64, 3)}), x=tensor(1, [2, 3, 4]), y=y, fin=False)
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_POINTWISE_AXIS 3")
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_EXP), x=tensor(1, [2, 3, 4]), y=y, fin=False)
    ok(set_attr(op, A.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, T.CUDNN_TYPE_FLOAT, 2.0))
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2")


# -------------------------------------------------------------------------------------- matmul
def matmul(a, b, c, batch_count=None, fin=True):
    mm = make(D.CUDNN_BACKEND_MATMUL_DESCRIPTOR, {A.CUDNN_ATTR_MATMUL_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, 0)})
    attrs = {A.CUDNN_ATTR_OPERATION_MATMUL_ADESC: (DESC, tensor(1, a)), A.CUDNN_ATTR_OPERATION_MATMUL_BDESC:
             (DESC, tensor(2, b)), A.CUDNN_ATTR_OPERATION_MATMUL_CDESC: (DESC, tensor(3, c)),
             A.CUDNN_ATTR_OPERATION_MATMUL_DESC: (DESC, mm)}
    if batch_count is not None:
        attrs[A.CUDNN_ATTR_OPERATION_MATMUL_IRREGULARLY_STRIDED_BATCH_COUNT] = (T.CUDNN_TYPE_INT64, batch_count)
    return make(D.CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, attrs, fin)


def test_matmul_shapes_and_broadcast():
    op = matmul([4, 5], [5, 6], [4, 6])
    assert op.state["matmul"] == {"m": 4, "n": 6, "k": 5, "batch": ()}
    assert get(op, A.CUDNN_ATTR_OPERATION_MATMUL_IRREGULARLY_STRIDED_BATCH_COUNT, T.CUDNN_TYPE_INT64) == (1, [1])
    matmul([3, 1, 4, 2, 5], [1, 2, 2, 5, 6], [3, 2, 4, 2, 6])


@pytest.mark.parametrize("a, b, c, count, status, fragment", [
    ([5], [5, 6], [4, 6], None, S.CUDNN_STATUS_NOT_SUPPORTED, "at least 2"),
    ([4, 5], [4, 6], [4, 6], None, S.CUDNN_STATUS_BAD_PARAM, "its K (4)"),
    ([4, 5], [5, 6], [4, 7], None, S.CUDNN_STATUS_BAD_PARAM, "[..., M, N]"),
    ([2, 4, 5], [3, 5, 6], [3, 4, 6], None, S.CUDNN_STATUS_BAD_PARAM, "batch dimension 0"),
    ([2, 4, 5], [5, 6], [2, 4, 6], None, S.CUDNN_STATUS_BAD_PARAM, "must agree"),
    ([4, 5], [5, 6], [4, 6], -1, S.CUDNN_STATUS_BAD_PARAM, "negative"),
    ([2, 4, 5], [2, 5, 6], [2, 4, 6], 3, S.CUDNN_STATUS_BAD_PARAM, "one or the other"),
])
def test_matmul_finalize_checks(a, b, c, count, status, fragment):
    expect(finalize(matmul(a, b, c, count, fin=False)), status, "CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR", fragment)


# ----------------------------------------------------------------------------------- reduction
def reduction_op(xd, yd, fin=True):
    rd = make(D.CUDNN_BACKEND_REDUCTION_DESCRIPTOR, {
        A.CUDNN_ATTR_REDUCTION_OPERATOR: (T.CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 0),
        A.CUDNN_ATTR_REDUCTION_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, 0)})
    return make(D.CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_REDUCTION_XDESC: (DESC, tensor(1, xd)),
        A.CUDNN_ATTR_OPERATION_REDUCTION_YDESC: (DESC, tensor(2, yd)),
        A.CUDNN_ATTR_OPERATION_REDUCTION_DESC: (DESC, rd)}, fin)


def test_reduction_op():
    assert reduction_op([4, 6, 8], [4, 1, 1]).state["reduced_axes"] == (1, 2)
    reduction_op([4, 6], [4, 3])  # a factor (grouped-query attention)
    expect(finalize(reduction_op([4, 6, 8], [4, 1], fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_REDUCTION_YDESC", "2 dimensions")
    expect(finalize(reduction_op([4, 6], [4, 4], fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_REDUCTION_YDESC", "dimension 1 is 4")
    rd_wrong = create(D.CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)
    expect(set_attr(rd_wrong, A.CUDNN_ATTR_OPERATION_REDUCTION_DESC, DESC, tensor(9, [1])),
           S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "CUDNN_BACKEND_REDUCTION_DESCRIPTOR")


# --------------------------------------------------------------------------- statistics / norms
def genstats(x, s, q, fin=True):
    return make(D.CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_GENSTATS_MODE: (T.CUDNN_TYPE_GENSTATS_MODE, 0),
        A.CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC: (T.CUDNN_TYPE_DATA_TYPE, 0),
        A.CUDNN_ATTR_OPERATION_GENSTATS_XDESC: (DESC, tensor(1, x)),
        A.CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC: (DESC, tensor(2, s)),
        A.CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC: (DESC, tensor(3, q))}, fin)


def test_genstats():
    genstats([2, 8, 4, 4], [1, 8, 1, 1], [1, 8, 1, 1])
    expect(finalize(genstats([2, 8, 4, 4], [1, 7, 1, 1], [1, 8, 1, 1], fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC", "[1, 8, 1, 1]")
    expect(finalize(genstats([2, 8, 4, 4], [1, 8, 1], [1, 8, 1, 1], fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC", "3 dimensions")


def bn_finalize(c=8, bad=None, fin=True, running=("PREV_RUNNING_MEAN_DESC", "PREV_RUNNING_VAR_DESC",
                                                 "UPDATED_RUNNING_MEAN_DESC", "UPDATED_RUNNING_VAR_DESC")):
    F = "CUDNN_ATTR_OPERATION_BN_FINALIZE_"
    attrs = {A[F + "STATS_MODE"]: (T.CUDNN_TYPE_BN_FINALIZE_STATS_MODE, 0),
             A[F + "MATH_PREC"]: (T.CUDNN_TYPE_DATA_TYPE, 0)}
    for i, n in enumerate(["Y_SUM_DESC", "Y_SQ_SUM_DESC", "SCALE_DESC", "BIAS_DESC", "SAVED_MEAN_DESC",
                           "SAVED_INV_STD_DESC", "EQ_SCALE_DESC", "EQ_BIAS_DESC"] + list(running)):
        attrs[A[F + n]] = (DESC, tensor(10 + i, [1, c - (n == bad), 1, 1]))
    for i, n in enumerate(("ACCUM_COUNT_DESC", "EPSILON_DESC", "EXP_AVERATE_FACTOR_DESC")):
        attrs[A[F + n]] = (DESC, tensor(30 + i, [1, 1, 1, 1 + (n == bad)], by_value=True))
    return make(D.CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR, attrs, fin)


def test_bn_finalize_running_statistics_go_together():
    op = bn_finalize(running=("PREV_RUNNING_MEAN_DESC",), fin=False)
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_VAR_DESC",
           "all four or none")
    bn_finalize(running=())


def test_bn_finalize():
    bn_finalize()
    expect(finalize(bn_finalize(bad="EQ_BIAS_DESC", fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_BN_FINALIZE_EQ_BIAS_DESC")
    expect(finalize(bn_finalize(bad="PREV_RUNNING_MEAN_DESC", fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_MEAN_DESC")
    expect(finalize(bn_finalize(bad="EPSILON_DESC", fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_BN_FINALIZE_EPSILON_DESC", "scalar")


def bn_bwd_weights(dy=(2, 8, 4, 4), fin=True):
    W = "CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_"
    attrs = {A[W + "MATH_PREC"]: (T.CUDNN_TYPE_DATA_TYPE, 0), A[W + "X_DESC"]: (DESC, tensor(1, [2, 8, 4, 4])),
             A[W + "DY_DESC"]: (DESC, tensor(2, list(dy)))}
    for i, n in enumerate(("MEAN_DESC", "INVSTD_DESC", "BN_SCALE_DESC", "DBN_SCALE_DESC", "DBN_BIAS_DESC",
                           "EQ_DY_SCALE_DESC", "EQ_X_SCALE_DESC", "EQ_BIAS")):
        attrs[A[W + n]] = (DESC, tensor(10 + i, [1, 8, 1, 1]))
    return make(D.CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR, attrs, fin)


def test_bn_bwd_weights():
    bn_bwd_weights()
    expect(finalize(bn_bwd_weights(dy=(2, 8, 4, 5), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC")


def norm_fwd(mode=NM.CUDNN_LAYER_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING, x=(4, 8, 2, 2), scale=None, mean=None,
             eps_by_value=True, y=None, fin=True):
    N = "CUDNN_ATTR_OPERATION_NORM_FWD_"
    layer = mode in (NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM)
    scale = scale or ([1] + list(x[1:]) if layer else [1, x[1], 1, 1])
    mean = mean or ([x[0], 1, 1, 1] if layer else [1, x[1], 1, 1])
    attrs = {A[N + "MODE"]: (T.CUDNN_TYPE_NORM_MODE, mode), A[N + "PHASE"]: (T.CUDNN_TYPE_NORM_FWD_PHASE, phase),
             A[N + "XDESC"]: (DESC, tensor(1, list(x))), A[N + "YDESC"]: (DESC, tensor(2, list(y or x))),
             A[N + "SCALE_DESC"]: (DESC, tensor(3, scale)), A[N + "BIAS_DESC"]: (DESC, tensor(4, scale)),
             A[N + "EPSILON_DESC"]: (DESC, tensor(5, [1, 1, 1, 1], by_value=eps_by_value)),
             A[N + "MEAN_DESC"]: (DESC, tensor(6, mean)), A[N + "INV_VARIANCE_DESC"]: (DESC, tensor(7, mean))}
    return make(D.CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR, attrs, fin)


def test_norm_forward():
    for mode in (NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM, NM.CUDNN_BATCH_NORM, NM.CUDNN_INSTANCE_NORM):
        if mode != NM.CUDNN_INSTANCE_NORM:
            norm_fwd(mode)
    norm_fwd(NM.CUDNN_INSTANCE_NORM, mean=[4, 8, 1, 1])
    norm_fwd(NM.CUDNN_LAYER_NORM, PH.CUDNN_NORM_FWD_INFERENCE)
    expect(finalize(norm_fwd(NM.CUDNN_GROUP_NORM, fin=False)), S.CUDNN_STATUS_INTERNAL_ERROR, "CUDNN_GROUP_NORM")
    expect(finalize(norm_fwd(NM.CUDNN_BATCH_NORM, PH.CUDNN_NORM_FWD_INFERENCE, fin=False)),
           S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_ATTR_OPERATION_NORM_FWD_PHASE")
    expect(finalize(norm_fwd(y=(4, 8, 2, 3), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_NORM_FWD_YDESC")
    expect(finalize(norm_fwd(NM.CUDNN_BATCH_NORM, scale=[1, 7, 1, 1], fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC")
    expect(finalize(norm_fwd(mean=[1, 8, 1, 1], fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC")
    expect(finalize(norm_fwd(eps_by_value=False, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC", "IS_BY_VALUE")


def test_norm_forward_adaptive():
    """CUDNN_ADA_LAYER_NORM: SCALE / BIAS one row per batch entry ([B, 1, C] on X [B, S, C]), statistics
    [B, S, 1]; any other SCALE or statistics shape is BAD_PARAM naming the attribute."""
    ada = NM.CUDNN_ADA_LAYER_NORM
    norm_fwd(ada, x=(2, 3, 8), scale=[2, 1, 8], mean=[2, 3, 1])
    norm_fwd(ada, PH.CUDNN_NORM_FWD_INFERENCE, x=(2, 3, 8), scale=[2, 1, 8], mean=[2, 3, 1])
    expect(finalize(norm_fwd(ada, x=(2, 3, 8), scale=[2, 2, 8], mean=[2, 3, 1], fin=False)),
           S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC")
    expect(finalize(norm_fwd(ada, x=(2, 3, 8), scale=[2, 1, 8], mean=[2, 1, 1], fin=False)),
           S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC")


def norm_bwd(with_stats=True, with_eps=False, dx=(4, 8, 2, 2), fin=True):
    N = "CUDNN_ATTR_OPERATION_NORM_BWD_"
    x = [4, 8, 2, 2]
    attrs = {A[N + "MODE"]: (T.CUDNN_TYPE_NORM_MODE, NM.CUDNN_BATCH_NORM), A[N + "XDESC"]: (DESC, tensor(1, x)),
             A[N + "DYDESC"]: (DESC, tensor(2, x)), A[N + "DXDESC"]: (DESC, tensor(3, list(dx))),
             A[N + "SCALE_DESC"]: (DESC, tensor(4, [1, 8, 1, 1])), A[N + "DSCALE_DESC"]: (DESC, tensor(5, [1, 8, 1, 1])),
             A[N + "DBIAS_DESC"]: (DESC, tensor(6, [1, 8, 1, 1]))}
    if with_stats:
        attrs[A[N + "MEAN_DESC"]] = (DESC, tensor(7, [1, 8, 1, 1]))
        attrs[A[N + "INV_VARIANCE_DESC"]] = (DESC, tensor(8, [1, 8, 1, 1]))
    if with_eps:
        attrs[A[N + "EPSILON_DESC"]] = (DESC, tensor(9, [1, 1, 1, 1], by_value=True))
    return make(D.CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR, attrs, fin)


def test_norm_backward():
    norm_bwd()
    norm_bwd(with_stats=False, with_eps=True)
    expect(finalize(norm_bwd(with_stats=False, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_NORM_BWD_EPSILON_DESC")
    expect(finalize(norm_bwd(dx=(4, 8, 2, 1), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC")


# ------------------------------------------------------------------------------------ resample
def resample_desc(window=(2, 2), stride=(2, 2), pre=(0, 0), post=(0, 0)):
    return make(D.CUDNN_BACKEND_RESAMPLE_DESCRIPTOR, {
        A.CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS: (T.CUDNN_TYPE_INT64, 2),
        A.CUDNN_ATTR_RESAMPLE_MODE: (T.CUDNN_TYPE_RESAMPLE_MODE, 3),
        A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS: (T.CUDNN_TYPE_INT64, list(window)),
        A.CUDNN_ATTR_RESAMPLE_STRIDES: (T.CUDNN_TYPE_INT64, list(stride)),
        A.CUDNN_ATTR_RESAMPLE_PRE_PADDINGS: (T.CUDNN_TYPE_INT64, list(pre)),
        A.CUDNN_ATTR_RESAMPLE_POST_PADDINGS: (T.CUDNN_TYPE_INT64, list(post))})


def resample_fwd(y=(2, 3, 4, 4), idx=None, fin=True):
    F = "CUDNN_ATTR_OPERATION_RESAMPLE_FWD_"
    attrs = {A[F + "DESC"]: (DESC, resample_desc(pre=(1, 0), post=(0, 1))),
             A[F + "XDESC"]: (DESC, tensor(1, [2, 3, 7, 7])), A[F + "YDESC"]: (DESC, tensor(2, list(y)))}
    if idx:
        attrs[A[F + "IDXDESC"]] = (DESC, tensor(3, list(idx), dtype=DT.CUDNN_DATA_INT8))
    return make(D.CUDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR, attrs, fin)


def test_resample_forward():
    op = resample_fwd(idx=(2, 3, 4, 4))
    assert get(op, A.CUDNN_ATTR_OPERATION_RESAMPLE_FWD_ALPHA, T.CUDNN_TYPE_DOUBLE) == (1, [1.0])
    assert get(op, A.CUDNN_ATTR_OPERATION_RESAMPLE_FWD_BETA, T.CUDNN_TYPE_DOUBLE) == (1, [0.0])
    expect(finalize(resample_fwd(y=(2, 3, 4, 3), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_RESAMPLE_FWD_YDESC", "padding and stride give 4")
    expect(finalize(resample_fwd(idx=(2, 3, 3, 4), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_RESAMPLE_FWD_IDXDESC")


def test_resample_backward():
    B = "CUDNN_ATTR_OPERATION_RESAMPLE_BWD_"
    attrs = {A[B + "DESC"]: (DESC, resample_desc()), A[B + "DXDESC"]: (DESC, tensor(1, [2, 3, 8, 8])),
             A[B + "DYDESC"]: (DESC, tensor(2, [2, 3, 4, 4])), A[B + "XDESC"]: (DESC, tensor(3, [2, 3, 8, 8]))}
    make(D.CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR, attrs)
    attrs[A[B + "YDESC"]] = (DESC, tensor(4, [2, 3, 4, 5]))
    expect(finalize(make(D.CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR, attrs, fin=False)),
           S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATION_RESAMPLE_BWD_YDESC")


# ------------------------------------------------------------------------- data movement, misc
def concat(axis=1, ins=((2, 3, 4), (2, 5, 4)), out=(2, 8, 4), inplace=None, fin=True):
    attrs = {A.CUDNN_ATTR_OPERATION_CONCAT_AXIS: (T.CUDNN_TYPE_INT64, axis),
             A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS: (DESC, [tensor(i + 1, list(s)) for i, s in enumerate(ins)]),
             A.CUDNN_ATTR_OPERATION_CONCAT_OUTPUT_DESC: (DESC, tensor(9, list(out)))}
    if inplace is not None:
        attrs[A.CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX] = (T.CUDNN_TYPE_INT64, inplace)
    return make(D.CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR, attrs, fin)


def test_concat():
    op = concat(inplace=1)
    assert get(op, A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS, DESC)[0] == 2
    assert get(op, A.CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX, T.CUDNN_TYPE_INT64) == (1, [1])
    for kw, attr, frag in ((dict(axis=3), "AXIS", "not a dimension"),
                           (dict(out=(2, 9, 4)), "OUTPUT_DESC", "sum to 8"),
                           (dict(ins=((2, 3, 4), (2, 5, 5))), "INPUT_DESCS", "dimension 2"),
                           (dict(inplace=2), "INPLACE_INDEX", "not an index")):
        expect(finalize(concat(fin=False, **kw)), S.CUDNN_STATUS_BAD_PARAM, f"CUDNN_ATTR_OPERATION_CONCAT_{attr}", frag)


def test_signal_and_reshape():
    G = "CUDNN_ATTR_OPERATION_SIGNAL_"
    attrs = {A[G + "MODE"]: (T.CUDNN_TYPE_SIGNAL_MODE, 0), A[G + "VALUE"]: (T.CUDNN_TYPE_INT64, 7),
             A[G + "FLAGDESC"]: (DESC, tensor(1, [1], dtype=DT.CUDNN_DATA_INT64)),
             A[G + "XDESC"]: (DESC, tensor(2, [2, 3])), A[G + "YDESC"]: (DESC, tensor(3, [2, 3]))}
    op = make(D.CUDNN_BACKEND_OPERATION_SIGNAL_DESCRIPTOR, attrs)
    assert get(op, A[G + "VALUE"], T.CUDNN_TYPE_INT64) == (1, [7])
    attrs[A[G + "YDESC"]] = (DESC, tensor(3, [3, 2]))
    expect(finalize(make(D.CUDNN_BACKEND_OPERATION_SIGNAL_DESCRIPTOR, attrs, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_SIGNAL_YDESC")
    r = {A.CUDNN_ATTR_OPERATION_RESHAPE_XDESC: (DESC, tensor(1, [2, 3, 4])),
         A.CUDNN_ATTR_OPERATION_RESHAPE_YDESC: (DESC, tensor(2, [6, 4]))}
    op = make(D.CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, r)
    assert get(op, A.CUDNN_ATTR_OPERATION_RESHAPE_MODE, T.CUDNN_TYPE_RESHAPE_MODE)[1][0].name == "CUDNN_RESHAPE_LOGICAL"
    r[A.CUDNN_ATTR_OPERATION_RESHAPE_YDESC] = (DESC, tensor(2, [6, 5]))
    expect(finalize(make(D.CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, r, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_RESHAPE_YDESC", "30 elements")


def test_rng_operation_seed_and_offset():
    rng = make(D.CUDNN_BACKEND_RNG_DESCRIPTOR, {
        A.CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY: (T.CUDNN_TYPE_DOUBLE, 0.5)})
    attrs = {A.CUDNN_ATTR_OPERATION_RNG_DESC: (DESC, rng), A.CUDNN_ATTR_OPERATION_RNG_YDESC: (DESC, tensor(1, [4, 4])),
             A.CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC: (DESC, tensor(2, [1, 1], dtype=DT.CUDNN_DATA_INT64))}
    op = make(D.CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, attrs)
    assert get(op, A.CUDNN_ATTR_OPERATION_RNG_SEED, T.CUDNN_TYPE_INT64) == (1, [0])
    attrs[A.CUDNN_ATTR_OPERATION_RNG_SEED] = (DESC, tensor(3, [1, 1], dtype=DT.CUDNN_DATA_INT64))
    make(D.CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, attrs)
    attrs[A.CUDNN_ATTR_OPERATION_RNG_SEED] = (DESC, tensor(3, [1, 2], dtype=DT.CUDNN_DATA_INT64))
    expect(finalize(make(D.CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, attrs, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_RNG_SEED", "must be 1")
    attrs[A.CUDNN_ATTR_OPERATION_RNG_SEED] = (T.CUDNN_TYPE_INT64, 1234)
    attrs[A.CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC] = (DESC, tensor(2, [1, 1], strides=[2, 1]))
    expect(finalize(make(D.CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, attrs, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC")


def paged(y_virtual=True, table_dtype=DT.CUDNN_DATA_INT32, seq=(2, 1, 1, 1), fin=True):
    G = "CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_"
    return make(D.CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR, {
        A[G + "YDESC"]: (DESC, tensor(1, [2, 4, 16, 8], virtual=y_virtual)),
        A[G + "CONTAINER_DESC"]: (DESC, tensor(2, [10, 4, 4, 8])),
        A[G + "PAGE_TABLE_DESC"]: (DESC, tensor(3, [2, 1, 4, 1], dtype=table_dtype)),
        A[G + "SEQUENCE_DESC"]: (DESC, tensor(4, list(seq), dtype=DT.CUDNN_DATA_INT32))}, fin)


def test_paged_cache_load():
    paged()
    expect(finalize(paged(y_virtual=False, fin=False)), S.CUDNN_STATUS_BAD_PARAM, "PAGED_CACHE_LOAD_YDESC", "virtual")
    expect(finalize(paged(table_dtype=DT.CUDNN_DATA_INT64, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "PAGE_TABLE_DESC", "INT32")
    expect(finalize(paged(seq=(3, 1, 1, 1), fin=False)), S.CUDNN_STATUS_BAD_PARAM, "SEQUENCE_DESC")


def block_scale(kind, x_dtype, y_dtype, s_dtype, scale_dims=(4, 2), block=16, fin=True):
    Q = "QUANTIZE" if kind == D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR else "DEQUANTIZE"
    p = f"CUDNN_ATTR_OPERATION_BLOCK_SCALE_{Q}_"
    return make(kind, {A[p + "XDESC"]: (DESC, tensor(1, [4, 32], dtype=x_dtype, alignment=16)),
                       A[p + "YDESC"]: (DESC, tensor(2, [4, 32], dtype=y_dtype, alignment=16)),
                       A[p + "SCALE_DESC"]: (DESC, tensor(3, list(scale_dims), dtype=s_dtype, alignment=16)),
                       A[p + "MATH_PREC"]: (T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT),
                       A[p + "BLOCK_SIZE"]: (T.CUDNN_TYPE_INT32, block)}, fin)


def test_block_scale_quantize_and_dequantize():
    Qd, DQd = D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR, D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR
    F, E4, E8 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FP8_E8M0
    op = block_scale(Qd, F, E4, E8)
    assert get(op, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE, T.CUDNN_TYPE_INT32) == (1, [16])
    block_scale(DQd, E4, F, E8)
    expect(finalize(block_scale(Qd, F, E4, E8, scale_dims=(4, 3), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC")
    expect(finalize(block_scale(Qd, F, E4, DT.CUDNN_DATA_FLOAT, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC", "cannot scale")
    expect(finalize(block_scale(DQd, F, F, E8, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC", "not a block-scaled")
