"""Reduction, data movement, resampling and RNG methods of pygraph.

* ``reduction(input, mode) -> Y``: the output's dims (``set_dim``) choose the reduced axes;
* ``reshape(input, reshape_mode=VIEW_ONLY) -> Y``: the output's dims must be set;
* ``concatenate(inputs, axis, in_place_index=None) -> Y``;
* ``slice`` / ``transpose``: see :mod:`.ops_view`;
* beyond cudnn-frontend's Python API (cuDNN's backend has them): ``resample`` / ``resample_backward``
  with ``max_pool`` / ``avg_pool`` helpers, and ``rng``.
Outputs are named ``"<name>::OUT_0"`` (resample's index ``"<name>::Index"``).
"""
from ..ir import Concat, Reduction, Reshape, ResampleBwd, ResampleFwd, Rng
from ..types import (cudnnBackendReshapeMode_t, cudnnNanPropagation_t, cudnnPaddingMode_t, cudnnReduceTensorOp_t,
                     cudnnResampleMode_t, cudnnRngDistribution_t, cudnnStatus_t)
from .builder import op_method
from .enums import enum_value, padding_mode, reduction_mode, resample_mode, reshape_mode, rng_distribution
from .errors import graph_error
from .ops_sdpa import SdpaOps
from .ops_view import ViewOps

S = cudnnStatus_t


def _lower_reduction(graph, rec):
    mode = rec.params.get("mode")
    if mode is None or int(enum_value(mode, reduction_mode, "mode")) < 0:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' (reduction): mode is not set")
    return Reduction(rec.name, {"X": rec.tensors["input"].desc}, {"Y": rec.outputs[0].desc}, graph._compute_dtype(rec),
                     mode=cudnnReduceTensorOp_t(int(enum_value(mode, reduction_mode, "mode"))))


def _lower_reshape(graph, rec):
    mode = rec.params.get("reshape_mode")
    mode = cudnnBackendReshapeMode_t(int(enum_value(mode, reshape_mode, "reshape_mode"))) if mode is not None \
        else cudnnBackendReshapeMode_t.CUDNN_RESHAPE_VIEW_ONLY
    return Reshape(rec.name, {"X": rec.tensors["input"].desc}, {"Y": rec.outputs[0].desc}, mode=mode)


def _lower_concat(graph, rec):
    xs = rec.tensors["inputs"]
    if not xs:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' (concatenate): no inputs")
    return Concat(rec.name, {f"X{i}": t.desc for i, t in enumerate(xs)}, {"Y": rec.outputs[0].desc},
                  axis=rec.params.get("axis"), in_place_index=rec.params.get("in_place_index"))


def _resample_attrs(rec):
    p = rec.params
    mode = p.get("mode")
    if mode is None:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' ({rec.kind}): mode is not set")
    window = list(p.get("window") or [])
    n = len(window) or len(p.get("stride") or [])
    pad = p.get("padding")
    pm = p.get("padding_mode")
    return dict(mode=cudnnResampleMode_t(int(enum_value(mode, resample_mode, "mode"))), spatial_dims=n,
                window=window, stride=list(p.get("stride") or [1] * n),
                pre_padding=list(p.get("pre_padding") or pad or [0] * n),
                post_padding=list(p.get("post_padding") or pad or [0] * n),
                padding_mode=cudnnPaddingMode_t(int(enum_value(pm, padding_mode, "padding_mode")))
                if pm is not None else cudnnPaddingMode_t.CUDNN_ZERO_PAD,
                nan_propagation=cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN if p.get("propagate_nan")
                else cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN)


def _lower_resample(graph, rec):
    outs = {"Y": rec.out("Y").desc}
    idx = graph._keep_output(rec.out("Index"))
    if idx is not None:
        outs["IDX"] = idx
    return ResampleFwd(rec.name, {"X": rec.tensors["input"].desc}, outs, graph._compute_dtype(rec),
                       **_resample_attrs(rec))


def _lower_resample_bwd(graph, rec):
    t = rec.tensors
    ins = {p: t[k].desc for p, k in (("DY", "grad"), ("X", "input"), ("Y", "output"), ("IDX", "index"))
           if t.get(k) is not None}
    return ResampleBwd(rec.name, ins, {"DX": rec.out("DX").desc}, graph._compute_dtype(rec), **_resample_attrs(rec))


def _lower_rng(graph, rec):
    p = rec.params
    y = rec.outputs[0]
    dist = p.get("distribution")
    attrs = {k: p[k] for k in ("bernoulli_probability", "normal_mean", "normal_std", "uniform_min", "uniform_max")
             if p.get(k) is not None}
    if dist is not None:
        attrs["distribution"] = cudnnRngDistribution_t(int(enum_value(dist, rng_distribution, "distribution")))
    ins = {k.upper(): rec.tensors[k].desc for k in ("seed", "offset") if rec.tensors.get(k) is not None}
    return Rng(rec.name, ins, {"Y": y.desc}, graph._compute_dtype(rec), **attrs)


RESAMPLE_ATTRS = ("mode", "window", "stride", "padding", "pre_padding", "post_padding", "padding_mode",
                  "propagate_nan")


class OtherOps(SdpaOps, ViewOps):
    reduction = op_method("reduction", ("input",), ("mode",), ("OUT_0",), _lower_reduction, required=("input",),
                          doc="reduction(input, mode) -> Y; set Y's dims (1 in the reduced axes)")
    reshape = op_method("reshape", ("input",), ("reshape_mode",), ("OUT_0",), _lower_reshape, required=("input",),
                        doc="reshape(input, reshape_mode=VIEW_ONLY) -> Y; set Y's dims and strides")
    concatenate = op_method("concatenate", (), ("axis", "in_place_index"), ("OUT_0",), _lower_concat,
                            list_ports=("inputs",), required=("axis",),
                            doc="concatenate(inputs, axis, in_place_index=None) -> Y")
    resample = op_method(
        "resample", ("input",), RESAMPLE_ATTRS + ("generate_index",), ("Y", "Index"), _lower_resample,
        required=("input", "mode", "window"),
        present=lambda p, t, port: port == "Y" or bool(p.get("generate_index")),
        doc="resample(input, mode, window, stride, padding | pre_padding + post_padding, padding_mode, "
            "propagate_nan=False, generate_index=False) -> [Y, Index] (Index None unless generated)")
    resample_backward = op_method(
        "resample_backward", ("grad", "input", "output", "index"), RESAMPLE_ATTRS, ("DX",), _lower_resample_bwd,
        required=("grad", "mode", "window"),
        doc="resample_backward(grad, input=None, output=None, index=None, mode, window, ...) -> DX; set DX's dims")
    _rng = op_method(
        "rng", ("seed", "offset"), ("distribution", "bernoulli_probability", "normal_mean", "normal_std",
                                    "uniform_min", "uniform_max", "dim", "stride"), ("OUT_0",), _lower_rng,
        doc="rng(seed=None, offset=None, distribution=BERNOULLI, bernoulli_probability=0.5, ..., dim, stride) -> Y")

    def rng(self, *args, **kwargs):
        """rng(seed=None, offset=None, distribution=BERNOULLI, bernoulli_probability=0.5, normal_mean=0,
        normal_std=1, uniform_min=0, uniform_max=1, dim=None, stride=None) -> Y (random numbers; give the
        output's dims here or with set_dim)."""
        y = self._rng(*args, **kwargs)
        rec = self._records[-1]
        if rec.params.get("dim") is not None:
            y.set_dim(rec.params["dim"])
        if rec.params.get("stride") is not None:
            y.set_stride(rec.params["stride"])
        return y

    def max_pool(self, input, window, stride=None, padding=None, generate_index=False, name="",
                 compute_data_type=None):
        """Max pooling (resample MAXPOOL, -inf padding). Returns [Y, Index]."""
        return self.resample(input, mode=resample_mode.MAXPOOL, window=window, stride=stride, padding=padding,
                             padding_mode=padding_mode.NEG_INF_PAD, generate_index=generate_index, name=name,
                             compute_data_type=compute_data_type)[0 if not generate_index else slice(None)]

    def avg_pool(self, input, window, stride=None, padding=None, include_padding=True, name="",
                 compute_data_type=None):
        """Average pooling (resample AVGPOOL / AVGPOOL_EXCLUDE_PADDING). Returns Y."""
        mode = resample_mode.AVGPOOL if include_padding else resample_mode.AVGPOOL_EXCLUDE_PADDING
        return self.resample(input, mode=mode, window=window, stride=stride, padding=padding, name=name,
                             compute_data_type=compute_data_type)[0]
