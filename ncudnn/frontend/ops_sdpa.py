"""Scaled dot-product attention methods of pygraph (IR SdpaFwd / SdpaBwd nodes), with cudnn-frontend's
parameter names and meanings.

``sdpa(q, k, v, attn_scale=None, generate_stats=None | is_inference=None, bias=None, use_alibi_mask=False,
use_padding_mask=False, seq_len_q=None, seq_len_kv=None, use_causal_mask=False,
use_causal_mask_bottom_right=False, sliding_window_length=None, diagonal_alignment=TOP_LEFT,
diagonal_band_left_bound=None, diagonal_band_right_bound=None, dropout=None) -> [O, Stats]`` (Stats None
unless statistics are generated); ``sdpa_backward(q, k, v, o, dO, stats, ..., dBias=None,
use_deterministic_algorithm=False) -> [dQ, dK, dV]`` (dBias, when given, is written too).
``attn_scale`` is a float or a tensor (pass-by-value or in device memory); ``dropout`` is
``(probability, seed, offset)``. The causal flags are right bound 0 with their alignment and
``sliding_window_length`` is the left bound, as in the frontend. The frontend's other attention options
(paged caches, ragged offsets, score modifiers, sink tokens, fp8, ...) are accepted as arguments and
refused at validate with NOT_SUPPORTED naming the option when set.
"""
import numbers

from ..ir import SdpaBwd, SdpaFwd
from ..types import cudnnStatus_t
from .errors import graph_error
from .tensor import tensor

S = cudnnStatus_t
FWD_PORTS = ("q", "k", "v")
BWD_PORTS = ("q", "k", "v", "o", "dO", "stats")
SUPPORTED = {"attn_scale", "generate_stats", "is_inference", "bias", "seq_len_q", "seq_len_kv", "use_causal_mask",
             "use_causal_mask_bottom_right", "sliding_window_length", "dropout", "use_padding_mask", "use_alibi_mask",
             "diagonal_alignment", "diagonal_band_left_bound", "diagonal_band_right_bound",
             "use_deterministic_algorithm"}
#: tensor arguments (frontend name -> IR port); dBias is the backward's output
TENSOR_PORTS = {"attn_scale": "SCALE", "bias": "BIAS", "seq_len_q": "SEQ_LEN_Q", "seq_len_kv": "SEQ_LEN_KV",
                "seed": "SEED", "offset": "OFFSET"}


def _stats_wanted(params):
    if params.get("generate_stats") is not None:
        return bool(params["generate_stats"])
    return params.get("is_inference") is False


def _split(self, name, args, kwargs, ports):
    if len(args) > len(ports):
        raise TypeError(f"sdpa takes tensors {ports} positionally, the rest by keyword")
    given = dict(zip(ports, args))
    for p in ports:
        if p in kwargs:
            given[p] = kwargs.pop(p)
        if given.get(p) is None:
            raise TypeError(f"missing tensor argument {p!r}")
    tensors = dict(given)
    params = {}
    for k, v in kwargs.items():
        if k == "dropout" and v is not None:
            p, seed, offset = v[0], v[1], v[2]
            params["dropout_probability"] = float(p)
            tensors["seed"], tensors["offset"] = seed, offset
        elif isinstance(v, tensor) or (v is not None and hasattr(v, "__cuda_array_interface__")):
            tensors[k] = v
        else:
            params[k] = v
    return tensors, params


def _alignment(v):
    if v is None:
        return "top_left"
    if isinstance(v, str):
        return v.lower()
    return ("top_left", "bottom_right")[int(v)] if int(v) in (0, 1) else f"<{v}>"


def _attrs_and_ports(rec):
    p, t = rec.params, rec.tensors
    bad = sorted(k for k, v in p.items() if k not in SUPPORTED and k != "dropout_probability"
                 and v not in (None, False, 0))
    bad += sorted(k for k in t if k not in FWD_PORTS + BWD_PORTS + tuple(TENSOR_PORTS) + ("dBias",)
                  and t[k] is not None)
    if bad:
        raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{rec.name}' ({rec.kind}): option(s) {bad} are "
                          "not supported by ncudnn's attention")
    if p.get("use_causal_mask") and p.get("use_causal_mask_bottom_right"):
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' ({rec.kind}): use_causal_mask and "
                          "use_causal_mask_bottom_right cannot both be true")
    if p.get("sliding_window_length") is not None and p.get("diagonal_band_left_bound") is not None:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' ({rec.kind}): sliding_window_length and "
                          "diagonal_band_left_bound cannot be set at the same time")
    attrs = {"causal_mask": bool(p.get("use_causal_mask")),
             "causal_mask_bottom_right": bool(p.get("use_causal_mask_bottom_right")),
             "dropout_probability": float(p.get("dropout_probability") or 0.0),
             "diagonal_alignment": _alignment(p.get("diagonal_alignment")),
             "alibi_mask": bool(p.get("use_alibi_mask")), "padding_mask": bool(p.get("use_padding_mask"))}
    if p.get("sliding_window_length") is not None:
        attrs["sliding_window_length"] = int(p["sliding_window_length"])
    if p.get("diagonal_band_left_bound") is not None:
        attrs["left_bound"] = int(p["diagonal_band_left_bound"])
    if p.get("diagonal_band_right_bound") is not None:
        attrs["right_bound"] = int(p["diagonal_band_right_bound"])
    scale = p.get("attn_scale")
    if isinstance(scale, numbers.Number):
        attrs["attn_scale"] = float(scale)
    ports = {}
    for fe, ir in TENSOR_PORTS.items():
        if t.get(fe) is not None:
            ports[ir] = t[fe].desc
    return attrs, ports


def _lower_fwd(graph, rec):
    attrs, ports = _attrs_and_ports(rec)
    t = rec.tensors
    outs = {"O": rec.out("O").desc}
    stats = graph._keep_output(rec.out("Stats"))  # requested but unused and virtual: not computed
    if stats is not None:
        outs["STATS"] = stats
    attrs["generate_stats"] = stats is not None
    ins = dict(Q=t["q"].desc, K=t["k"].desc, V=t["v"].desc, **ports)
    return SdpaFwd(rec.name, ins, outs, graph._compute_dtype(rec), **attrs)


def _lower_bwd(graph, rec):
    attrs, ports = _attrs_and_ports(rec)
    attrs["deterministic"] = bool(rec.params.get("use_deterministic_algorithm"))
    t = rec.tensors
    ins = dict(Q=t["q"].desc, K=t["k"].desc, V=t["v"].desc, O=t["o"].desc, DO=t["dO"].desc, STATS=t["stats"].desc,
               **ports)
    outs = {"DQ": rec.out("dQ").desc, "DK": rec.out("dK").desc, "DV": rec.out("dV").desc}
    if t.get("dBias") is not None:
        outs["DBIAS"] = t["dBias"].desc
    return SdpaBwd(rec.name, ins, outs, graph._compute_dtype(rec), **attrs)


class SdpaOps:
    def sdpa(self, *args, name="", compute_data_type=None, **kwargs):
        """Attention forward: O = softmax(scale * Q K^T [+ bias] [masked]) V. Returns [O, Stats]."""
        tensors, params = _split(self, name, args, kwargs, FWD_PORTS)
        return self._add_op("sdpa", name, tensors, params, ["O", "Stats"], _lower_fwd,
                            compute_data_type=compute_data_type,
                            present=lambda port: port == "O" or _stats_wanted(params))

    def sdpa_backward(self, *args, name="", compute_data_type=None, **kwargs):
        """Attention backward from the forward's O and Stats. Returns [dQ, dK, dV]."""
        tensors, params = _split(self, name, args, kwargs, BWD_PORTS)
        return self._add_op("sdpa_backward", name, tensors, params, ["dQ", "dK", "dV"], _lower_bwd,
                            compute_data_type=compute_data_type)
