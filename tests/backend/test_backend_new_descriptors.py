"""The operation descriptors ncudnn creates and checks but no engine runs (issue #28): DIAGONAL_BAND_MASK,
EXPAND_BAND_MATRIX, CONTRACT_BAND_MATRIX, MOE_GROUPED_MATMUL and MOE_GROUPED_MATMUL_BWD. Every documented
attribute set and read back, finalize checking shapes and types (BAD_PARAM naming the attribute), and an
operation graph holding one refused with NOT_SUPPORTED naming the operation (0 engine configs)."""
import pytest

from backend_build import A, D, DT, S, T, create, expect, finalize, get, handle, make, set_attr, tensor
from ncudnn.types import cudnnMoeGroupedMatmulMode_t as MOE
from ncudnn.types import cudnnPointwiseMode_t as PM

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
I32 = DT.CUDNN_DATA_INT32
M, E, C = ("CUDNN_ATTR_OPERATION_DIAGONAL_BAND_MASK_", "CUDNN_ATTR_OPERATION_EXPAND_BAND_MATRIX_",
           "CUDNN_ATTR_OPERATION_CONTRACT_BAND_MATRIX_")
G, GB = "CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_", "CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_"
SCORES = [1, 2, 3, 4]


def t(uid, dims, dtype=DT.CUDNN_DATA_FLOAT):
    return (DESC, tensor(uid, dims, dtype=dtype))


def band_mask(**over):
    attrs = {A[M + "XDESC"]: t(1, SCORES), A[M + "YDESC"]: t(2, SCORES), A[M + "SEQ_LEN_QDESC"]: t(3, [1, 1, 1, 1], I32),
             A[M + "SEQ_LEN_KVDESC"]: t(4, [1, 1, 1, 1], I32), A[M + "LEFT_BOUND_DESC"]: t(5, [1, 1, 1, 1], I32),
             A[M + "SHIFT_RIGHT_BOUND_DESC"]: t(6, [1, 1, 1, 1], I32), A[M + "BDESC"]: t(7, [1, 1, 1, 1]),
             A[M + "CU_SEQ_LEN_QDESC"]: t(8, [2, 1, 1, 1], I32), A[M + "CU_SEQ_LEN_KVDESC"]: t(9, [2, 1, 1, 1], I32),
             A[M + "COMPARISON_MODE"]: (T.CUDNN_TYPE_POINTWISE_MODE, PM.CUDNN_POINTWISE_CMP_LE)}
    attrs.update({A[M + k]: v for k, v in over.items()})
    return D.CUDNN_BACKEND_OPERATION_DIAGONAL_BAND_MASK_DESCRIPTOR, attrs


def expand_band(**over):
    attrs = {A[E + "XDESC"]: t(1, [1, 2, 3, 4]), A[E + "YDESC"]: t(2, [1, 2, 3, 8]),
             A[E + "LOWER_BANDWIDTH"]: (T.CUDNN_TYPE_INT64, 1), A[E + "UPPER_BANDWIDTH"]: (T.CUDNN_TYPE_INT64, 2),
             A[E + "AXIS"]: (T.CUDNN_TYPE_INT64, 3), A[E + "PAD_VALUE"]: (T.CUDNN_TYPE_FLOAT, -1.5),
             A[E + "KV_TOKEN_OFFSET_DESC"]: t(3, [1, 1, 1, 1], I32), A[E + "SPECULATIVE_MASK_DESC"]: t(4, [1, 1, 3, 3])}
    attrs.update({A[E + k]: v for k, v in over.items()})
    return D.CUDNN_BACKEND_OPERATION_EXPAND_BAND_MATRIX_DESCRIPTOR, attrs


def contract_band(**over):
    attrs = {A[C + "XDESC"]: t(1, [1, 2, 3, 8]), A[C + "YDESC"]: t(2, [1, 2, 3, 4]),
             A[C + "LOWER_BANDWIDTH"]: (T.CUDNN_TYPE_INT64, 1), A[C + "UPPER_BANDWIDTH"]: (T.CUDNN_TYPE_INT64, 2),
             A[C + "AXIS"]: (T.CUDNN_TYPE_INT64, 3), A[C + "PAD_VALUE"]: (T.CUDNN_TYPE_DOUBLE, 0.25),
             A.CUDNN_ATTR_OPERATION_CONTRACT_BAND_MAX_TOKEN_VALUE: (T.CUDNN_TYPE_INT64, 64)}
    attrs.update({A[C + k]: v for k, v in over.items()})
    return D.CUDNN_BACKEND_OPERATION_CONTRACT_BAND_MATRIX_DESCRIPTOR, attrs


def moe(**over):
    attrs = {A[G + "MODE"]: (T.CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE, MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_SCATTER),
             A[G + "MATH_PREC"]: (T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT),
             A[G + "TOKEN_DESC"]: t(1, [1, 6, 4]), A[G + "WEIGHT_DESC"]: t(2, [2, 4, 5]),
             A[G + "FIRST_TOKEN_OFFSET_DESC"]: t(3, [2, 1, 1], I32), A[G + "OUTPUT_DESC"]: t(4, [1, 6, 5]),
             A[G + "TOKEN_INDEX_DESC"]: t(5, [1, 6, 1], I32), A[G + "TOKEN_KS_DESC"]: t(6, [1, 6, 1], I32),
             A[G + "TOP_K"]: (T.CUDNN_TYPE_INT64, 1)}
    attrs.update({A[G + k]: v for k, v in over.items()})
    return D.CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR, attrs


def moe_bwd(**over):
    attrs = {A[GB + "MATH_PREC"]: (T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT), A[GB + "TOKEN_DESC"]: t(1, [1, 6, 4]),
             A[GB + "DWEIGHT_DESC"]: t(2, [2, 4, 5]), A[GB + "FIRST_TOKEN_OFFSET_DESC"]: t(3, [2, 1, 1], I32),
             A[GB + "DOUTPUT_DESC"]: t(4, [1, 6, 5])}
    attrs.update({A[GB + k]: v for k, v in over.items()})
    return D.CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR, attrs


BUILDERS = [band_mask, expand_band, contract_band, moe, moe_bwd]


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_every_attribute_round_trips(build):
    dtype, attrs = build()
    d = make(dtype, attrs)
    for name, (atype, value) in attrs.items():
        n, got = get(d, name, atype, 4)
        if atype == DESC:
            assert n == 1 and got[0].type == D.CUDNN_BACKEND_TENSOR_DESCRIPTOR and got[0].finalized
        else:
            assert (n, got) == (1, [value]), name.name


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_a_graph_holding_one_is_not_supported(build):
    dtype, attrs = build()
    g = make(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATIONGRAPH_OPS: (DESC, [make(dtype, attrs)]),
        A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE: (T.CUDNN_TYPE_HANDLE, handle())}, fin=False)
    expect(finalize(g), S.CUDNN_STATUS_NOT_SUPPORTED, dtype.name, "0 engine configs")


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_missing_required_attribute(build):
    dtype, attrs = build()
    first = next(iter(n for n, (atype, _) in attrs.items() if atype == DESC))
    attrs.pop(first)
    d = make(dtype, attrs, fin=False)
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "required attribute(s) not set", first)


BAD = [
    (band_mask, {"XDESC": t(1, [2, 3, 4])}, "XDESC", "4 dimensions"),
    (band_mask, {"YDESC": t(2, [1, 2, 3, 5])}, "YDESC", str(SCORES)),
    (band_mask, {"BDESC": t(7, [1, 1, 1, 2])}, "BDESC", "scalar"),
    (band_mask, {"SEQ_LEN_QDESC": t(3, [1, 1, 1, 1])}, "SEQ_LEN_QDESC", "integer"),
    (expand_band, {"AXIS": (T.CUDNN_TYPE_INT64, 4)}, "AXIS", "not a dimension"),
    (expand_band, {"LOWER_BANDWIDTH": (T.CUDNN_TYPE_INT64, -1)}, "LOWER_BANDWIDTH", "negative"),
    (contract_band, {"YDESC": t(2, [2, 3, 4])}, "YDESC", "3 dimensions"),
    (contract_band, {"UPPER_BANDWIDTH": (T.CUDNN_TYPE_INT64, -2)}, "UPPER_BANDWIDTH", "negative"),
    (moe, {"WEIGHT_DESC": t(2, [2, 3, 5])}, "WEIGHT_DESC", "[E, 4, N]"),
    (moe, {"OUTPUT_DESC": t(4, [1, 6, 7])}, "OUTPUT_DESC", "[1, rows, 5]"),
    (moe, {"FIRST_TOKEN_OFFSET_DESC": t(3, [2, 1, 1])}, "FIRST_TOKEN_OFFSET_DESC", "integer"),
    (moe, {"FIRST_TOKEN_OFFSET_DESC": t(3, [3, 1, 1], I32)}, "FIRST_TOKEN_OFFSET_DESC", "2 experts"),
    (moe, {"TOP_K": (T.CUDNN_TYPE_INT64, 0)}, "TOP_K", "at least 1"),
    (moe_bwd, {"DWEIGHT_DESC": t(2, [2, 4, 6])}, "DWEIGHT_DESC", "[E, 4, 5]"),
    (moe_bwd, {"DOUTPUT_DESC": t(4, [1, 5, 5])}, "DOUTPUT_DESC", "[1, 6, N]"),
]


@pytest.mark.parametrize("build, over, attr, why", BAD, ids=lambda v: getattr(v, "__name__", None))
def test_finalize_checks_shapes_and_types(build, over, attr, why):
    dtype, attrs = build(**over)
    prefix = {band_mask: M, expand_band: E, contract_band: C, moe: G, moe_bwd: GB}[build]
    expect(finalize(make(dtype, attrs, fin=False)), S.CUDNN_STATUS_BAD_PARAM, prefix + attr, why)


def test_moe_modes_need_their_tensors():
    for mode, missing in ((MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_GATHER, "TOKEN_INDEX_DESC"),
                          (MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_SCATTER, "TOKEN_KS_DESC"),
                          (MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_SCATTER, "TOP_K")):
        dtype, attrs = moe(MODE=(T.CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE, mode))
        attrs.pop(A[G + missing])
        expect(finalize(make(dtype, attrs, fin=False)), S.CUDNN_STATUS_BAD_PARAM, G + missing, mode.name)
    dtype, attrs = moe(MODE=(T.CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE, MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_NONE),
                       OUTPUT_DESC=t(4, [1, 3, 5]))
    expect(finalize(make(dtype, attrs, fin=False)), S.CUDNN_STATUS_BAD_PARAM, G + "OUTPUT_DESC", "3 rows")


def test_wrong_attribute_types_and_foreign_attributes():
    d = create(D.CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR)
    expect(set_attr(d, A[G + "MODE"], T.CUDNN_TYPE_INT64, 1), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, G + "MODE",
           "CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE")
    expect(set_attr(d, A[GB + "DWEIGHT_DESC"], DESC, tensor(2, [2, 4, 5])), S.CUDNN_STATUS_BAD_PARAM,
           GB + "DWEIGHT_DESC", "MOE_GROUPED_MATMUL_BWD")
    d = create(D.CUDNN_BACKEND_OPERATION_EXPAND_BAND_MATRIX_DESCRIPTOR)
    expect(set_attr(d, A[E + "PAD_VALUE"], T.CUDNN_TYPE_INT64, 0), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
           E + "PAD_VALUE")
    expect(set_attr(d, A[E + "LOWER_BANDWIDTH"], T.CUDNN_TYPE_INT64, [1, 2]), S.CUDNN_STATUS_BAD_PARAM,
           E + "LOWER_BANDWIDTH", "elementCount 2")
    d = create(D.CUDNN_BACKEND_OPERATION_DIAGONAL_BAND_MASK_DESCRIPTOR)
    expect(set_attr(d, A[M + "XDESC"], DESC, create(D.CUDNN_BACKEND_POINTWISE_DESCRIPTOR)),
           S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, M + "XDESC")
