"""Finalize checks of the statistics and normalization operations: genstats, BN finalize statistics,
BN backward weights, norm forward, norm backward."""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnBackendNormFwdPhase_t as Phase
from ...types import cudnnBackendNormMode_t as NM
from ...types import cudnnStatus_t as S
from ...ir.ops.norm_common import ada_dims
from ..report import bad, fail, unsupported
from .tensor import tensor_of


def _same_dims(d, ref_name, ref, names):
    for n in names:
        t = tensor_of(d, n)
        if t.dims != ref.dims:
            bad(d, n, f"dims {list(t.dims)} differ from {ref_name.name}'s {list(ref.dims)}")


def _per_channel(d, names, channels, rank, required=True):
    """Tensors shaped [1, C, 1, ...] with C == ``channels``."""
    want = [1, channels] + [1] * (rank - 2)
    for n in names:
        t = tensor_of(d, n, required)
        if t is not None and list(t.dims) != want:
            bad(d, n, f"dims {list(t.dims)}: the per-channel shape {want} is expected")


def _scalar(d, names):
    for n in names:
        t = tensor_of(d, n, False)
        if t is not None and any(x != 1 for x in t.dims):
            bad(d, n, f"dims {list(t.dims)}: a scalar (all dimensions 1) is expected")


def finalize_genstats(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_GENSTATS_XDESC)
    for n in (A.CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, A.CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC):
        t = tensor_of(d, n)
        if t.rank != x.rank:
            bad(d, n, f"{t.rank} dimensions, X has {x.rank}")
    if x.rank < 2:
        bad(d, A.CUDNN_ATTR_OPERATION_GENSTATS_XDESC, "X needs a channel dimension (at least 2 dimensions)")
    _per_channel(d, (A.CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, A.CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC),
                 x.dims[1], x.rank)


_BNF = "CUDNN_ATTR_OPERATION_BN_FINALIZE_"


def finalize_bn_finalize(d):
    ysum = tensor_of(d, A.CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SUM_DESC)
    if ysum.rank < 2:
        bad(d, A.CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SUM_DESC, "needs a channel dimension")
    channel = [A[_BNF + n] for n in (
        "Y_SUM_DESC", "Y_SQ_SUM_DESC", "SCALE_DESC", "BIAS_DESC", "SAVED_MEAN_DESC", "SAVED_INV_STD_DESC",
        "EQ_SCALE_DESC", "EQ_BIAS_DESC")]
    optional = [A[_BNF + n] for n in ("PREV_RUNNING_MEAN_DESC", "PREV_RUNNING_VAR_DESC",
                                      "UPDATED_RUNNING_MEAN_DESC", "UPDATED_RUNNING_VAR_DESC")]
    _per_channel(d, channel, ysum.dims[1], ysum.rank)
    _per_channel(d, optional, ysum.dims[1], ysum.rank, required=False)
    given = [n for n in optional if d.is_set(n)]
    if given and len(given) != len(optional):
        missing = next(n for n in optional if not d.is_set(n))
        bad(d, missing, "the previous and updated running mean and variance go together: set all four or none")
    _scalar(d, [A[_BNF + n] for n in ("ACCUM_COUNT_DESC", "EPSILON_DESC", "EXP_AVERATE_FACTOR_DESC")])


_BNW = "CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_"


def finalize_bn_bwd_weights(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC)
    _same_dims(d, A.CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, x, (A.CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC,))
    if x.rank < 2:
        bad(d, A.CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, "needs a channel dimension")
    _per_channel(d, [A[_BNW + n] for n in (
        "MEAN_DESC", "INVSTD_DESC", "BN_SCALE_DESC", "DBN_SCALE_DESC", "DBN_BIAS_DESC", "EQ_DY_SCALE_DESC",
        "EQ_X_SCALE_DESC", "EQ_BIAS")], x.dims[1], x.rank)


def _check_mode(d, name, mode):
    if mode == NM.CUDNN_GROUP_NORM:
        fail(S.CUDNN_STATUS_INTERNAL_ERROR, d, name, "CUDNN_GROUP_NORM is not supported yet (documented "
             "to return CUDNN_STATUS_INTERNAL_ERROR)")
    if mode not in (NM.CUDNN_LAYER_NORM, NM.CUDNN_INSTANCE_NORM, NM.CUDNN_BATCH_NORM, NM.CUDNN_RMS_NORM,
                    NM.CUDNN_ADA_LAYER_NORM):
        unsupported(d, name, f"{mode.name} is not supported")


def _stats_shape(mode, x):
    """Shape of the mean / inverse-variance tensors for ``mode`` on X."""
    rank = x.rank
    if mode in (NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM):
        return [x.dims[0]] + [1] * (rank - 1)
    if mode == NM.CUDNN_INSTANCE_NORM:
        return list(x.dims[:2]) + [1] * (rank - 2)
    return [1, x.dims[1]] + [1] * (rank - 2)


def _scale_shape(mode, x):
    if mode in (NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM):
        return [1] + list(x.dims[1:])
    return [1, x.dims[1]] + [1] * (x.rank - 2)


def _check_ada(d, x, stats, params):
    """CUDNN_ADA_LAYER_NORM: SCALE (required) of X's rank, dim 0 1 or X's batch, the others 1 or X's; BIAS /
    DSCALE / DBIAS shaped like it; statistics X's dims with 1 where SCALE is not 1 (ir.ops.norm_common.ada_dims)."""
    scale = tensor_of(d, params[0], False)
    if scale is None:
        bad(d, params[0], "CUDNN_ADA_LAYER_NORM needs the (per-batch) scale")
    st, why = ada_dims(x.dims, scale.dims)
    if why:
        bad(d, params[0], f"{why} (CUDNN_ADA_LAYER_NORM on X {list(x.dims)})")
    for names, want in ((stats, list(st)), (params[1:], list(scale.dims))):
        for n in names:
            t = tensor_of(d, n, False)
            if t is not None and list(t.dims) != want:
                bad(d, n, f"dims {list(t.dims)}: {want} expected for CUDNN_ADA_LAYER_NORM on X {list(x.dims)}")


def _check_stats(d, mode, x, stats, params):
    if x.rank < 2:
        bad(d, None, f"X has {x.rank} dimension(s): a channel dimension is needed")
    if mode == NM.CUDNN_ADA_LAYER_NORM:
        return _check_ada(d, x, stats, params)
    for names, want in ((stats, _stats_shape(mode, x)), (params, _scale_shape(mode, x))):
        for n in names:
            t = tensor_of(d, n, False)
            if t is not None and list(t.dims) != want:
                bad(d, n, f"dims {list(t.dims)}: {want} expected for {mode.name} on X {list(x.dims)}")


def _by_value(d, name):
    t = tensor_of(d, name, False)
    if t is not None and not t.is_by_value:
        bad(d, name, "the epsilon tensor must have CUDNN_ATTR_TENSOR_IS_BY_VALUE set to true")


_NF = "CUDNN_ATTR_OPERATION_NORM_FWD_"


def finalize_norm_fwd(d):
    mode = d.value(A.CUDNN_ATTR_OPERATION_NORM_FWD_MODE)
    phase = d.value(A.CUDNN_ATTR_OPERATION_NORM_FWD_PHASE)
    _check_mode(d, A.CUDNN_ATTR_OPERATION_NORM_FWD_MODE, mode)
    if mode == NM.CUDNN_BATCH_NORM and phase == Phase.CUDNN_NORM_FWD_INFERENCE:
        unsupported(d, A.CUDNN_ATTR_OPERATION_NORM_FWD_PHASE,
                    "CUDNN_BATCH_NORM supports only CUDNN_NORM_FWD_TRAINING")
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_NORM_FWD_XDESC)
    _same_dims(d, A.CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, x, (A.CUDNN_ATTR_OPERATION_NORM_FWD_YDESC,))
    stats = [A[_NF + n] for n in ("MEAN_DESC", "INV_VARIANCE_DESC")]
    params = [A[_NF + n] for n in ("SCALE_DESC", "BIAS_DESC")]
    _check_stats(d, mode, x, stats, params)
    running = [A[_NF + n] for n in ("INPUT_RUNNING_MEAN_DESC", "INPUT_RUNNING_VAR_DESC",
                                    "OUTPUT_RUNNING_MEAN_DESC", "OUTPUT_RUNNING_VAR_DESC")]
    _per_channel(d, running, x.dims[1], x.rank, required=False)
    _scalar(d, (A.CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, A.CUDNN_ATTR_OPERATION_NORM_FWD_EXP_AVG_FACTOR_DESC))
    _by_value(d, A.CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC)


_NB = "CUDNN_ATTR_OPERATION_NORM_BWD_"


def finalize_norm_bwd(d):
    mode = d.value(A.CUDNN_ATTR_OPERATION_NORM_BWD_MODE)
    _check_mode(d, A.CUDNN_ATTR_OPERATION_NORM_BWD_MODE, mode)
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_NORM_BWD_XDESC)
    _same_dims(d, A.CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, x,
               (A.CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, A.CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC))
    stats = [A[_NB + n] for n in ("MEAN_DESC", "INV_VARIANCE_DESC")]
    params = [A[_NB + n] for n in ("SCALE_DESC", "DSCALE_DESC", "DBIAS_DESC")]
    _check_stats(d, mode, x, stats, params)
    has_stats = all(d.is_set(n) for n in stats)
    if any(d.is_set(n) for n in stats) and not has_stats:
        bad(d, stats[1] if d.is_set(stats[0]) else stats[0], "the saved mean and inverse variance go together")
    if not has_stats and not d.is_set(A.CUDNN_ATTR_OPERATION_NORM_BWD_EPSILON_DESC):
        bad(d, A.CUDNN_ATTR_OPERATION_NORM_BWD_EPSILON_DESC,
            "needed when the saved mean and inverse variance are not given")
    _scalar(d, (A.CUDNN_ATTR_OPERATION_NORM_BWD_EPSILON_DESC,))
    _by_value(d, A.CUDNN_ATTR_OPERATION_NORM_BWD_EPSILON_DESC)


FINALIZERS = {
    D.CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR: finalize_genstats,
    D.CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR: finalize_bn_finalize,
    D.CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR: finalize_bn_bwd_weights,
    D.CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR: finalize_norm_fwd,
    D.CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR: finalize_norm_bwd,
}
