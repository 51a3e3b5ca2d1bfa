"""Lowering a finalized OPERATIONGRAPH descriptor to the IR: :func:`lower_operation_graph`.

Each finalized tensor descriptor becomes one ``ir.TensorDesc`` per unique id; each operation
descriptor becomes one IR node (table ``LOWER`` below); the ``ir.OpGraph`` is then finalized, and
its failures come back with their own status, prefixed with the descriptor and attribute.
"""
from fractions import Fraction

from ..errors import CudnnError
from ..types import cudnnBackendAttributeName_t as A
from ..types import cudnnBackendDescriptorType_t as D
from ..types import cudnnBackendNormFwdPhase_t as Phase
from ..types import cudnnDataType_t as DT
from ..types import cudnnRngDistribution_t as RngDist
from ..types import cudnnStatus_t as S
from .lower_ops import LOWER_OPS
from .report import fail

OPS = A.CUDNN_ATTR_OPERATIONGRAPH_OPS


class _Tensors:
    """uid -> ir.TensorDesc; the same uid from two descriptors must describe the same tensor."""

    #: uids of virtual tensors the lowering itself adds (negative: never a user's uid)
    INTERNAL_UID_BASE = -(1 << 40)

    def __init__(self, graph_desc):
        self.by_uid = {}
        self.graph_desc = graph_desc
        self._internal = 0

    def virtual(self, dims, dtype):
        """A new packed virtual tensor for a node the lowering adds."""
        from ..ir import TensorDesc, packed_strides
        self._internal += 1
        uid = self.INTERNAL_UID_BASE - self._internal
        t = TensorDesc(uid=uid, dims=tuple(dims), strides=packed_strides(dims), dtype=dtype, is_virtual=True,
                       name=f"lowered#{self._internal}")
        self.by_uid[uid] = t
        return t

    def __call__(self, op, name):
        t = op.value(name)
        if t is None:
            return None
        return self.of(op, name, t.state["tensor"])

    def of(self, op, name, info, dims=None, strides=None):
        from ..ir import TensorDesc
        dims = tuple(info.dims if dims is None else dims)
        strides = tuple(info.strides if strides is None else strides)
        prev = self.by_uid.get(info.uid)
        if prev is not None:
            if (prev.dims, prev.strides, prev.dtype, prev.is_virtual, prev.is_by_value) != \
                    (dims, strides, info.dtype, info.is_virtual, info.is_by_value):
                fail(S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, self.graph_desc, OPS,
                     f"{op.type.name}: {name.name}: uid {info.uid} names two different tensors "
                     f"({list(prev.dims)} vs {list(dims)})")
            return prev
        ragged = self.of(op, name, info.ragged_offset) if info.ragged_offset is not None else None
        t = TensorDesc(uid=info.uid, dims=dims, strides=strides, dtype=info.dtype, alignment=info.alignment,
                       is_virtual=info.is_virtual, is_by_value=info.is_by_value,
                       vector_count=info.vector_count, vectorized_dim=info.vectorized_dim,
                       reordering=info.reordering, ragged_offset=ragged,
                       name=name.name.replace("CUDNN_ATTR_OPERATION_", ""))
        self.by_uid[info.uid] = t
        return t


def _first(op, name):
    vals = op.values(name)
    return float(vals[0]) if vals else None


def _num(v):
    f = Fraction(v)
    return int(f) if f.denominator == 1 else f


def _conv(op, T, names, ports, cls):
    """Convolutions; the grouped SPATIAL_DIMS + 3 form is merged into cuDNN's [N, G*C, ...] form."""
    geo = op.state["conv"]
    tensors = {}
    for name, port in zip(names, ports):
        info = op.value(name).state["tensor"]
        if geo.grouped_layout:
            g_axis = 0 if port in ("W", "DW") else 1
            dims = info.dims[:g_axis] + (info.dims[g_axis] * info.dims[g_axis + 1],) + info.dims[g_axis + 2:]
            strides = info.strides[:g_axis] + info.strides[g_axis + 1:]
            tensors[port] = T.of(op, name, info, dims, strides)
        else:
            tensors[port] = T.of(op, name, info)
    alpha, beta = names[-2:]
    outs = {ports[2]: tensors.pop(ports[2])}
    return cls(name=cls.OP, inputs=tensors, outputs=outs, compute_dtype=geo.comp_type,
               spatial_dims=len(geo.strides), mode=geo.mode, stride=geo.strides, pre_padding=geo.pre,
               post_padding=geo.post, dilation=geo.dilations, alpha=_first(op, alpha), beta=_first(op, beta))


def _lower_conv(prefix, x, w, y, ports, cls_name):
    def lower(op, T):
        from .. import ir
        names = [A[f"CUDNN_ATTR_OPERATION_CONVOLUTION_{prefix}_{n}"] for n in (x, w, y, "ALPHA", "BETA")]
        return _conv(op, T, names, ports, getattr(ir, cls_name))
    return lower


def _clip(v):
    """The documented default upper clip (the numeric limit max) is no clip at all."""
    return float("inf") if v >= 1.7976931348623157e308 else v


def _pointwise(op, T):
    from ..ir import Pointwise
    pw = op.value(A.CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR)
    P = "CUDNN_ATTR_OPERATION_POINTWISE_"
    ins = {p: T(op, A[P + n]) for p, n in (("X", "XDESC"), ("B", "BDESC"), ("T", "TDESC"), ("DY", "DYDESC"))}
    outs = {p: T(op, A[P + n]) for p, n in (("Y", "YDESC"), ("DX", "DXDESC"))}
    axis = pw.value(A.CUDNN_ATTR_POINTWISE_AXIS)
    return Pointwise(
        name="pointwise", inputs=ins, outputs=outs, mode=pw.value(A.CUDNN_ATTR_POINTWISE_MODE),
        math_precision=pw.value(A.CUDNN_ATTR_POINTWISE_MATH_PREC),
        nan_propagation=pw.value(A.CUDNN_ATTR_POINTWISE_NAN_PROPAGATION),
        relu_lower_clip=pw.value(A.CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP),
        relu_upper_clip=_clip(pw.value(A.CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP)),
        relu_lower_clip_slope=pw.value(A.CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE),
        elu_alpha=pw.value(A.CUDNN_ATTR_POINTWISE_ELU_ALPHA), softplus_beta=pw.value(A.CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA),
        swish_beta=pw.value(A.CUDNN_ATTR_POINTWISE_SWISH_BETA), axis=axis if axis >= 0 else None,
        alpha1=_first(op, A.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1),
        alpha2=_first(op, A.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2))


def _matmul(op, T):
    from ..ir import Matmul
    mm = op.value(A.CUDNN_ATTR_OPERATION_MATMUL_DESC)
    M = "CUDNN_ATTR_OPERATION_MATMUL_"
    ins = {"A": T(op, A[M + "ADESC"]), "B": T(op, A[M + "BDESC"])}
    for p in ("M", "N", "K"):
        ins[f"{p}_OVERRIDE"] = T(op, A[M + f"GEMM_{p}_OVERRIDE_DESC"])
    count = op.value(A.CUDNN_ATTR_OPERATION_MATMUL_IRREGULARLY_STRIDED_BATCH_COUNT)
    return Matmul(name="matmul", inputs=ins, outputs={"C": T(op, A[M + "CDESC"])},
                  compute_dtype=mm.value(A.CUDNN_ATTR_MATMUL_COMP_TYPE),
                  padding_value=mm.value(A.CUDNN_ATTR_MATMUL_PADDING_VALUE),
                  irregularly_strided_batch_count=None if count == 1 else count)


def _reduction(op, T):
    from ..ir import Reduction
    rd = op.value(A.CUDNN_ATTR_OPERATION_REDUCTION_DESC)
    return Reduction(name="reduction", inputs={"X": T(op, A.CUDNN_ATTR_OPERATION_REDUCTION_XDESC)},
                     outputs={"Y": T(op, A.CUDNN_ATTR_OPERATION_REDUCTION_YDESC)},
                     mode=rd.value(A.CUDNN_ATTR_REDUCTION_OPERATOR),
                     math_precision=rd.value(A.CUDNN_ATTR_REDUCTION_COMP_TYPE),
                     deterministic=rd.value(A.CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC))


def _ports(op, T, prefix, table):
    return {port: T(op, A[prefix + n]) for port, n in table}


def _genstats(op, T):
    from ..ir import GenStats
    G = "CUDNN_ATTR_OPERATION_GENSTATS_"
    return GenStats(name="genstats", inputs=_ports(op, T, G, (("X", "XDESC"),)),
                    outputs=_ports(op, T, G, (("SUM", "SUMDESC"), ("SQSUM", "SQSUMDESC"))),
                    mode=op.value(A[G + "MODE"]), math_precision=op.value(A[G + "MATH_PREC"]))


def _bn_finalize(op, T):
    from ..ir import BnFinalize
    F = "CUDNN_ATTR_OPERATION_BN_FINALIZE_"
    ins = _ports(op, T, F, (("SUM", "Y_SUM_DESC"), ("SQSUM", "Y_SQ_SUM_DESC"), ("SCALE", "SCALE_DESC"),
                            ("BIAS", "BIAS_DESC"), ("EPSILON", "EPSILON_DESC"), ("ACCUM_COUNT", "ACCUM_COUNT_DESC"),
                            ("PREV_RUNNING_MEAN", "PREV_RUNNING_MEAN_DESC"),
                            ("PREV_RUNNING_VAR", "PREV_RUNNING_VAR_DESC"),
                            ("EXP_AVG_FACTOR", "EXP_AVERATE_FACTOR_DESC")))
    outs = _ports(op, T, F, (("EQ_SCALE", "EQ_SCALE_DESC"), ("EQ_BIAS", "EQ_BIAS_DESC"),
                             ("SAVED_MEAN", "SAVED_MEAN_DESC"), ("SAVED_INV_STD", "SAVED_INV_STD_DESC"),
                             ("UPDATED_RUNNING_MEAN", "UPDATED_RUNNING_MEAN_DESC"),
                             ("UPDATED_RUNNING_VAR", "UPDATED_RUNNING_VAR_DESC")))
    return BnFinalize(name="bn_finalize", inputs=ins, outputs=outs, mode=op.value(A[F + "STATS_MODE"]),
                      math_precision=op.value(A[F + "MATH_PREC"]))


def _bn_bwd_weights(op, T):
    """dy and x in, as the descriptor has them: the IR node takes the per-channel sums of dy and
    dy*x, so two reductions (and the product) are lowered in front of it on virtual tensors."""
    from ..ir import BnBwdWeights, Pointwise, Reduction
    from ..types import cudnnPointwiseMode_t as PM
    from ..types import cudnnReduceTensorOp_t as RO
    W = "CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_"
    prec = op.value(A[W + "MATH_PREC"])
    x, dy = T(op, A[W + "X_DESC"]), T(op, A[W + "DY_DESC"])
    chan = (1, x.dims[1]) + (1,) * (len(x.dims) - 2)
    dy_sum, dyx, dyx_sum = T.virtual(chan, prec), T.virtual(x.dims, prec), T.virtual(chan, prec)
    return [
        Reduction(name="bn_bwd_weights.dy_sum", inputs={"X": dy}, outputs={"Y": dy_sum}, mode=RO.CUDNN_REDUCE_TENSOR_ADD,
                  math_precision=prec),
        Pointwise(name="bn_bwd_weights.dy_x", inputs={"X": dy, "B": x}, outputs={"Y": dyx}, mode=PM.CUDNN_POINTWISE_MUL,
                  math_precision=prec),
        Reduction(name="bn_bwd_weights.dy_x_sum", inputs={"X": dyx}, outputs={"Y": dyx_sum},
                  mode=RO.CUDNN_REDUCE_TENSOR_ADD, math_precision=prec),
        BnBwdWeights(name="bn_bwd_weights", inputs={
            "X": x, "MEAN": T(op, A[W + "MEAN_DESC"]), "INV_STD": T(op, A[W + "INVSTD_DESC"]),
            "SCALE": T(op, A[W + "BN_SCALE_DESC"]), "DY_SUM": dy_sum, "DY_X_SUM": dyx_sum},
            outputs=_ports(op, T, W, (("DSCALE", "DBN_SCALE_DESC"), ("DBIAS", "DBN_BIAS_DESC"),
                                      ("EQ_DY_SCALE", "EQ_DY_SCALE_DESC"), ("EQ_X_SCALE", "EQ_X_SCALE_DESC"),
                                      ("EQ_BIAS", "EQ_BIAS"))),
            math_precision=prec)]


def _norm_fwd(op, T):
    from ..ir import NormFwd
    N = "CUDNN_ATTR_OPERATION_NORM_FWD_"
    if op.is_set(A[N + "PEER_STAT_DESCS"]):
        fail(S.CUDNN_STATUS_NOT_SUPPORTED, op, A[N + "PEER_STAT_DESCS"], "multi-GPU statistics are not supported")
    phase = op.value(A[N + "PHASE"])
    ins = _ports(op, T, N, (("X", "XDESC"), ("SCALE", "SCALE_DESC"), ("BIAS", "BIAS_DESC"),
                            ("EPSILON", "EPSILON_DESC"), ("EXP_AVG_FACTOR", "EXP_AVG_FACTOR_DESC"),
                            ("INPUT_RUNNING_MEAN", "INPUT_RUNNING_MEAN_DESC"),
                            ("INPUT_RUNNING_VAR", "INPUT_RUNNING_VAR_DESC")))
    outs = _ports(op, T, N, (("Y", "YDESC"), ("OUTPUT_RUNNING_MEAN", "OUTPUT_RUNNING_MEAN_DESC"),
                             ("OUTPUT_RUNNING_VAR", "OUTPUT_RUNNING_VAR_DESC")))
    stats = _ports(op, T, N, (("MEAN", "MEAN_DESC"), ("INV_VARIANCE", "INV_VARIANCE_DESC")))
    if phase == Phase.CUDNN_NORM_FWD_INFERENCE:
        ins.update({"MEAN_IN": stats["MEAN"], "INV_VARIANCE_IN": stats["INV_VARIANCE"]})
    else:
        outs.update(stats)
    return NormFwd(name="norm_fwd", inputs=ins, outputs=outs, mode=op.value(A[N + "MODE"]), phase=phase)


def _norm_bwd(op, T):
    from ..ir import NormBwd
    N = "CUDNN_ATTR_OPERATION_NORM_BWD_"
    if op.is_set(A[N + "PEER_STAT_DESCS"]):
        fail(S.CUDNN_STATUS_NOT_SUPPORTED, op, A[N + "PEER_STAT_DESCS"], "multi-GPU statistics are not supported")
    ins = _ports(op, T, N, (("X", "XDESC"), ("DY", "DYDESC"), ("SCALE", "SCALE_DESC"), ("MEAN", "MEAN_DESC"),
                            ("INV_VARIANCE", "INV_VARIANCE_DESC"), ("EPSILON", "EPSILON_DESC")))
    outs = _ports(op, T, N, (("DX", "DXDESC"), ("DSCALE", "DSCALE_DESC"), ("DBIAS", "DBIAS_DESC")))
    return NormBwd(name="norm_bwd", inputs=ins, outputs=outs, mode=op.value(A[N + "MODE"]))


def _resample(cls_name, prefix, in_ports, out_ports):
    def lower(op, T):
        from .. import ir
        rs = op.value(A[prefix + "DESC"])
        R = "CUDNN_ATTR_RESAMPLE_"
        return getattr(ir, cls_name)(
            name=cls_name.lower(), inputs=_ports(op, T, prefix, in_ports), outputs=_ports(op, T, prefix, out_ports),
            mode=rs.value(A[R + "MODE"]), spatial_dims=rs.value(A[R + "SPATIAL_DIMS"]),
            window=tuple(_num(v) for v in rs.values(A[R + "WINDOW_DIMS"])),
            stride=tuple(_num(v) for v in rs.values(A[R + "STRIDES"])),
            pre_padding=tuple(_num(v) for v in rs.values(A[R + "PRE_PADDINGS"])),
            post_padding=tuple(_num(v) for v in rs.values(A[R + "POST_PADDINGS"])),
            padding_mode=rs.value(A[R + "PADDING_MODE"]), nan_propagation=rs.value(A[R + "NAN_PROPAGATION"]),
            comp_type=rs.value(A[R + "COMP_TYPE"]), alpha=_first(op, A[prefix + "ALPHA"]),
            beta=_first(op, A[prefix + "BETA"]))
    return lower


def _concat(op, T):
    from ..ir import Concat
    ins = {f"X{i}": T.of(op, A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS, t.state["tensor"])
           for i, t in enumerate(op.values(A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS))}
    return Concat(name="concat", inputs=ins, outputs={"Y": T(op, A.CUDNN_ATTR_OPERATION_CONCAT_OUTPUT_DESC)},
                  axis=op.value(A.CUDNN_ATTR_OPERATION_CONCAT_AXIS),
                  in_place_index=op.value(A.CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX))


def _reshape(op, T):
    from ..ir import Reshape
    return Reshape(name="reshape", inputs={"X": T(op, A.CUDNN_ATTR_OPERATION_RESHAPE_XDESC)},
                   outputs={"Y": T(op, A.CUDNN_ATTR_OPERATION_RESHAPE_YDESC)},
                   mode=op.value(A.CUDNN_ATTR_OPERATION_RESHAPE_MODE))


def _slice(op, T):
    from ..ir import Slice
    P = "CUDNN_ATTR_OPERATION_SLICE_"
    steps = op.values(A[P + "STRIDES"]) if op.is_set(A[P + "STRIDES"]) else None
    return Slice(name="slice", inputs={"X": T(op, A[P + "XDESC"])}, outputs={"Y": T(op, A[P + "YDESC"])},
                 start_indices=tuple(int(v) for v in op.values(A[P + "START_INDICES"])),
                 limit_indices=tuple(int(v) for v in op.values(A[P + "LIMIT_INDICES"])),
                 strides=None if steps is None else tuple(int(v) for v in steps))


def _rng(op, T):
    from ..ir import Rng
    rng = op.value(A.CUDNN_ATTR_OPERATION_RNG_DESC)
    R = "CUDNN_ATTR_RNG_"
    seed = op.value(A.CUDNN_ATTR_OPERATION_RNG_SEED)
    ins = {"OFFSET": T(op, A.CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC)}
    if hasattr(seed, "state"):
        ins["SEED"] = T.of(op, A.CUDNN_ATTR_OPERATION_RNG_SEED, seed.state["tensor"])
        seed = 0
    dist = rng.value(A[R + "DISTRIBUTION"])
    params = {}  # only the chosen distribution's parameters (the others keep the IR defaults)
    if dist == RngDist.CUDNN_RNG_DISTRIBUTION_NORMAL:
        params = dict(normal_mean=rng.value(A[R + "NORMAL_DIST_MEAN"]),
                      normal_std=rng.value(A[R + "NORMAL_DIST_STANDARD_DEVIATION"]))
    elif dist == RngDist.CUDNN_RNG_DISTRIBUTION_UNIFORM:
        params = dict(uniform_min=rng.value(A[R + "UNIFORM_DIST_MINIMUM"]),
                      uniform_max=rng.value(A[R + "UNIFORM_DIST_MAXIMUM"]))
    else:
        params = dict(bernoulli_probability=rng.value(A[R + "BERNOULLI_DIST_PROBABILITY"]))
    return Rng(name="rng", inputs=ins, outputs={"Y": T(op, A.CUDNN_ATTR_OPERATION_RNG_YDESC)},
               distribution=dist, seed=int(seed), **params)


def _signal(op, T):
    from ..ir import Signal
    G = "CUDNN_ATTR_OPERATION_SIGNAL_"
    return Signal(name="signal", inputs=_ports(op, T, G, (("FLAG", "FLAGDESC"), ("X", "XDESC"))),
                  outputs=_ports(op, T, G, (("Y", "YDESC"),)), mode=op.value(A[G + "MODE"]),
                  value=op.value(A[G + "VALUE"]))


def _paged(op, T):
    from ..ir import PagedCacheLoad
    G = "CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_"
    return PagedCacheLoad(name="paged_cache_load", inputs=_ports(op, T, G, (
        ("CONTAINER", "CONTAINER_DESC"), ("PAGE_TABLE", "PAGE_TABLE_DESC"), ("SEQUENCE", "SEQUENCE_DESC"))),
        outputs=_ports(op, T, G, (("Y", "YDESC"),)))


def _quantize(op, T):
    from ..ir import BlockScaleQuantize
    Q = "CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_"
    return BlockScaleQuantize(name="block_scale_quantize", inputs=_ports(op, T, Q, (("X", "XDESC"),)),
                              outputs=_ports(op, T, Q, (("Y", "YDESC"), ("SCALE", "SCALE_DESC"))),
                              block_size=op.value(A[Q + "BLOCK_SIZE"]), math_precision=op.value(A[Q + "MATH_PREC"]))


def _dequantize(op, T):
    from ..ir import BlockScaleDequantize
    Q = "CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_"
    if op.value(A[Q + "NEG_SCALE"]):
        fail(S.CUDNN_STATUS_NOT_SUPPORTED, op, A[Q + "NEG_SCALE"], "negated scales are not supported")
    return BlockScaleDequantize(name="block_scale_dequantize",
                                inputs=_ports(op, T, Q, (("X", "XDESC"), ("SCALE", "SCALE_DESC"))),
                                outputs=_ports(op, T, Q, (("Y", "YDESC"),)),
                                block_size=op.value(A[Q + "BLOCK_SIZE"]), math_precision=op.value(A[Q + "MATH_PREC"]))


_SDPA_REFUSED = {
    "FWD": ("BLOCK_MASK_DESC", "PAGE_TABLE_KDESC", "PAGE_TABLE_VDESC", "CU_SEQ_LEN_QDESC", "CU_SEQ_LEN_KVDESC",
            "DROPOUT_RNG_DUMP_DESC", "DESCALE_QDESC", "DESCALE_KDESC", "DESCALE_VDESC", "DESCALE_SDESC",
            "SCALE_SDESC", "SCALE_ODESC", "AMAX_SDESC", "AMAX_ODESC", "SUBGRAPH", "SOFTMAX_DESC"),
    "BWD": ("SINK_DESC", "DSINK_DESC", "SUBGRAPH", "MAX_TOTAL_SEQ_LEN_Q", "MAX_TOTAL_SEQ_LEN_KV"),
}
_SDPA_WHY = {"BLOCK_MASK_DESC": "block-sparse masks", "PAGE_TABLE_KDESC": "paged K/V caches",
             "PAGE_TABLE_VDESC": "paged K/V caches", "CU_SEQ_LEN_QDESC": "ragged (cumulative-length) sequences",
             "CU_SEQ_LEN_KVDESC": "ragged (cumulative-length) sequences", "SUBGRAPH": "score-modifier subgraphs",
             "SOFTMAX_DESC": "a custom softmax operation (sinks)", "SINK_DESC": "attention sinks",
             "DSINK_DESC": "attention sinks", "DROPOUT_RNG_DUMP_DESC": "dumping the dropout mask",
             "MAX_TOTAL_SEQ_LEN_Q": "ragged (cumulative-length) sequences",
             "MAX_TOTAL_SEQ_LEN_KV": "ragged (cumulative-length) sequences"}


def _sdpa_common(op, T, kind):
    """Refusals, then (inputs, attributes) shared by SDPA forward and backward."""
    P = f"CUDNN_ATTR_OPERATION_SDPA_{kind}_"
    for n in _SDPA_REFUSED[kind]:
        if op.is_set(A[P + n]):
            why = _SDPA_WHY.get(n, "FP8 scales and amax")
            fail(S.CUDNN_STATUS_NOT_SUPPORTED, op, A[P + n], f"{why}: not supported by ncudnn's attention engines")
    if kind == "FWD" and op.value(A[P + "UNFUSE_FMA"]):
        fail(S.CUDNN_STATUS_NOT_SUPPORTED, op, A[P + "UNFUSE_FMA"], "the attention kernels fuse multiply-adds")
    ins = _ports(op, T, P, (("Q", "QDESC"), ("K", "KDESC"), ("V", "VDESC"), ("SCALE", "SCALEDESC"),
                            ("SEQ_LEN_Q", "SEQ_LEN_QDESC"), ("SEQ_LEN_KV", "SEQ_LEN_KVDESC")))
    attrs = {"padding_mask": ins["SEQ_LEN_Q"] is not None or ins["SEQ_LEN_KV"] is not None}
    return P, ins, attrs


def _sdpa_fwd(op, T):
    from ..ir import SdpaFwd
    P, ins, attrs = _sdpa_common(op, T, "FWD")
    ins.update(_ports(op, T, P, (("SEED", "DROPOUT_SEED_DESC"), ("OFFSET", "DROPOUT_OFFSET_DESC"))))
    outs = _ports(op, T, P, (("O", "ODESC"), ("STATS", "STATSDESC")))
    p = _first(op, A[P + "DROPOUT_PROBABILITY"]) or 0.0
    return SdpaFwd(name="sdpa_fwd", inputs=ins, outputs=outs, compute_dtype=DT.CUDNN_DATA_FLOAT,
                   dropout_probability=p, generate_stats=outs["STATS"] is not None, **attrs)


def _sdpa_bwd(op, T):
    from ..ir import SdpaBwd
    P, ins, attrs = _sdpa_common(op, T, "BWD")
    ins.update(_ports(op, T, P, (("O", "ODESC"), ("DO", "DODDESC"), ("STATS", "STATSDESC"))))
    outs = _ports(op, T, P, (("DQ", "DQDESC"), ("DK", "DKDESC"), ("DV", "DVDESC")))
    return SdpaBwd(name="sdpa_bwd", inputs=ins, outputs=outs, compute_dtype=DT.CUDNN_DATA_FLOAT, **attrs)


LOWER = {
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
        _lower_conv("FORWARD", "X", "W", "Y", ("X", "W", "Y"), "ConvFprop"),
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
        _lower_conv("BWD_DATA", "DY", "W", "DX", ("DY", "W", "DX"), "ConvDgrad"),
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
        _lower_conv("BWD_FILTER", "X", "DY", "DW", ("X", "DY", "DW"), "ConvWgrad"),
    D.CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: _pointwise,
    D.CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: _matmul,
    D.CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: _reduction,
    D.CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR: _genstats,
    D.CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR: _bn_finalize,
    D.CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR: _bn_bwd_weights,
    D.CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR: _norm_fwd,
    D.CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR: _norm_bwd,
    D.CUDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR: _resample(
        "ResampleFwd", "CUDNN_ATTR_OPERATION_RESAMPLE_FWD_", (("X", "XDESC"),), (("Y", "YDESC"), ("IDX", "IDXDESC"))),
    D.CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR: _resample(
        "ResampleBwd", "CUDNN_ATTR_OPERATION_RESAMPLE_BWD_",
        (("DY", "DYDESC"), ("X", "XDESC"), ("Y", "YDESC"), ("IDX", "IDXDESC")), (("DX", "DXDESC"),)),
    D.CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR: _concat,
    D.CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: _reshape,
    D.CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR: _slice,
    D.CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR: _rng,
    D.CUDNN_BACKEND_OPERATION_SIGNAL_DESCRIPTOR: _signal,
    D.CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR: _paged,
    D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR: _quantize,
    D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR: _dequantize,
    D.CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: _sdpa_fwd,
    D.CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR: _sdpa_bwd,
    **LOWER_OPS,  # softmax, transpose, rotary embeddings (lower_ops.py)
}


def _uid_uses(ops):
    """uid -> how many operations name the tensor (a lowering may re-view a tensor only it uses)."""
    from ..types import cudnnBackendAttributeType_t as AT
    uses = {}
    for op in ops:
        seen = set()
        for atype, vals in op.attrs.values():
            if atype != AT.CUDNN_TYPE_BACKEND_DESCRIPTOR:
                continue
            for v in vals:
                info = getattr(v, "state", {}).get("tensor")
                if info is not None:
                    seen.add(info.uid)
        for uid in seen:
            uses[uid] = uses.get(uid, 0) + 1
    return uses


def lower_operation_graph(desc):
    """The finalized ``ir.OpGraph`` of an OPERATIONGRAPH descriptor whose operations are finalized."""
    from ..ir import OpGraph
    T = _Tensors(desc)
    T.uses = _uid_uses(desc.values(OPS))
    nodes = []
    for op in desc.values(OPS):
        lower = LOWER.get(op.type)
        if lower is None:
            fail(S.CUDNN_STATUS_NOT_SUPPORTED, desc, OPS,
                 f"{op.type.name}: no ncudnn engine runs this operation (0 engine configs)")
        try:
            made = lower(op, T)
            nodes.extend(made if isinstance(made, list) else [made])
        except CudnnError as e:
            named = e.message if e.message.startswith(op.type.name) else f"{op.type.name}: {e.message}"
            fail(e.status, desc, OPS, named)
    dynamic = bool(desc.value(A.CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED))
    graph = OpGraph(nodes, name=f"backend#{desc.id}", dynamic_shapes=dynamic)
    try:
        graph.finalize()
    except CudnnError as e:
        fail(e.status, desc, OPS, e.message)
    _log_lowered(desc, graph)
    return graph


def _log_lowered(desc, graph):
    from .. import log
    if log.enabled(log.SEV.CUDNN_SEV_INFO):
        ops = ", ".join(o.short for o in desc.values(OPS))
        nodes = " -> ".join(f"{n.OP}:{n.name}" for n in graph.nodes)
        log.log(log.SEV.CUDNN_SEV_INFO, f"backend: {desc.type.name} #{desc.id} lowered ({ops}) to the IR: {nodes}",
                handle=desc.value(A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE))
