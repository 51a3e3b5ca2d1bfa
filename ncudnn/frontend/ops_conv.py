"""Convolution and matmul methods of pygraph.

``conv_fprop(image, weight, padding | pre_padding + post_padding, stride, dilation, convolution_mode)``
returns Y (``"<name>::Y"``); ``conv_dgrad(loss, filter, ...)`` returns DX and ``conv_wgrad(image, loss,
...)`` DW, whose dims must be set (``set_dim``) as cuDNN cannot infer them. Omitted stride / dilation are
1 and padding 0 in every spatial dim. ``matmul(A, B, compute_data_type, padding)`` returns C.
"""
from ..ir import ConvDgrad, ConvFprop, ConvWgrad, Matmul
from ..types import cudnnConvolutionMode_t, cudnnStatus_t
from .enums import convolution_mode as conv_mode_enum, enum_value
from .errors import graph_error

S = cudnnStatus_t
CONV_ATTRS = ("padding", "pre_padding", "post_padding", "stride", "dilation", "convolution_mode")


def _spatial_dims(rec, ports):
    for k in ("padding", "pre_padding", "post_padding", "stride", "dilation"):
        v = rec.params.get(k)
        if v is not None and len(v):
            return len(v)
    for p in ports:
        t = rec.tensors.get(p) if p in rec.tensors else rec.outputs[0]
        if t is not None and t.desc.dims is not None:
            return len(t.desc.dims) - 2
    raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' ({rec.kind}): the number of spatial dims "
                      "is unknown: give stride / padding / dilation lists")


def _conv_attrs(rec, ports):
    n = _spatial_dims(rec, ports)
    p = rec.params
    sym = p.get("padding")
    pre = p.get("pre_padding") if p.get("pre_padding") is not None else sym
    post = p.get("post_padding") if p.get("post_padding") is not None else sym
    mode = p.get("convolution_mode")
    mode = cudnnConvolutionMode_t(int(enum_value(mode, conv_mode_enum, "convolution_mode"))) \
        if mode is not None and int(mode) >= 0 else cudnnConvolutionMode_t.CUDNN_CROSS_CORRELATION
    return dict(spatial_dims=n, mode=mode,
                stride=list(p.get("stride") or [1] * n), dilation=list(p.get("dilation") or [1] * n),
                pre_padding=list(pre if pre is not None else [0] * n),
                post_padding=list(post if post is not None else [0] * n))


def _lower_fprop(graph, rec):
    return ConvFprop(rec.name, {"X": rec.tensors["image"].desc, "W": rec.tensors["weight"].desc},
                     {"Y": rec.outputs[0].desc}, graph._compute_dtype(rec), **_conv_attrs(rec, ("weight", "image")))


def _lower_dgrad(graph, rec):
    return ConvDgrad(rec.name, {"DY": rec.tensors["loss"].desc, "W": rec.tensors["filter"].desc},
                     {"DX": rec.outputs[0].desc}, graph._compute_dtype(rec), **_conv_attrs(rec, ("filter", "loss")))


def _lower_wgrad(graph, rec):
    return ConvWgrad(rec.name, {"X": rec.tensors["image"].desc, "DY": rec.tensors["loss"].desc},
                     {"DW": rec.outputs[0].desc}, graph._compute_dtype(rec), **_conv_attrs(rec, ("image", "loss")))


def _lower_matmul(graph, rec):
    return Matmul(rec.name, {"A": rec.tensors["A"].desc, "B": rec.tensors["B"].desc}, {"C": rec.outputs[0].desc},
                  graph._compute_dtype(rec), padding_value=float(rec.params.get("padding") or 0.0))


def _conv_method(op, ports, out_port, lower):
    def method(self, *args, compute_data_type=None, name="", out_dims=None, **kwargs):
        names = ports + CONV_ATTRS
        if len(args) > len(names):
            raise TypeError(f"{op}() takes at most {len(names)} positional arguments {names}")
        given = dict(zip(names, args))
        for k in list(kwargs):
            if k in names:
                if k in given:
                    raise TypeError(f"{op}() got multiple values for {k!r}")
                given[k] = kwargs.pop(k)
        if kwargs:
            raise TypeError(f"{op}() got unexpected arguments {sorted(kwargs)}")
        for p in ports:
            if given.get(p) is None:
                raise TypeError(f"{op}() missing tensor argument {p!r}")
        params = {k: (list(given[k]) if k != "convolution_mode" and given.get(k) is not None else given.get(k))
                  for k in CONV_ATTRS}
        return self._add_op(op, name, {p: given[p] for p in ports}, params, [out_port], lower,
                            compute_data_type=compute_data_type, out_dims=out_dims)

    method.__name__ = op
    method.__qualname__ = f"pygraph.{op}"
    method.__doc__ = (f"{op}({', '.join(ports)}, padding=None, pre_padding=None, post_padding=None, stride=None, "
                      f"dilation=None, convolution_mode=CROSS_CORRELATION, compute_data_type=None, name='') "
                      f"-> {out_port}")
    return method


class ConvMatmulOps:
    conv_fprop = _conv_method("conv_fprop", ("image", "weight"), "Y", _lower_fprop)
    conv_dgrad = _conv_method("conv_dgrad", ("loss", "filter"), "DX", _lower_dgrad)
    conv_wgrad = _conv_method("conv_wgrad", ("image", "loss"), "DW", _lower_wgrad)

    def matmul(self, A, B, compute_data_type=None, padding=0.0, name=""):
        """C = A @ B over the last two dims (batch dims broadcast). Returns C (``"<name>::C"``)."""
        return self._add_op("matmul", name, {"A": A, "B": B}, {"padding": padding}, ["C"], _lower_matmul,
                            compute_data_type=compute_data_type)
