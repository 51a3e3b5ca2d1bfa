"""The representative problems ``show`` generates kernels for: small op graphs built with the IR, one or more
per engine family.

An engine compiles its kernels for a subgraph (shapes, data types, layouts, the fused epilogue), so showing
an engine's source needs a problem. Each builder here returns a fresh :class:`~ncudnn.ir.OpGraph` (not
finalized) for a data type; :data:`ENGINE_PROBLEMS` names, per engine, the problems to try in order (the
first the engine accepts is its default). Shapes are small: the sources depend on shapes only where an
engine specializes on them (Winograd tiles, 1x1 convolutions, row lengths).
"""
from ..ir import (BnBwdWeights, BnFinalize, Concat, ConvFprop, CtcLoss, GenStats, Matmul, NormFwd, OpGraph,
                  Pointwise, Reduction, Reshape, ResampleFwd, Rng, SdpaBwd, SdpaFwd, TensorDesc, packed_strides)
from ..types import (cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM, cudnnDataType_t as DT,
                     cudnnPaddingMode_t as PAD, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO,
                     cudnnResampleMode_t as RS)

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
#: data types by the names the command line takes
DTYPES = {"float": F32, "half": F16, "bfloat16": BF16}


def _t(uid, dims, dtype=F32, strides=None, name=""):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dtype,
                      name=name or f"t{uid}")


def _virtual(uid, dims=None):
    return TensorDesc(uid, dims, packed_strides(dims) if dims else None, F32 if dims else None, is_virtual=True,
                      name=f"v{uid}")


def _scalar(uid, value, name, dtype=F32):
    return TensorDesc(uid, (1, 1, 1, 1), (1, 1, 1, 1), dtype, is_by_value=True, value=value, name=name)


def _nhwc(n, c, h, w):
    return (h * w * c, 1, w * c, c)


def _conv(dtype, n=1, c=8, k=8, hw=8, r=3, nhwc=False, groups=1, epilogue=True):
    """y = relu(conv(x, w) + b): an r x r stride-1 'same' convolution with a bias-relu epilogue."""
    pad = r // 2
    xd, yd = (n, c, hw, hw), (n, k, hw, hw)
    x = _t(1, xd, dtype, _nhwc(*xd) if nhwc else None, "x")
    wd = (k, c // groups, r, r)
    w = _t(2, wd, dtype, _nhwc(*wd) if nhwc else None, "w")
    y = _t(4, yd, dtype, _nhwc(*yd) if nhwc else None, "y")
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": _virtual(10) if epilogue else y}, spatial_dims=2,
                     stride=(1, 1), pre_padding=(pad, pad), post_padding=(pad, pad), dilation=(1, 1))
    if not epilogue:
        return OpGraph([conv], name="conv")
    b = _t(3, (1, k, 1, 1), dtype, name="b")
    bias = Pointwise("bias", {"X": conv.outputs["Y"], "B": b}, {"Y": _virtual(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": bias.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([conv, bias, relu], name="conv_bias_relu")


def conv3x3(dtype):
    return _conv(dtype)


def conv3x3_nhwc(dtype):
    return _conv(dtype, c=16, k=16, nhwc=True)


def conv1x1(dtype):
    return _conv(dtype, r=1, epilogue=False)


def depthwise3x3(dtype):
    return _conv(dtype, c=8, k=8, groups=8, epilogue=False)


def matmul(dtype, m=32, n=32, k=32):
    """c = gelu(a @ b), one batch."""
    a, b, c = _t(1, (1, m, k), dtype, name="a"), _t(2, (1, k, n), dtype, name="b"), _t(3, (1, m, n), dtype, name="c")
    mm = Matmul("mm", {"A": a, "B": b}, {"C": _virtual(10)})
    gelu = Pointwise("gelu", {"X": mm.outputs["C"]}, {"Y": c}, mode=PM.CUDNN_POINTWISE_GELU_FWD)
    return OpGraph([mm, gelu], name="matmul_gelu")


def matmul_large(dtype):
    return matmul(dtype, 128, 128, 64)


def pointwise(dtype):
    """out = (x + b) * relu(y), b broadcast over channels."""
    d = (2, 8, 4, 4)
    x, b, y, o = _t(1, d, dtype, name="x"), _t(2, (1, 8, 1, 1), dtype, name="b"), _t(3, d, dtype, name="y"), \
        _t(4, d, dtype, name="out")
    add = Pointwise("add", {"X": x, "B": b}, {"Y": _virtual(10)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": y}, {"Y": _virtual(11)}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    mul = Pointwise("mul", {"X": add.outputs["Y"], "B": relu.outputs["Y"]}, {"Y": o}, mode=PM.CUDNN_POINTWISE_MUL)
    return OpGraph([add, relu, mul], name="bias_relu_mul")


def relu_rowsum(dtype):
    """out = rowsum(relu(x)) * s: pointwise | reduction | pointwise (three subgraphs: the composite engine)."""
    x, s, o = _t(1, (4, 16), dtype, name="x"), _t(2, (4, 1), name="s"), _t(3, (4, 1), name="out")
    relu = Pointwise("relu", {"X": x}, {"Y": _virtual(10)}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    red = Reduction("sum", {"X": relu.outputs["Y"]}, {"Y": TensorDesc(11, (4, 1), (1, 1), F32, is_virtual=True,
                                                                       name="rowsum")},
                    mode=RO.CUDNN_REDUCE_TENSOR_ADD)
    scale = Pointwise("scale", {"X": red.outputs["Y"], "B": s}, {"Y": o}, mode=PM.CUDNN_POINTWISE_MUL)
    return OpGraph([relu, red, scale], name="relu_rowsum_scale")


def reduction(dtype):
    return OpGraph([Reduction("sum", {"X": _t(1, (8, 64), dtype)}, {"Y": _t(2, (8, 1))},
                              mode=RO.CUDNN_REDUCE_TENSOR_ADD)], name="row_sum")


def softmax(dtype):
    """y = softmax(x) over rows, as cuDNN graphs write it (max, sub, exp, sum, div)."""
    d, st = (8, 64), (8, 1)
    x, y = _t(1, d, dtype, name="x"), _t(2, d, dtype, name="y")
    m, dd, e, s = _virtual(10, st), _virtual(11), _virtual(12), _virtual(13, st)
    return OpGraph([Reduction("max", {"X": x}, {"Y": m}, mode=RO.CUDNN_REDUCE_TENSOR_MAX),
                    Pointwise("sub", {"X": x, "B": m}, {"Y": dd}, mode=PM.CUDNN_POINTWISE_SUB),
                    Pointwise("exp", {"X": dd}, {"Y": e}, mode=PM.CUDNN_POINTWISE_EXP),
                    Reduction("sum", {"X": e}, {"Y": s}, mode=RO.CUDNN_REDUCE_TENSOR_ADD),
                    Pointwise("div", {"X": e, "B": s}, {"Y": y}, mode=PM.CUDNN_POINTWISE_DIV)], name="softmax")


def layernorm(dtype):
    d, ch = (8, 64), (1, 64)
    ins = {"X": _t(1, d, dtype, name="x"), "SCALE": _t(2, ch, name="scale"), "BIAS": _t(3, ch, name="bias"),
           "EPSILON": _scalar(4, 1e-5, "eps")}
    outs = {"Y": _t(10, d, dtype, name="y"), "MEAN": _t(11, (8, 1), name="mean"),
            "INV_VARIANCE": _t(12, (8, 1), name="inv_var")}
    return OpGraph([NormFwd("ln", ins, outs, mode=NM.CUDNN_LAYER_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)],
                   name="layernorm")


def batchnorm(dtype):
    d, ch = (2, 8, 4, 4), (1, 8, 1, 1)
    ins = {"X": _t(1, d, dtype, name="x"), "SCALE": _t(2, ch, name="scale"), "BIAS": _t(3, ch, name="bias"),
           "EPSILON": _scalar(4, 1e-5, "eps")}
    outs = {"Y": _t(10, d, dtype, name="y"), "MEAN": _t(11, ch, name="mean"),
            "INV_VARIANCE": _t(12, ch, name="inv_var")}
    return OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)],
                   name="batchnorm")


def genstats(dtype):
    return OpGraph([GenStats("gs", {"X": _t(1, (2, 8, 4, 4), dtype, name="x")},
                             {"SUM": _t(2, (1, 8, 1, 1), name="sum"), "SQSUM": _t(3, (1, 8, 1, 1), name="sqsum")})],
                   name="genstats")


def bn_finalize(dtype):
    ch = (1, 8, 1, 1)
    ins = {p: _t(k + 1, ch, name=p.lower()) for k, p in enumerate(("SUM", "SQSUM", "SCALE", "BIAS"))}
    ins.update(EPSILON=_scalar(20, 1e-5, "eps"), ACCUM_COUNT=_scalar(21, 32, "count", DT.CUDNN_DATA_INT64))
    outs = {"EQ_SCALE": _t(30, ch, name="eq_scale"), "EQ_BIAS": _t(31, ch, name="eq_bias"),
            "SAVED_MEAN": _t(32, ch, name="saved_mean"), "SAVED_INV_STD": _t(33, ch, name="saved_inv_std")}
    return OpGraph([BnFinalize("fin", ins, outs)], name="bn_finalize")


def bn_bwd_weights(dtype):
    d, ch = (2, 8, 4, 4), (1, 8, 1, 1)
    ins = {"X": _t(1, d, dtype, name="x")}
    ins.update({p: _t(k + 2, ch, name=p.lower()) for k, p in enumerate(("MEAN", "INV_STD", "SCALE", "DY_SUM",
                                                                         "DY_X_SUM"))})
    outs = {p: _t(k + 20, ch, name=p.lower()) for k, p in enumerate(BnBwdWeights.OUTPUTS)}
    return OpGraph([BnBwdWeights("bw", ins, outs)], name="bn_bwd_weights")


def maxpool(dtype):
    x, y = _t(1, (2, 8, 8, 8), dtype, name="x"), _t(2, (2, 8, 4, 4), dtype, name="y")
    return OpGraph([ResampleFwd("pool", {"X": x}, {"Y": y}, mode=RS.CUDNN_RESAMPLE_MAXPOOL, spatial_dims=2,
                                window=(2, 2), stride=(2, 2), pre_padding=(0, 0), post_padding=(0, 0),
                                padding_mode=PAD.CUDNN_NEG_INF_PAD)], name="maxpool")


def rng(dtype):
    seed = TensorDesc(2, (1,), (1,), DT.CUDNN_DATA_INT64, is_by_value=True, value=7, name="seed")
    return OpGraph([Rng("rng", {"SEED": seed}, {"Y": _t(1, (8, 64), dtype, name="y")}, distribution=1)],
                   name="rng_uniform")


def transpose(dtype):
    """y = x with the last two axes swapped in memory (a reshape of equal dims, other strides)."""
    d = (4, 16, 8)
    return OpGraph([Reshape("rs", {"X": _t(1, d, dtype, name="x")}, {"Y": _t(2, d, dtype, (128, 1, 16), "y")})],
                   name="transpose")


def concat(dtype):
    xs = [_t(1 + i, (2, 4, 8), dtype, name=f"x{i}") for i in range(2)]
    return OpGraph([Concat("cat", {f"X{i}": x for i, x in enumerate(xs)}, {"Y": _t(5, (2, 8, 8), dtype, name="y")},
                           axis=1)], name="concat")


def _sdpa_tensors(dtype, b=1, h=2, s=16, d=16):
    dims = (b, h, s, d)
    return {p: _t(k + 1, dims, dtype, name=p.lower()) for k, p in enumerate(("Q", "K", "V"))}, dims


def sdpa_fwd(dtype):
    ins, dims = _sdpa_tensors(dtype)
    outs = {"O": _t(10, dims, dtype, name="o"), "STATS": _t(11, dims[:3] + (1,), name="stats")}
    return OpGraph([SdpaFwd("sdpa", ins, outs, attn_scale=0.25, causal_mask=True)], name="sdpa_fwd")


def sdpa_fwd_d64(dtype):
    """The forward at head dim 64 (the wgmma forward takes 64 and 128 only)."""
    ins, dims = _sdpa_tensors(dtype, d=64)
    outs = {"O": _t(10, dims, dtype, name="o"), "STATS": _t(11, dims[:3] + (1,), name="stats")}
    return OpGraph([SdpaFwd("sdpa", ins, outs, attn_scale=0.125, causal_mask=True)], name="sdpa_fwd_d64")


def sdpa_bwd(dtype):
    ins, dims = _sdpa_tensors(dtype)
    ins.update(O=_t(4, dims, dtype, name="o"), DO=_t(5, dims, dtype, name="do"),
               STATS=_t(6, dims[:3] + (1,), name="stats"))
    outs = {"DQ": _t(10, dims, dtype, name="dq"), "DK": _t(11, dims, dtype, name="dk"),
            "DV": _t(12, dims, dtype, name="dv")}
    return OpGraph([SdpaBwd("sdpa_bwd", ins, outs, attn_scale=0.25, causal_mask=True)], name="sdpa_bwd")


def ctc_loss(dtype):
    """The CTC loss of 4 entries over 16 steps of 8 classes, labels up to 4 long, with gradients."""
    i32 = DT.CUDNN_DATA_INT32
    ins = {"PROBS": _t(1, (16, 4, 8), dtype, name="probs"), "LABELS": _t(2, (12,), i32, name="labels"),
           "LABEL_LENGTHS": _t(3, (4,), i32, name="label_lengths"),
           "INPUT_LENGTHS": _t(4, (4,), i32, name="input_lengths")}
    outs = {"COSTS": _t(5, (4,), dtype, name="costs"), "GRADS": _t(6, (16, 4, 8), dtype, name="grads")}
    return OpGraph([CtcLoss("ctc", ins, outs, normalization=1, max_label_length=4)], name="ctc_loss")


#: problem name -> builder(dtype) -> OpGraph
PROBLEMS = {f.__name__: f for f in (
    pointwise, relu_rowsum, reduction, softmax, layernorm, batchnorm, genstats, bn_finalize, bn_bwd_weights,
    maxpool, rng, transpose, concat, matmul, matmul_large, conv3x3, conv3x3_nhwc, conv1x1, depthwise3x3,
    sdpa_fwd, sdpa_fwd_d64, sdpa_bwd, ctc_loss)}

_CONV = (("conv3x3", "float"), ("conv3x3", "half"), ("conv3x3_nhwc", "half"))
#: engine -> the (problem, data type) pairs to try, in order: the first it accepts is its default problem
ENGINE_PROBLEMS = {
    "pointwise_fused": (("pointwise", "float"),),
    "composite": (("relu_rowsum", "float"),),
    "reduction": (("reduction", "float"),),
    "genstats": (("genstats", "float"),),
    "bn_finalize": (("bn_finalize", "float"),),
    "norm_batch": (("batchnorm", "float"),),
    "norm_rows": (("layernorm", "float"),),
    "resample": (("maxpool", "float"),),
    "rng_philox": (("rng", "float"),),
    "softmax_fused": (("softmax", "float"),),
    "bn_bwd_weights": (("bn_bwd_weights", "float"),),
    "matmul_simt": (("matmul", "float"),),
    "matmul_small": (("matmul", "float"),),
    "conv_implicit_gemm": _CONV,
    "conv_implicit_precomp": _CONV,
    "conv_gemm_1x1": (("conv1x1", "float"), ("conv1x1", "half")),
    "conv_winograd_nonfused": _CONV,
    "conv_winograd_fused": _CONV,
    "matmul_tc": (("matmul", "half"), ("matmul", "bfloat16"), ("matmul_large", "half")),
    "conv_tc": (("conv3x3_nhwc", "half"), ("conv3x3_nhwc", "bfloat16")),
    "data_movement": (("transpose", "float"), ("concat", "float")),
    "conv_direct": (("depthwise3x3", "float"),),
    "matmul_wgmma": (("matmul_large", "bfloat16"), ("matmul_large", "half"), ("matmul", "bfloat16")),
    "attention_flash_fwd": (("sdpa_fwd", "half"), ("sdpa_fwd", "float")),
    "attention_flash_bwd": (("sdpa_bwd", "half"), ("sdpa_bwd", "float")),
    "attention_tc_fwd": (("sdpa_fwd", "half"), ("sdpa_fwd", "bfloat16")),
    "attention_tc_bwd": (("sdpa_bwd", "half"), ("sdpa_bwd", "bfloat16")),
    "attention_wgmma_fwd": (("sdpa_fwd_d64", "bfloat16"), ("sdpa_fwd_d64", "half")),
    "ctc": (("ctc_loss", "float"),),
}


def build(problem, dtype):
    """The finalized OpGraph of problem ``problem`` (a :data:`PROBLEMS` name) in data type ``dtype``
    (a :data:`DTYPES` name)."""
    return PROBLEMS[problem](DTYPES[dtype]).finalize()
