"""Tensor, convolution, pointwise, matmul, reduction, resample and RNG descriptors: round trips and
every finalize check the reference lists."""
from fractions import Fraction

import pytest

from backend_build import A, D, DT, S, T, conv_desc, create, expect, finalize, get, make, ok, set_attr, tensor
from ncudnn.types import cudnnReduceTensorOp_t as R
from ncudnn.types import cudnnResampleMode_t as RM
from ncudnn.types import cudnnRngDistribution_t as RNG


def test_tensor_round_trip_with_defaults():
    t = tensor(42, [2, 3, 4], strides=[12, 4, 1], dtype=DT.CUDNN_DATA_HALF, alignment=8)
    assert get(t, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64) == (1, [42])
    assert get(t, A.CUDNN_ATTR_TENSOR_DATA_TYPE, T.CUDNN_TYPE_DATA_TYPE) == (1, [DT.CUDNN_DATA_HALF])
    assert get(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64) == (3, [2, 3, 4])
    assert get(t, A.CUDNN_ATTR_TENSOR_STRIDES, T.CUDNN_TYPE_INT64) == (3, [12, 4, 1])
    assert get(t, A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, T.CUDNN_TYPE_INT64) == (1, [8])
    assert get(t, A.CUDNN_ATTR_TENSOR_IS_VIRTUAL, T.CUDNN_TYPE_BOOLEAN) == (1, [False])
    assert get(t, A.CUDNN_ATTR_TENSOR_IS_BY_VALUE, T.CUDNN_TYPE_BOOLEAN) == (1, [False])
    assert get(t, A.CUDNN_ATTR_TENSOR_VECTOR_COUNT, T.CUDNN_TYPE_INT64) == (1, [1])
    assert get(t, A.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, T.CUDNN_TYPE_INT64) == (0, [])
    assert get(t, A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, T.CUDNN_TYPE_BACKEND_DESCRIPTOR) == (0, [])
    v = tensor(43, [1, 3], virtual=True)
    assert get(v, A.CUDNN_ATTR_TENSOR_IS_VIRTUAL, T.CUDNN_TYPE_BOOLEAN) == (1, [True])


def test_tensor_ragged_offset_round_trip_fills_caller_descriptor():
    off = tensor(9, [3, 1, 1, 1], dtype=DT.CUDNN_DATA_INT32)
    t = create(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)
    for name, atype, v in ((A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, 1),
                           (A.CUDNN_ATTR_TENSOR_DATA_TYPE, T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT),
                           (A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, T.CUDNN_TYPE_INT64, 4),
                           (A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, [2, 5]),
                           (A.CUDNN_ATTR_TENSOR_STRIDES, T.CUDNN_TYPE_INT64, [5, 1]),
                           (A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, T.CUDNN_TYPE_BACKEND_DESCRIPTOR, off)):
        ok(set_attr(t, name, atype, v))
    ok(finalize(t))
    mine = create(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)
    count, out = get(t, A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, T.CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, [mine])
    assert count == 1 and out[0] is mine and mine.finalized
    assert get(mine, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64) == (1, [9])
    expect(__import__("ncudnn.backend", fromlist=["x"]).cudnnBackendGetAttribute(
        t, A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, T.CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        [create(D.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)]), S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
        "CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR")


@pytest.mark.parametrize("kw, status, fragment", [
    (dict(dims=[2, 3], strides=[3]), S.CUDNN_STATUS_BAD_PARAM, "1 strides for 2 dimensions"),
    (dict(dims=[2, 0]), S.CUDNN_STATUS_BAD_PARAM, "dimension 1 is 0"),
    (dict(dims=[2, 3], strides=[3, -1]), S.CUDNN_STATUS_BAD_PARAM, "stride 1 is -1"),
    (dict(dims=[2, 3], alignment=6), S.CUDNN_STATUS_BAD_PARAM, "4-byte size of CUDNN_DATA_FLOAT"),
    (dict(dims=[2, 3], alignment=0), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT"),
    (dict(dims=[2, 3], dtype=DT.CUDNN_DATA_INT8x4), S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_DATA_INT8x4"),
    (dict(dims=[2, 3], dtype=DT.CUDNN_DATA_INT8x32, alignment=32), S.CUDNN_STATUS_NOT_SUPPORTED, "INT8x32"),
    (dict(dims=[2, 3], virtual=True, by_value=True), S.CUDNN_STATUS_BAD_PARAM, "both virtual"),
])
def test_tensor_finalize_checks(kw, status, fragment):
    t = tensor(1, fin=False, **kw)
    expect(finalize(t), status, "CUDNN_BACKEND_TENSOR_DESCRIPTOR", fragment)
    assert not t.finalized


def test_tensor_vector_count_rules():
    t = tensor(1, [2, 32], dtype=DT.CUDNN_DATA_INT8, fin=False)
    ok(set_attr(t, A.CUDNN_ATTR_TENSOR_VECTOR_COUNT, T.CUDNN_TYPE_INT64, 3))
    expect(finalize(t), S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_ATTR_TENSOR_VECTOR_COUNT", "1, 4 or 32")
    ok(set_attr(t, A.CUDNN_ATTR_TENSOR_VECTOR_COUNT, T.CUDNN_TYPE_INT64, 4))
    expect(finalize(t), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION", "must be set")
    ok(set_attr(t, A.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, T.CUDNN_TYPE_INT64, 1))
    ok(finalize(t))
    assert get(t, A.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, T.CUDNN_TYPE_INT64) == (1, [1])


def test_convolution_round_trip():
    c = conv_desc(2, pre=[1, 2], post=[1, 0], stride=[2, 1], dilation=[1, 3])
    assert get(c, A.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, T.CUDNN_TYPE_INT64) == (1, [2])
    assert get(c, A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, T.CUDNN_TYPE_INT64) == (2, [1, 2])
    assert get(c, A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, T.CUDNN_TYPE_INT64) == (2, [1, 0])
    assert get(c, A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, T.CUDNN_TYPE_INT64) == (2, [2, 1])
    assert get(c, A.CUDNN_ATTR_CONVOLUTION_DILATIONS, T.CUDNN_TYPE_INT64) == (2, [1, 3])
    assert get(c, A.CUDNN_ATTR_CONVOLUTION_CONV_MODE, T.CUDNN_TYPE_CONVOLUTION_MODE)[1][0].name == \
        "CUDNN_CROSS_CORRELATION"


@pytest.mark.parametrize("kw, attr", [
    (dict(pre=[0, 0, 0]), A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS),
    (dict(post=[0]), A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS),
    (dict(stride=[1, 1, 1]), A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES),
    (dict(dilation=[1]), A.CUDNN_ATTR_CONVOLUTION_DILATIONS),
])
def test_convolution_counts_must_equal_spatial_dims(kw, attr):
    c = conv_desc(2, fin=False, **kw)
    expect(finalize(c), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR", attr.name,
           "CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS is 2")


@pytest.mark.parametrize("kw, attr", [
    (dict(pre=[-1, 0]), A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS),
    (dict(stride=[0, 1]), A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES),
    (dict(dilation=[1, 0]), A.CUDNN_ATTR_CONVOLUTION_DILATIONS),
])
def test_convolution_value_ranges(kw, attr):
    expect(finalize(conv_desc(2, fin=False, **kw)), S.CUDNN_STATUS_BAD_PARAM, attr.name)


def test_pointwise_and_matmul_descriptors():
    pw = make(D.CUDNN_BACKEND_POINTWISE_DESCRIPTOR, {
        A.CUDNN_ATTR_POINTWISE_MODE: (T.CUDNN_TYPE_POINTWISE_MODE, 103),
        A.CUDNN_ATTR_POINTWISE_MATH_PREC: (T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT),
        A.CUDNN_ATTR_POINTWISE_ELU_ALPHA: (T.CUDNN_TYPE_DOUBLE, 0.25)})
    assert get(pw, A.CUDNN_ATTR_POINTWISE_MODE, T.CUDNN_TYPE_POINTWISE_MODE)[1][0].name == "CUDNN_POINTWISE_ELU_FWD"
    assert get(pw, A.CUDNN_ATTR_POINTWISE_ELU_ALPHA, T.CUDNN_TYPE_DOUBLE) == (1, [0.25])
    assert get(pw, A.CUDNN_ATTR_POINTWISE_SWISH_BETA, T.CUDNN_TYPE_DOUBLE) == (1, [1.0])
    m = create(D.CUDNN_BACKEND_MATMUL_DESCRIPTOR)
    expect(finalize(m), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_MATMUL_COMP_TYPE")
    ok(set_attr(m, A.CUDNN_ATTR_MATMUL_COMP_TYPE, T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT))
    ok(finalize(m))
    assert get(m, A.CUDNN_ATTR_MATMUL_PADDING_VALUE, T.CUDNN_TYPE_DOUBLE) == (1, [0.0])


def _reduction(op):
    return make(D.CUDNN_BACKEND_REDUCTION_DESCRIPTOR, {
        A.CUDNN_ATTR_REDUCTION_OPERATOR: (T.CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, op),
        A.CUDNN_ATTR_REDUCTION_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT)}, fin=False)


@pytest.mark.parametrize("op", list(R), ids=lambda r: r.name)
def test_reduction_operators(op):
    d = _reduction(op)
    if op in (R.CUDNN_REDUCE_TENSOR_ADD, R.CUDNN_REDUCE_TENSOR_MUL, R.CUDNN_REDUCE_TENSOR_MIN,
              R.CUDNN_REDUCE_TENSOR_MAX):
        ok(finalize(d))
        assert get(d, A.CUDNN_ATTR_REDUCTION_OPERATOR, T.CUDNN_TYPE_REDUCTION_OPERATOR_TYPE) == (1, [op])
    else:
        expect(finalize(d), S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_ATTR_REDUCTION_OPERATOR", op.name)


def resample(nb=2, window=None, stride=None, pre=None, post=None, mode=None, atype=T.CUDNN_TYPE_INT64, fin=True):
    attrs = {A.CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS: (T.CUDNN_TYPE_INT64, nb),
             A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS: (atype, window or [2] * nb),
             A.CUDNN_ATTR_RESAMPLE_STRIDES: (atype, stride or [2] * nb),
             A.CUDNN_ATTR_RESAMPLE_PRE_PADDINGS: (atype, pre or [0] * nb),
             A.CUDNN_ATTR_RESAMPLE_POST_PADDINGS: (atype, post or [0] * nb)}
    if mode is not None:
        attrs[A.CUDNN_ATTR_RESAMPLE_MODE] = (T.CUDNN_TYPE_RESAMPLE_MODE, mode)
    return make(D.CUDNN_BACKEND_RESAMPLE_DESCRIPTOR, attrs, fin)


def test_resample_round_trip_defaults_and_fractions():
    r = resample(atype=T.CUDNN_TYPE_FRACTION, stride=[(3, 2), (1, 1)])
    assert get(r, A.CUDNN_ATTR_RESAMPLE_MODE, T.CUDNN_TYPE_RESAMPLE_MODE) == (1, [RM.CUDNN_RESAMPLE_NEAREST])
    assert get(r, A.CUDNN_ATTR_RESAMPLE_COMP_TYPE, T.CUDNN_TYPE_DATA_TYPE) == (1, [DT.CUDNN_DATA_FLOAT])
    assert get(r, A.CUDNN_ATTR_RESAMPLE_PADDING_MODE, T.CUDNN_TYPE_PADDING_MODE)[1][0].name == "CUDNN_ZERO_PAD"
    assert get(r, A.CUDNN_ATTR_RESAMPLE_STRIDES, T.CUDNN_TYPE_FRACTION) == (2, [Fraction(3, 2), Fraction(1)])
    assert get(r, A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS, T.CUDNN_TYPE_INT64) == (2, [2, 2])
    expect(__import__("ncudnn.backend", fromlist=["x"]).cudnnBackendGetAttribute(
        r, A.CUDNN_ATTR_RESAMPLE_STRIDES, T.CUDNN_TYPE_INT64, 2), S.CUDNN_STATUS_BAD_PARAM, "3/2")
    expect(set_attr(create(D.CUDNN_BACKEND_RESAMPLE_DESCRIPTOR), A.CUDNN_ATTR_RESAMPLE_STRIDES,
                    T.CUDNN_TYPE_FRACTION, [(1, 0)]), S.CUDNN_STATUS_BAD_PARAM, "zero denominator")


def test_resample_finalize_checks():
    expect(finalize(resample(nb=2, window=[2, 2, 2], fin=False)), S.CUDNN_STATUS_NOT_SUPPORTED,
           "CUDNN_ATTR_RESAMPLE_WINDOW_DIMS", "CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS is 2")
    expect(finalize(resample(nb=2, pre=[0], fin=False)), S.CUDNN_STATUS_NOT_SUPPORTED,
           "CUDNN_ATTR_RESAMPLE_PRE_PADDINGS")
    expect(finalize(resample(mode=RM.CUDNN_RESAMPLE_BILINEAR, window=[3, 2], fin=False)),
           S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_RESAMPLE_BILINEAR")
    ok(finalize(resample(mode=RM.CUDNN_RESAMPLE_BILINEAR, fin=False)))
    expect(finalize(resample(stride=[0, 1], fin=False)), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_RESAMPLE_STRIDES")


def rng(dist, fin=False, **vals):
    attrs = {A.CUDNN_ATTR_RNG_DISTRIBUTION: (T.CUDNN_TYPE_RNG_DISTRIBUTION, dist)}
    for k, v in vals.items():
        attrs[A[f"CUDNN_ATTR_RNG_{k.upper()}"]] = (T.CUDNN_TYPE_DOUBLE, v)
    return make(D.CUDNN_BACKEND_RNG_DESCRIPTOR, attrs, fin)


def test_rng_descriptor_checks():
    expect(finalize(rng(RNG.CUDNN_RNG_DISTRIBUTION_NORMAL)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_RNG_NORMAL_DIST_STANDARD_DEVIATION", "negative")
    d = rng(RNG.CUDNN_RNG_DISTRIBUTION_NORMAL, normal_dist_mean=0.5, normal_dist_standard_deviation=2.0, fin=True)
    assert get(d, A.CUDNN_ATTR_RNG_NORMAL_DIST_MEAN, T.CUDNN_TYPE_DOUBLE) == (1, [0.5])
    expect(finalize(rng(RNG.CUDNN_RNG_DISTRIBUTION_UNIFORM, uniform_dist_minimum=2.0, uniform_dist_maximum=1.0)),
           S.CUDNN_STATUS_BAD_PARAM, "below minimum")
    ok(finalize(rng(RNG.CUDNN_RNG_DISTRIBUTION_UNIFORM)))
    expect(finalize(rng(RNG.CUDNN_RNG_DISTRIBUTION_BERNOULLI, bernoulli_dist_probability=-0.1)),
           S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY")
    expect(finalize(rng(RNG.CUDNN_RNG_DISTRIBUTION_BERNOULLI)), S.CUDNN_STATUS_BAD_PARAM, "must be set")
    d = rng(RNG.CUDNN_RNG_DISTRIBUTION_BERNOULLI, bernoulli_dist_probability=0.3, fin=True)
    assert get(d, A.CUDNN_ATTR_RNG_DISTRIBUTION, T.CUDNN_TYPE_RNG_DISTRIBUTION) == (1, [RNG.CUDNN_RNG_DISTRIBUTION_BERNOULLI])


def test_fraction_scalar_pair_and_fraction_objects():
    r = create(D.CUDNN_BACKEND_RESAMPLE_DESCRIPTOR)
    ok(set_attr(r, A.CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS, T.CUDNN_TYPE_INT64, 1))
    ok(__import__("ncudnn.backend", fromlist=["x"]).cudnnBackendSetAttribute(
        r, A.CUDNN_ATTR_RESAMPLE_STRIDES, T.CUDNN_TYPE_FRACTION, 1, (5, 2)))
    for name in (A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS, A.CUDNN_ATTR_RESAMPLE_PRE_PADDINGS,
                 A.CUDNN_ATTR_RESAMPLE_POST_PADDINGS):
        ok(set_attr(r, name, T.CUDNN_TYPE_FRACTION, [Fraction(1, 1)]))
    ok(finalize(r))
    assert get(r, A.CUDNN_ATTR_RESAMPLE_STRIDES, T.CUDNN_TYPE_FRACTION) == (1, [Fraction(5, 2)])
