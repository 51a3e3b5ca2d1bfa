"""Schema of the scaled dot-product attention operation descriptors, SDPA forward and backward
(cuDNN 9's ``CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR``). Data only.

Every documented attribute can be set and read back; what the attention engines cannot run (paged and
ragged K/V, block masks, FP8 scales and amax, score-modifier subgraphs, sinks) is refused when the
operation graph is lowered, with NOT_SUPPORTED naming the attribute (see ``lower.py``)."""
from ..types import cudnnBackendAttributeName_t as A
from ..types import cudnnBackendAttributeType_t as T
from ..types import cudnnBackendDescriptorType_t as D
from .attrs import FLOATS, desc, opt, tensor

_F = "CUDNN_ATTR_OPERATION_SDPA_FWD_"
SDPA_FWD = {
    **{A[_F + n]: tensor() for n in ("QDESC", "KDESC", "VDESC", "ODESC")},
    **{A[_F + n]: tensor(required=False) for n in (
        "STATSDESC", "SCALEDESC", "BLOCK_MASK_DESC", "PAGE_TABLE_KDESC", "PAGE_TABLE_VDESC", "SEQ_LEN_QDESC",
        "SEQ_LEN_KVDESC", "DROPOUT_SEED_DESC", "DROPOUT_OFFSET_DESC", "DROPOUT_RNG_DUMP_DESC",
        "CU_SEQ_LEN_QDESC", "CU_SEQ_LEN_KVDESC", "DESCALE_QDESC", "DESCALE_KDESC", "DESCALE_VDESC",
        "DESCALE_SDESC", "SCALE_SDESC", "SCALE_ODESC", "AMAX_SDESC", "AMAX_ODESC")},
    A[_F + "SUBGRAPH"]: desc(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, required=False),
    A[_F + "SUBGRAPH_INPUT_UID"]: opt(T.CUDNN_TYPE_INT64),
    A[_F + "SUBGRAPH_OUTPUT_UID"]: opt(T.CUDNN_TYPE_INT64),
    A[_F + "SOFTMAX_DESC"]: desc(D.CUDNN_BACKEND_OPERATION_SOFTMAX_DESCRIPTOR, required=False),
    A[_F + "DROPOUT_PROBABILITY"]: opt(FLOATS, default=0.0),
    A[_F + "UNFUSE_FMA"]: opt(T.CUDNN_TYPE_BOOLEAN, default=False),
}

_B = "CUDNN_ATTR_OPERATION_SDPA_BWD_"
SDPA_BWD = {
    **{A[_B + n]: tensor() for n in ("QDESC", "KDESC", "VDESC", "ODESC", "STATSDESC", "DQDESC", "DKDESC",
                                     "DVDESC", "DODDESC")},
    **{A[_B + n]: tensor(required=False) for n in ("SCALEDESC", "SEQ_LEN_QDESC", "SEQ_LEN_KVDESC", "SINK_DESC",
                                                   "DSINK_DESC")},
    A[_B + "MAX_TOTAL_SEQ_LEN_Q"]: opt(T.CUDNN_TYPE_INT64),
    A[_B + "MAX_TOTAL_SEQ_LEN_KV"]: opt(T.CUDNN_TYPE_INT64),
    A[_B + "SUBGRAPH"]: desc(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, required=False),
    A[_B + "SUBGRAPH_INPUT_UID"]: opt(T.CUDNN_TYPE_INT64),
    A[_B + "SUBGRAPH_OUTPUT_UID"]: opt(T.CUDNN_TYPE_INT64),
}

SCHEMAS = {
    D.CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: SDPA_FWD,
    D.CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR: SDPA_BWD,
}
