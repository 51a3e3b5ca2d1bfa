"""Run one op-graph node on the float64 oracle, by the IR's op name, port names and attributes.

``run_op(op, inputs, attrs, out_shapes=None, out_dtypes=None)``: ``op`` is an IR node's ``OP``
string ('conv_fprop', 'pointwise', 'sdpa_fwd', ...), ``inputs`` maps input port names to arrays
(by-value scalars as Python numbers or 0-d arrays), ``attrs`` maps attribute names (the node's
ATTRS keys) to values; missing attributes take the IR defaults. ``out_shapes`` gives output dims
where the inputs do not determine them (reduction Y, conv_dgrad DX, conv_wgrad DW, resample_bwd DX
without X, rng Y, reshape Y, paged_cache_load Y, resample_fwd Y for NEAREST / BILINEAR);
``out_dtypes`` gives ml_dtypes names for block_scale_quantize's Y / SCALE ('float8_e4m3fn' and
'e8m0' by default; SCALE 'float8_e4m3fn' selects NVFP4-style scales). Returns a dict of output
port -> float64 array (bool for comparisons, int64 for IDX).

``run_node(node, inputs, out_shapes=None, out_dtypes=None)`` does the same for any object with
``OP``, ``ATTRS`` and the attribute values as attributes (an IR node), taking missing output
shapes from ``node.outputs[port].dims`` when present. ``run_graph(graph, values)`` runs every node
of an op graph (``graph.topo_order()``, or ``graph.nodes`` / a node list already in order) with
``values`` mapping tensor uid -> array for the graph inputs (by-value tensors supply their own
``value``), and returns uid -> float64 array for every tensor, intermediates included (the oracle
keeps virtual tensors in float64; a kernel rounds them to the intermediate type).
Nothing from ncudnn.ir is imported.

Blending: conv / resample ``alpha`` scales the result; ``beta`` needs the prior output passed as
input port '<OUT>_PRIOR' (e.g. 'Y_PRIOR'), else beta must be 0.
SDPA dropout with dropout_probability p > 0 draws the keep mask as
rng_generate((B, H, Sq, Sk), BERNOULLI, SEED, OFFSET, bernoulli_probability=1 - p).
"""
import numpy as np

from ..types import (cudnnBackendNormFwdPhase_t as PH, cudnnBnFinalizeStatsMode_t as BF,
                     cudnnConvolutionMode_t as CM, cudnnResampleMode_t as RSM)
# function imports only: the package re-exports functions under some module names (pointwise,
# reduction), so ``from . import pointwise`` would give the function, not the module
from .attention import sdpa_backward, sdpa_forward
from .conv import conv_dgrad, conv_fprop, conv_wgrad
from .ctc import ctc_loss
from .matmul import matmul
from .norm import bn_bwd_weights, bn_finalize, genstats
from .norm_graph import norm_backward, norm_forward
from .paged import paged_cache_load
from .pointwise import _BWD as _PW_BWD, POINTWISE_ARITY, pointwise, pointwise_mode
from .quantize import block_scale_dequantize, block_scale_quantize
from .reduction import reduction
from .resample import resample_backward, resample_forward
from .rng import rng_generate
from ._util import f64

__all__ = ["run_op", "run_node", "run_graph", "SUPPORTED_OPS"]


def _scalar(v):
    return None if v is None else float(np.asarray(v, dtype=np.float64).reshape(-1)[0])


def _blend(out, port, r, ins, a):
    alpha = 1.0 if a.get("alpha") is None else float(a["alpha"])
    beta = 0.0 if a.get("beta") is None else float(a["beta"])
    r = alpha * r
    if beta:
        if port + "_PRIOR" not in ins:
            raise ValueError(f"beta != 0 needs input '{port}_PRIOR'")
        r = r + beta * f64(ins[port + "_PRIOR"])
    out[port] = r


def _conv_kw(a, x_shape, w_shape):
    return dict(stride=tuple(a["stride"]), pre_pad=tuple(a["pre_padding"]),
                post_pad=tuple(a["post_padding"]), dilation=tuple(a["dilation"]),
                groups=x_shape[1] // w_shape[1],
                cross_correlation=int(a.get("mode", 1)) == int(CM.CUDNN_CROSS_CORRELATION))


def _pointwise(ins, a, shp, dts):
    mode = pointwise_mode(a["mode"])
    params = {k: a[k] for k in ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope",
                                "elu_alpha", "softplus_beta", "swish_beta", "nan_propagation")
              if a.get(k) is not None}
    if a.get("axis") is not None:
        params["axis"] = int(a["axis"])
    if mode in _PW_BWD:
        return {"DX": pointwise(mode, ins["DY"], ins["X"], **params)}
    params.update(alpha1=a.get("alpha1", 1.0), alpha2=a.get("alpha2", 1.0))
    ops = [ins.get(p) for p in ("X", "B", "T")[:POINTWISE_ARITY[mode]]]
    return {"Y": pointwise(mode, *ops, **params)}


def _conv(op):
    def run(ins, a, shp, dts):
        out = {}
        if op == "conv_fprop":
            x, w = f64(ins["X"]), f64(ins["W"])
            _blend(out, "Y", conv_fprop(x, w, **_conv_kw(a, x.shape, w.shape)), ins, a)
        elif op == "conv_dgrad":
            w, xs = f64(ins["W"]), tuple(shp["DX"])
            _blend(out, "DX", conv_dgrad(ins["DY"], w, xs, **_conv_kw(a, xs, w.shape)),
                   ins, a)
        else:
            x, ws = f64(ins["X"]), tuple(shp["DW"])
            _blend(out, "DW", conv_wgrad(x, ins["DY"], ws, **_conv_kw(a, x.shape, ws)),
                   ins, a)
        return out
    return run


def _resample_args(a):
    return (RSM(int(a["mode"])), tuple(a["window"]), tuple(a["stride"]), tuple(a["pre_padding"]),
            tuple(a["post_padding"]))


def _resample_fwd(ins, a, shp, dts):
    mode, *geo = _resample_args(a)
    r = resample_forward(ins["X"], mode, *geo, padding_mode=a.get("padding_mode", 0),
                                  nan_propagation=a.get("nan_propagation", 0),
                                  y_shape=shp.get("Y"))
    out = {}
    if mode == RSM.CUDNN_RESAMPLE_MAXPOOL:
        _blend(out, "Y", r[0], ins, a)
        out["IDX"] = r[1]
    else:
        _blend(out, "Y", r, ins, a)
    return out


def _resample_bwd(ins, a, shp, dts):
    mode, *geo = _resample_args(a)
    xs = f64(ins["X"]).shape if "X" in ins else tuple(shp["DX"])
    dx = resample_backward(ins["DY"], mode, *geo, xs, padding_mode=a.get("padding_mode", 0),
                                    index=ins.get("IDX"), x=ins.get("X"),
                                    nan_propagation=a.get("nan_propagation", 0))
    out = {}
    _blend(out, "DX", dx, ins, a)
    return out


def _bn_finalize(ins, a, shp, dts):
    training = int(a.get("mode", 0)) == int(BF.CUDNN_BN_FINALIZE_STATISTICS_TRAINING)
    r = bn_finalize(ins["SUM"], ins["SQSUM"], ins["SCALE"], ins["BIAS"],
                         _scalar(ins["ACCUM_COUNT"]), _scalar(ins["EPSILON"]),
                         _scalar(ins.get("EXP_AVG_FACTOR")) or 0.0, ins.get("PREV_RUNNING_MEAN"),
                         ins.get("PREV_RUNNING_VAR"), training=training)
    names = dict(eq_scale="EQ_SCALE", eq_bias="EQ_BIAS", saved_mean="SAVED_MEAN",
                 saved_inv_std="SAVED_INV_STD", running_mean="UPDATED_RUNNING_MEAN",
                 running_var="UPDATED_RUNNING_VAR")
    return {names[k]: v for k, v in r.items() if v is not None}


def _bn_bwd_weights(ins, a, shp, dts):
    r = bn_bwd_weights(f64(ins["X"]), ins["MEAN"], ins["INV_STD"], ins["SCALE"],
                            ins["DY_SUM"], ins["DY_X_SUM"])
    return {k.upper(): v for k, v in r.items()}


def _norm_fwd(ins, a, shp, dts):
    return norm_forward(
        a["mode"], ins["X"], _scalar(ins["EPSILON"]), ins.get("SCALE"), ins.get("BIAS"),
        PH(int(a.get("phase", PH.CUDNN_NORM_FWD_TRAINING))), mean=ins.get("MEAN_IN"),
        inv_variance=ins.get("INV_VARIANCE_IN"), running_mean=ins.get("INPUT_RUNNING_MEAN"),
        running_var=ins.get("INPUT_RUNNING_VAR"), momentum=_scalar(ins.get("EXP_AVG_FACTOR")))


def _norm_bwd(ins, a, shp, dts):
    r = norm_backward(a["mode"], ins["X"], ins["DY"], ins["SCALE"], ins.get("MEAN"),
                                 ins.get("INV_VARIANCE"))
    return {k: v for k, v in r.items() if v is not None}


def _sdpa_kw(ins, a, q_shape, k_shape):
    scale = _scalar(ins["SCALE"]) if "SCALE" in ins else float(a.get("attn_scale") or 1.0)
    causal = bool(a.get("causal_mask")) or bool(a.get("causal_mask_bottom_right"))
    align = "bottom_right" if a.get("causal_mask_bottom_right") else \
        ("top_left" if causal else a.get("diagonal_alignment", "top_left"))
    left = a.get("sliding_window_length", a.get("left_bound"))
    kw = dict(causal=causal, diagonal_alignment=align, right_bound=None if causal else a.get("right_bound"),
              bias=ins.get("BIAS"), seq_len_q=ins.get("SEQ_LEN_Q"), seq_len_kv=ins.get("SEQ_LEN_KV"),
              sliding_window_length=left, alibi=bool(a.get("alibi_mask")))
    p = float(a.get("dropout_probability") or 0.0)
    if p > 0:
        B, H, Sq = q_shape[:3]
        kw["dropout_mask"] = rng_generate((B, H, Sq, k_shape[2]), "BERNOULLI",
                                              int(_scalar(ins["SEED"])),
                                              int(_scalar(ins.get("OFFSET")) or 0),
                                              bernoulli_probability=1.0 - p)
        kw["dropout_scale"] = 1.0 / (1.0 - p)
    return scale, kw


def _sdpa_fwd(ins, a, shp, dts):
    q, k = f64(ins["Q"]), f64(ins["K"])
    scale, kw = _sdpa_kw(ins, a, q.shape, k.shape)
    o, stats = sdpa_forward(q, k, ins["V"], scale, **kw)
    return {"O": o, "STATS": stats}


def _sdpa_bwd(ins, a, shp, dts):
    q, k = f64(ins["Q"]), f64(ins["K"])
    scale, kw = _sdpa_kw(ins, a, q.shape, k.shape)
    r = sdpa_backward(q, k, ins["V"], ins["O"], ins["DO"], ins["STATS"], scale,
                      return_dbias="BIAS" in ins, **kw)
    out = {"DQ": r[0], "DK": r[1], "DV": r[2]}
    if "BIAS" in ins:
        out["DBIAS"] = r[3]
    return out


def _rng(ins, a, shp, dts):
    seed = _scalar(ins.get("SEED"))
    seed = int(a.get("seed", 0) if seed is None else seed)
    return {"Y": rng_generate(tuple(shp["Y"]), a.get("distribution", 0), seed,
                                  int(_scalar(ins.get("OFFSET")) or 0),
                                  uniform_min=a.get("uniform_min", 0.0),
                                  uniform_max=a.get("uniform_max", 1.0),
                                  bernoulli_probability=a.get("bernoulli_probability", 0.5),
                                  normal_mean=a.get("normal_mean", 0.0),
                                  normal_std=a.get("normal_std", 1.0))}


def _bsq(ins, a, shp, dts):
    elem = dts.get("Y", "float8_e4m3fn")
    fmt = "e4m3" if dts.get("SCALE") == "float8_e4m3fn" else "e8m0"
    q, s = block_scale_quantize(ins["X"], int(a["block_size"]), elem,
                                         axis=int(a.get("axis", -1)), scale_format=fmt)
    return {"Y": q, "SCALE": s}


def _concat(ins, a, shp, dts):
    xs = [f64(ins[p]) for p in sorted((p for p in ins if p[0] == "X"), key=lambda p: int(p[1:]))]
    return {"Y": np.concatenate(xs, axis=int(a["axis"]))}


def _slice(ins, a, shp, dts):
    x = f64(ins["X"])
    steps = a.get("strides") or [1] * x.ndim
    return {"Y": x[tuple(slice(int(b), int(e), int(st))
                         for b, e, st in zip(a["start_indices"], a["limit_indices"], steps))]}


def _ctc_loss(ins, a, shp, dts):
    """SOFTMAX normalization (1) takes activations; an entry whose labels cannot fit gets zero gradients
    (what ZERO_OOB writes; under SKIP_OOB the engine leaves them unwritten)."""
    costs, grads = ctc_loss(ins["PROBS"], ins["LABELS"], ins["INPUT_LENGTHS"], ins["LABEL_LENGTHS"],
                            softmax_input=int(a.get("normalization") or 0) == 1)
    return {"COSTS": costs, "GRADS": grads}


_RUN = {
    "pointwise": _pointwise,
    "reduction": lambda ins, a, shp, dts: {"Y": reduction(a["mode"], ins["X"],
                                                                    shp["Y"])},
    "matmul": lambda ins, a, shp, dts: {"C": matmul(
        ins["A"], ins["B"], m_override=ins.get("M_OVERRIDE"), n_override=ins.get("N_OVERRIDE"),
        k_override=ins.get("K_OVERRIDE"), padding_value=float(a.get("padding_value") or 0.0))},
    "conv_fprop": _conv("conv_fprop"), "conv_dgrad": _conv("conv_dgrad"),
    "conv_wgrad": _conv("conv_wgrad"),
    "genstats": lambda ins, a, shp, dts: dict(zip(("SUM", "SQSUM"), genstats(ins["X"]))),
    "bn_finalize": _bn_finalize, "bn_bwd_weights": _bn_bwd_weights,
    "norm_fwd": _norm_fwd, "norm_bwd": _norm_bwd,
    "resample_fwd": _resample_fwd, "resample_bwd": _resample_bwd,
    "sdpa_fwd": _sdpa_fwd, "sdpa_bwd": _sdpa_bwd,
    "rng": _rng,
    "block_scale_quantize": _bsq,
    "block_scale_dequantize": lambda ins, a, shp, dts: {"Y": block_scale_dequantize(
        ins["X"], ins["SCALE"], int(a["block_size"]))},
    "paged_cache_load": lambda ins, a, shp, dts: {"Y": paged_cache_load(
        ins["CONTAINER"], ins["PAGE_TABLE"], ins["SEQUENCE"],
        max_seq_len=tuple(shp["Y"])[2] if "Y" in shp else None)},
    "concat": _concat,
    "reshape": lambda ins, a, shp, dts: {"Y": f64(ins["X"]).reshape(tuple(shp["Y"]))},
    "signal": lambda ins, a, shp, dts: {"Y": f64(ins["X"])} if "X" in ins else {},
    "slice": _slice,
    "ctc_loss": _ctc_loss,
}

#: op names run_op understands
SUPPORTED_OPS = frozenset(_RUN)


def run_op(op, inputs, attrs=None, out_shapes=None, out_dtypes=None):
    """Outputs (port -> float64 array) of IR op ``op``; see the module docstring."""
    if op not in _RUN:
        raise ValueError(f"no reference for op {op!r}")
    return _RUN[op](dict(inputs), dict(attrs or {}), dict(out_shapes or {}), dict(out_dtypes or {}))


def run_node(node, inputs, out_shapes=None, out_dtypes=None):
    """run_op for an IR-node-like object (OP, ATTRS, attributes, optional outputs with dims)."""
    attrs = {k: getattr(node, k, None) for k in getattr(node, "ATTRS", {})}
    attrs = {k: v for k, v in attrs.items() if v is not None and repr(v) != "REQUIRED"}
    shapes = {p: t.dims for p, t in getattr(node, "outputs", {}).items()
              if getattr(t, "dims", None) is not None}
    shapes.update(out_shapes or {})
    return run_op(node.OP, inputs, attrs, shapes, out_dtypes)


def _round_through(a, dtype):
    a = np.asarray(a)
    if a.dtype.kind in "bi":
        return a
    return np.asarray(a, dtype=np.float64).astype(dtype).astype(np.float32).astype(np.float64)


def run_graph(graph, values, round_virtual=None):
    """Evaluate every node of ``graph`` in topological order; returns uid -> array (see above).

    ``round_virtual`` (a NumPy / ml_dtypes dtype, e.g. np.float32 or ml_dtypes.bfloat16) rounds
    every virtual tensor through that type, mimicking a fused kernel that keeps intermediates in
    the graph's intermediate data type; None keeps them exact.
    """
    if hasattr(graph, "topo_order"):
        nodes = graph.topo_order()
    else:
        nodes = list(getattr(graph, "nodes", graph))
    env = dict(values)
    for node in nodes:
        ins = {}
        for port, t in node.inputs.items():
            if getattr(t, "is_by_value", False):
                ins[port] = t.value
            elif t.uid in env:
                ins[port] = env[t.uid]
            else:
                raise ValueError(f"node {getattr(node, 'name', node.OP)!r}: no value for {port} "
                                 f"(uid {t.uid})")
        outs = run_node(node, ins)
        for port, t in node.outputs.items():
            if port in outs:
                v = outs[port]
                if round_virtual is not None and getattr(t, "is_virtual", False):
                    v = _round_through(v, round_virtual)
                env[t.uid] = v
    return env
