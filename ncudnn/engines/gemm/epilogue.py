"""The fused epilogue of the GEMM-family engines: the subgraph's pointwise chain after the anchor as a
:class:`~ncudnn.kernels.pointwise.epilogue.EpilogueSpec` (one broadcast vector operand under any binary
float mode (two or more: packed into one operand, engines/gemm/packing.py), unary pointwise, scale, one
residual / backward-activation operand), or a :class:`~ncudnn.engines.gemm.dtypes.Reject` naming the node that cannot
fuse; and the run-time alpha of a plan (leading by-value scales folded in).
"""
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ...kernels.pointwise import epilogue as ep
from ...kernels.pointwise import ops as po
from ...types import cudnnPointwiseMode_t, cudnnStatus_t
from .dtypes import Reject, check_tensor, kdtype
from .packing import pack_vectors

__all__ = ["Epilogue", "CHANNEL_BIAS", "channel_axis", "epilogue_of", "scalar_value", "alpha_of"]

S = cudnnStatus_t
PM = cudnnPointwiseMode_t

_PARAMS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "elu_alpha", "softplus_beta",
           "swish_beta", "nan_propagation", "alpha1", "alpha2")
_COMMUTATIVE = {PM.CUDNN_POINTWISE_ADD, PM.CUDNN_POINTWISE_MUL, PM.CUDNN_POINTWISE_MAX, PM.CUDNN_POINTWISE_MIN}


def _params(n, swap=False):
    p = {}
    for k in _PARAMS:
        v = getattr(n, k, None)
        if v is not None:
            p[k] = int(v) if k == "nan_propagation" else float(v)
    if swap:
        p["alpha1"], p["alpha2"] = p.get("alpha2", 1.0), p.get("alpha1", 1.0)
    return p


@dataclass
class Epilogue:
    """The fused chain: kernel steps and the tensors they read."""

    spec: ep.EpilogueSpec
    out: object                       # the TensorDesc finally written
    bias: object = None               # TensorDesc read by the bias step(s): a PackedVectors for two or more
    bias_axis: Optional[str] = None
    residual: object = None           # TensorDesc read by the residual step
    alpha_scalars: Tuple[int, ...] = ()   # by-value uids folded into alpha (leading scales)
    const_scalars: Tuple[Tuple[int, float], ...] = ()  # by-value uids compiled in as constants

    @property
    def linear(self):
        return self.spec.linear


#: epilogue_of ``rule`` of a conv output's bias: :func:`channel_axis` (ConvProblem and WinoProblem share
#: the Epilogue of a subgraph)
CHANNEL_BIAS = "conv_channel_bias"


def channel_axis(t, out_dims):
    """The broadcast axis of operand ``t`` onto a conv output of dims ``out_dims``: "col" (same rank, dims 1
    except the channel count at dim 1), "scalar" (same rank, every dim 1), else None."""
    if len(t.dims) != len(out_dims) or any(d != 1 for i, d in enumerate(t.dims) if i != 1):
        return None
    if t.dims[1] == out_dims[1]:
        return "col"
    return "scalar" if t.dims[1] == 1 else None


def epilogue_of(sub, out_dims, classify_bias, allow_bias=True, allow_residual=True, rule=None):
    """Translate ``sub.epilogue`` (pointwise nodes after the anchor) into an :class:`Epilogue`.

    ``classify_bias(t) -> axis | None``: whether a broadcast tensor is a vector operand of the anchor's
    output of dims ``out_dims`` ("col" / "row"; "scalar": one element, read at offset 0; "batch": one
    element per GEMM batch, at the batch offset the kernels compute), fused as any binary float mode. Raises :class:`Reject` naming the node that cannot fuse.
    ``rule``: a name for what ``classify_bias`` decides; callers passing the same rule, dims and flags
    for one subgraph share one Epilogue (remembered on the subgraph; a Reject is not remembered).
    """
    if rule is None:
        return _epilogue_of(sub, out_dims, classify_bias, allow_bias, allow_residual)
    memo = sub.__dict__.get("_epilogue_of")
    if memo is None:
        memo = sub.__dict__["_epilogue_of"] = {}
    key = (rule, tuple(out_dims), allow_bias, allow_residual)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _epilogue_of(sub, out_dims, classify_bias, allow_bias, allow_residual)
    return hit


#: pointwise modes by value (an IntEnum member hashes and compares as its int)
_MODE_OF = {m: m for m in PM}
_FACTS = {}


def _mode_facts(n, mode):
    """(``n.operand_ports()``, whether the mode is a supported float-valued one), remembered per
    (node class, mode): both depend on nothing else."""
    key = (n.__class__, mode)
    hit = _FACTS.get(key)
    if hit is None:
        hit = _FACTS[key] = (n.operand_ports(),
                             int(mode) in po.SUPPORTED_MODES and po.result_kind(mode) == "float")
    return hit


def _epilogue_of(sub, out_dims, classify_bias, allow_bias, allow_residual):
    anchor_out = next(iter(sub.anchor.outputs.values()))
    cur, out = anchor_out.uid, anchor_out
    steps, bias, axis, residual = [], None, None, None
    vectors = []        # (node, operand, axis, step index, (mode, swap, params)) of each vector step
    alpha_uids, consts = [], []
    for n in sub.epilogue:
        mode = _MODE_OF.get(n.mode)
        if mode is None:
            mode = PM(int(n.mode))
        mk = _mode_facts(n, mode)
        ports, oport = mk[0]
        ins = [n.inputs[p] for p in ports]
        pos = [i for i, t in enumerate(ins) if t.uid == cur]
        where = f"node '{n.name}' ({mode.name})"
        if len(pos) != 1:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{where}: reads the chain value "
                         f"{len(pos)} times")
        if not mk[1]:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: not a float-valued pointwise mode")
        if len(ins) == 1:
            try:
                steps.append(ep.pointwise(mode, **_params(n)))
            except (ValueError, TypeError) as e:
                raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {e}") from None
        elif len(ins) == 2:
            other = ins[1 - pos[0]]
            swap = pos[0] == 1
            # a broadcast vector operand computes mode(other, chain) as well (the swapped vector step)
            vec = not other.is_by_value and tuple(other.dims) != tuple(out_dims)
            if swap and mode not in _COMMUTATIVE and not vec:
                raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: the chain value is operand "
                             f"{ports[1]}, and {mode.name} is not commutative (the epilogue computes "
                             "mode(chain, other))")
            p = _params(n, swap and mode in _COMMUTATIVE)
            unit = p.get("alpha1", 1.0) == 1.0 and p.get("alpha2", 1.0) == 1.0
            if other.is_by_value:
                if mode != PM.CUDNN_POINTWISE_MUL or not unit:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: a by-value operand fuses only as "
                                 "a MUL scale (alpha1 = alpha2 = 1)")
                if not steps:
                    alpha_uids.append(other.uid)
                else:
                    v = float(np.asarray(other.value, dtype=np.float64).reshape(-1)[0])
                    consts.append((other.uid, v))
                    steps.append(ep.scale(v))
            elif tuple(other.dims) == tuple(out_dims):
                if not allow_residual:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: this anchor's epilogue takes no "
                                 "second full tensor")
                if residual is not None:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: a second full-size operand "
                                 f"(the epilogue has one residual slot, taken by {residual.label})")
                try:
                    steps.append(ep.residual(mode, **p))
                except (ValueError, TypeError) as e:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {e}") from None
                residual = other
            else:
                ax = classify_bias(other) if allow_bias else None
                if ax is None:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: operand {other.label} of dims "
                                 f"{other.dims} broadcast onto {tuple(out_dims)}: only a per-channel / "
                                 "per-column (or per-row) vector or a one-element tensor fuses")
                vswap = swap and mode not in _COMMUTATIVE
                try:
                    steps.append(ep.vector(ax, mode, vswap, **p))
                except (ValueError, TypeError) as e:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {e}") from None
                vectors.append((n, other, ax, len(steps) - 1, (mode, vswap, p)))
                if len(vectors) > 1:
                    pack_vectors([v[:3] for v in vectors])     # a mixed axis: Reject naming this node
                bias, axis = other, ax
            check_tensor(n, "operand", other)
        else:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: three-operand modes do not fuse")
        out = n.outputs[oport]
        cur = out.uid
    if len(vectors) > 1:        # packed: one interleaved operand, step j reads slot j on the shared axis
        bias, axis = pack_vectors([v[:3] for v in vectors])
        for j, (_, _, _, i, (mode, vswap, p)) in enumerate(vectors):
            steps[i] = ep.vector(axis, mode, vswap, slot=j, **p)
    name = kdtype(out)
    if out.is_virtual and name is None:
        name = "float32"
    spec = ep.EpilogueSpec(tuple(steps), out_dtype=name or "float32")
    return Epilogue(spec, out, bias, axis, residual, tuple(alpha_uids), tuple(consts))


def scalar_value(views, uid, default):
    v = views.get(uid, default)
    return float(np.asarray(v, dtype=np.float64).reshape(-1)[0])


def alpha_of(epi, views, alpha, sub=None):
    """alpha times the leading by-value scales; checks the compiled-in ones are unchanged."""
    from ...errors import BadParamError

    tensors = {t.uid: t for n in (sub.nodes if sub is not None else ()) for t in n.tensors()}
    for uid in epi.alpha_scalars:
        alpha *= scalar_value(views, uid, tensors[uid].value if uid in tensors else 1.0)
    for uid, v in epi.const_scalars:
        got = scalar_value(views, uid, v)
        if got != v:
            raise BadParamError(f"by-value scale uid {uid} = {got}: this plan compiled {v} into its epilogue "
                                "(build a plan for the new value)", S.CUDNN_STATUS_BAD_PARAM)
    return alpha
