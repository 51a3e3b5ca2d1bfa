"""Schema of the newer operation descriptors of cuDNN 9 and the device-property descriptor: softmax,
transpose, rotary embedding forward / backward, diagonal band mask, expand / contract band matrix, MoE
grouped matmul forward / backward, DEVICEPROP. Data only.

Every documented attribute can be set and read back. Softmax, transpose and the rotary embeddings are
lowered onto the IR (``lower_ops.py``); the band-mask, band-matrix and MoE operations finalize (their
shapes and types checked, ``checks/new_ops.py``) but no engine runs them: an operation graph holding one
is refused with NOT_SUPPORTED naming the operation."""
from ..types import cudnnBackendAttributeName_t as A
from ..types import cudnnBackendAttributeType_t as T
from ..types import cudnnBackendDescriptorType_t as D
from ..types import cudnnDataType_t as DT
from ..types import cudnnMoeGroupedMatmulMode_t as MOE
from .attrs import ANY, FLOATS, UP_TO_MAX_DIMS, opt, req, tensor

_S = "CUDNN_ATTR_OPERATION_SOFTMAX_"
SOFTMAX = {
    A[_S + "XDESC"]: tensor(),
    A[_S + "YDESC"]: tensor(),
    **{A[_S + n]: tensor(required=False) for n in ("STATS_DESC", "MAX_DESC", "SUM_EXP_DESC", "SINK_DESC")},
    A[_S + "STATS_LOG2"]: opt(T.CUDNN_TYPE_BOOLEAN, default=False),
}

TRANSPOSE = {
    A.CUDNN_ATTR_OPERATION_TRANSPOSE_XDESC: tensor(),
    A.CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC: tensor(),
    A.CUDNN_ATTR_OPERATION_TRANSPOSE_PERMUTATION: req(T.CUDNN_TYPE_INT64, UP_TO_MAX_DIMS),
}


def _rope(prefix, x, y):
    return {
        A[prefix + x]: tensor(),
        A[prefix + y]: tensor(),
        A[prefix + "FREQSDESC"]: tensor(),
        A[prefix + "OUTPUT_SCALE"]: opt(FLOATS, default=1.0),
        A[prefix + "ROPE_DIM"]: opt(T.CUDNN_TYPE_INT64, default=0),  # 0: the whole head dimension
    }


ROPE_FWD = _rope("CUDNN_ATTR_OPERATION_ROPE_FWD_", "XDESC", "YDESC")
ROPE_BWD = _rope("CUDNN_ATTR_OPERATION_ROPE_BWD_", "DYDESC", "DXDESC")

_M = "CUDNN_ATTR_OPERATION_DIAGONAL_BAND_MASK_"
DIAGONAL_BAND_MASK = {
    A[_M + "XDESC"]: tensor(),
    A[_M + "YDESC"]: tensor(),
    **{A[_M + n]: tensor(required=False) for n in (
        "SEQ_LEN_KVDESC", "SEQ_LEN_QDESC", "LEFT_BOUND_DESC", "SHIFT_RIGHT_BOUND_DESC", "BDESC",
        "CU_SEQ_LEN_KVDESC", "CU_SEQ_LEN_QDESC")},
    A[_M + "COMPARISON_MODE"]: opt(T.CUDNN_TYPE_POINTWISE_MODE),
}

_E = "CUDNN_ATTR_OPERATION_EXPAND_BAND_MATRIX_"
EXPAND_BAND_MATRIX = {
    A[_E + "XDESC"]: tensor(),
    A[_E + "YDESC"]: tensor(),
    A[_E + "LOWER_BANDWIDTH"]: opt(T.CUDNN_TYPE_INT64, default=0),
    A[_E + "UPPER_BANDWIDTH"]: opt(T.CUDNN_TYPE_INT64, default=0),
    A[_E + "AXIS"]: opt(T.CUDNN_TYPE_INT64),
    A[_E + "PAD_VALUE"]: opt(FLOATS, default=0.0),
    A[_E + "KV_TOKEN_OFFSET_DESC"]: tensor(required=False),
    A[_E + "SPECULATIVE_MASK_DESC"]: tensor(required=False),
}

_C = "CUDNN_ATTR_OPERATION_CONTRACT_BAND_"
CONTRACT_BAND_MATRIX = {
    A[_C + "MATRIX_XDESC"]: tensor(),
    A[_C + "MATRIX_YDESC"]: tensor(),
    A[_C + "MATRIX_LOWER_BANDWIDTH"]: opt(T.CUDNN_TYPE_INT64, default=0),
    A[_C + "MATRIX_UPPER_BANDWIDTH"]: opt(T.CUDNN_TYPE_INT64, default=0),
    A[_C + "MATRIX_AXIS"]: opt(T.CUDNN_TYPE_INT64),
    A[_C + "MATRIX_PAD_VALUE"]: opt(FLOATS, default=0.0),
    A[_C + "MAX_TOKEN_VALUE"]: opt(T.CUDNN_TYPE_INT64),
}

_G = "CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_"
MOE_GROUPED_MATMUL = {
    A[_G + "MODE"]: opt(T.CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE, default=MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_NONE),
    A[_G + "MATH_PREC"]: opt(T.CUDNN_TYPE_DATA_TYPE, default=DT.CUDNN_DATA_FLOAT),
    **{A[_G + n]: tensor() for n in ("TOKEN_DESC", "WEIGHT_DESC", "FIRST_TOKEN_OFFSET_DESC", "OUTPUT_DESC")},
    **{A[_G + n]: tensor(required=False) for n in ("TOKEN_INDEX_DESC", "TOKEN_KS_DESC")},
    A[_G + "TOP_K"]: opt((T.CUDNN_TYPE_INT64, T.CUDNN_TYPE_INT32)),
}

_GB = "CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_"
MOE_GROUPED_MATMUL_BWD = {
    A[_GB + "MATH_PREC"]: opt(T.CUDNN_TYPE_DATA_TYPE, default=DT.CUDNN_DATA_FLOAT),
    **{A[_GB + n]: tensor() for n in ("TOKEN_DESC", "DWEIGHT_DESC", "FIRST_TOKEN_OFFSET_DESC", "DOUTPUT_DESC")},
}

DEVICEPROP = {
    A.CUDNN_ATTR_DEVICEPROP_DEVICE_ID: opt(T.CUDNN_TYPE_INT64, default=0),
    A.CUDNN_ATTR_DEVICEPROP_HANDLE: opt(T.CUDNN_TYPE_HANDLE),
    # set: the serialized properties of a device (deviceless planning); else filled in at finalize
    A.CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION: opt(T.CUDNN_TYPE_CHAR, ANY),
}

SCHEMAS = {
    D.CUDNN_BACKEND_OPERATION_SOFTMAX_DESCRIPTOR: SOFTMAX,
    D.CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR: TRANSPOSE,
    D.CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR: ROPE_FWD,
    D.CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR: ROPE_BWD,
    D.CUDNN_BACKEND_OPERATION_DIAGONAL_BAND_MASK_DESCRIPTOR: DIAGONAL_BAND_MASK,
    D.CUDNN_BACKEND_OPERATION_EXPAND_BAND_MATRIX_DESCRIPTOR: EXPAND_BAND_MATRIX,
    D.CUDNN_BACKEND_OPERATION_CONTRACT_BAND_MATRIX_DESCRIPTOR: CONTRACT_BAND_MATRIX,
    D.CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR: MOE_GROUPED_MATMUL,
    D.CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR: MOE_GROUPED_MATMUL_BWD,
    D.CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR: DEVICEPROP,
}
