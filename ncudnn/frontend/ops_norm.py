"""Normalization methods of pygraph, each one IR NormFwd / NormBwd / GenStats node.

Return conventions are the frontend's: ``batchnorm -> [Y, mean, inv_var, next_running_mean,
next_running_var]`` (the running outputs None without running inputs), ``layernorm / instancenorm ->
[Y, mean, inv_var]`` and ``rmsnorm -> [Y, inv_var]`` (statistics None in the INFERENCE phase),
``*_backward -> [DX, DScale, DBias]``, ``batchnorm_inference -> Y``, ``genstats -> [SUM, SQ_SUM]``.
"""
from ..ir import GenStats, NormBwd, NormFwd
from ..types import cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM, cudnnStatus_t
from .builder import op_method
from .enums import enum_value, norm_forward_phase
from .errors import graph_error

S = cudnnStatus_t
STAT_SUFFIX = {"mean": "MEAN", "inv_var": "INV_VARIANCE", "next_running_mean": "NEXT_RUNNING_MEAN",
               "next_running_var": "NEXT_RUNNING_VAR", "DScale": "DSCALE", "DBias": "DBIAS"}


def _phase(params):
    p = params.get("norm_forward_phase")
    if p is None or int(enum_value(p, norm_forward_phase, "norm_forward_phase")) < 0:
        return PH.CUDNN_NORM_FWD_TRAINING
    return PH(int(enum_value(p, norm_forward_phase, "norm_forward_phase")))


def _training(params, tensors, port):
    return _phase(params) == PH.CUDNN_NORM_FWD_TRAINING


def _d(t):
    return t.desc if t is not None else None


def _no_peers(rec):
    if rec.tensors.get("peer_stats"):
        raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{rec.name}' ({rec.kind}): peer_stats "
                          "(batch norm statistics across devices) is not supported")


def _ins(**ports):
    return {k: v.desc for k, v in ports.items() if v is not None}


def _norm_fwd(mode, out_map):
    """lower() for a forward norm; ``out_map``: frontend output port -> IR output port."""
    def lower(graph, rec):
        t = rec.tensors
        phase = _phase(rec.params)
        outs = {}
        for port, ir_port in out_map.items():
            o = rec.out(port)
            required = port == "Y" or (phase == PH.CUDNN_NORM_FWD_TRAINING and port in ("mean", "inv_var")
                                       and mode != NM.CUDNN_RMS_NORM) or port.startswith("next_")
            d = graph._keep_output(o, required=required)
            if d is not None:
                outs[ir_port] = d
        running = t.get("in_running_mean") is not None or t.get("in_running_var") is not None
        ins = _ins(X=t["input"], SCALE=t.get("scale"), BIAS=t.get("bias"), EPSILON=t.get("epsilon"),
                   EXP_AVG_FACTOR=t.get("momentum") if running else None,  # momentum only moves running stats
                   INPUT_RUNNING_MEAN=t.get("in_running_mean"), INPUT_RUNNING_VAR=t.get("in_running_var"))
        if mode == NM.CUDNN_BATCH_NORM:
            _no_peers(rec)
        return NormFwd(rec.name, ins, outs, graph._compute_dtype(rec), mode=mode, phase=phase)

    return lower


def _norm_bwd(mode):
    def lower(graph, rec):
        t = rec.tensors
        if mode == NM.CUDNN_BATCH_NORM:
            _no_peers(rec)
        outs = {"DX": rec.out("DX").desc}
        for port, ir_port in (("DScale", "DSCALE"), ("DBias", "DBIAS")):
            d = graph._keep_output(rec.out(port))
            if d is not None:
                outs[ir_port] = d
        ins = _ins(X=t["input"], DY=t["grad"], SCALE=t.get("scale"), MEAN=t.get("mean"),
                   INV_VARIANCE=t.get("inv_variance"))
        return NormBwd(rec.name, ins, outs, graph._compute_dtype(rec), mode=mode)

    return lower


def _lower_bn_inference(graph, rec):
    t = rec.tensors
    eps = graph._hidden_scalar(rec, "epsilon", 0.0)
    ins = _ins(X=t["input"], MEAN_IN=t["mean"], INV_VARIANCE_IN=t["inv_variance"], SCALE=t["scale"],
               BIAS=t["bias"], EPSILON=eps)
    return NormFwd(rec.name, ins, {"Y": rec.out("Y").desc}, graph._compute_dtype(rec), mode=NM.CUDNN_BATCH_NORM,
                   phase=PH.CUDNN_NORM_FWD_INFERENCE)


def _lower_genstats(graph, rec):
    return GenStats(rec.name, {"X": rec.tensors["input"].desc},
                    {"SUM": rec.out("SUM").desc, "SQSUM": rec.out("SQ_SUM").desc}, graph._compute_dtype(rec))


FWD_OUT = {"Y": "Y", "mean": "MEAN", "inv_var": "INV_VARIANCE"}
BN_OUT = dict(FWD_OUT, next_running_mean="OUTPUT_RUNNING_MEAN", next_running_var="OUTPUT_RUNNING_VAR")
NORM_PORTS = ("input", "scale", "bias", "epsilon")
BWD_PORTS = ("grad", "input", "scale", "mean", "inv_variance")
BWD_OUTS = ("DX", "DScale", "DBias")


def _has_scale(params, tensors, port):
    return port == "DX" or tensors.get("scale") is not None


def _bn_present(params, tensors, port):
    if port == "next_running_mean":
        return tensors.get("in_running_mean") is not None
    if port == "next_running_var":
        return tensors.get("in_running_var") is not None
    return True


def _rms_bwd_present(params, tensors, port):
    if port == "DBias":
        return tensors.get("scale") is not None and params.get("has_dbias", True) is not False
    return _has_scale(params, tensors, port)


class NormOps:
    batchnorm = op_method(
        "batchnorm", ("input", "scale", "bias", "in_running_mean", "in_running_var", "epsilon", "momentum"), (),
        ("Y", "mean", "inv_var", "next_running_mean", "next_running_var"), _norm_fwd(NM.CUDNN_BATCH_NORM, BN_OUT),
        required=("input", "scale", "bias", "epsilon"), list_ports=("peer_stats",), present=_bn_present,
        suffix=STAT_SUFFIX,
        doc="batchnorm(input, scale, bias, in_running_mean, in_running_var, epsilon, momentum, peer_stats=[]) "
            "-> [Y, mean, inv_var, next_running_mean, next_running_var] (training-phase batch norm)")
    batchnorm_inference = op_method(
        "batchnorm_inference", ("input", "mean", "inv_variance", "scale", "bias"), (), ("Y",),
        _lower_bn_inference, required=("input", "mean", "inv_variance", "scale", "bias"),
        doc="batchnorm_inference(input, mean, inv_variance, scale, bias) -> Y")
    batchnorm_backward = op_method(
        "batchnorm_backward", BWD_PORTS, (), BWD_OUTS, _norm_bwd(NM.CUDNN_BATCH_NORM), required=BWD_PORTS,
        list_ports=("peer_stats",), suffix=STAT_SUFFIX,
        doc="batchnorm_backward(grad, input, scale, mean, inv_variance, peer_stats=[]) -> [DX, DScale, DBias]")
    layernorm = op_method(
        "layernorm", NORM_PORTS, ("norm_forward_phase",), ("Y", "mean", "inv_var"),
        _norm_fwd(NM.CUDNN_LAYER_NORM, FWD_OUT), required=("input", "epsilon"),
        present=lambda p, t, port: port == "Y" or _training(p, t, port), suffix=STAT_SUFFIX,
        doc="layernorm(input, scale, bias, epsilon, norm_forward_phase=TRAINING) -> [Y, mean, inv_var]")
    layernorm_backward = op_method(
        "layernorm_backward", BWD_PORTS, (), BWD_OUTS, _norm_bwd(NM.CUDNN_LAYER_NORM),
        required=("grad", "input", "mean", "inv_variance"), present=_has_scale, suffix=STAT_SUFFIX,
        doc="layernorm_backward(grad, input, scale, mean, inv_variance) -> [DX, DScale, DBias]")
    instancenorm = op_method(
        "instancenorm", NORM_PORTS, ("norm_forward_phase",), ("Y", "mean", "inv_var"),
        _norm_fwd(NM.CUDNN_INSTANCE_NORM, FWD_OUT), required=("input", "epsilon"),
        present=lambda p, t, port: port == "Y" or _training(p, t, port), suffix=STAT_SUFFIX,
        doc="instancenorm(input, scale, bias, epsilon, norm_forward_phase=TRAINING) -> [Y, mean, inv_var]")
    instancenorm_backward = op_method(
        "instancenorm_backward", BWD_PORTS, (), BWD_OUTS, _norm_bwd(NM.CUDNN_INSTANCE_NORM),
        required=BWD_PORTS, suffix=STAT_SUFFIX,
        doc="instancenorm_backward(grad, input, scale, mean, inv_variance) -> [DX, DScale, DBias]")
    rmsnorm = op_method(
        "rmsnorm", NORM_PORTS, ("norm_forward_phase",), ("Y", "inv_var"),
        _norm_fwd(NM.CUDNN_RMS_NORM, {"Y": "Y", "inv_var": "INV_VARIANCE"}), required=("input", "epsilon"),
        present=lambda p, t, port: port == "Y" or _training(p, t, port), suffix=STAT_SUFFIX,
        doc="rmsnorm(input, scale, bias=None, epsilon, norm_forward_phase=TRAINING) -> [Y, inv_var]")
    rmsnorm_backward = op_method(
        "rmsnorm_backward", ("grad", "input", "scale", "inv_variance"), ("has_dbias",), BWD_OUTS,
        _norm_bwd(NM.CUDNN_RMS_NORM), required=("grad", "input", "inv_variance"), present=_rms_bwd_present,
        suffix={"DScale": "Dscale", "DBias": "Dbias"},
        doc="rmsnorm_backward(grad, input, scale, inv_variance, has_dbias=True) -> [DX, DScale, DBias]")
    adalayernorm = op_method(
        "adalayernorm", NORM_PORTS, ("norm_forward_phase",), ("Y", "mean", "inv_var"),
        _norm_fwd(NM.CUDNN_ADA_LAYER_NORM, FWD_OUT), required=("input", "scale", "epsilon"),
        present=lambda p, t, port: port == "Y" or _training(p, t, port), suffix=STAT_SUFFIX,
        doc="adalayernorm(input, scale, bias=None, epsilon, norm_forward_phase=TRAINING) -> [Y, mean, inv_var]\n\n"
            "Adaptive layer norm (CUDNN_ADA_LAYER_NORM, cuDNN 9.9): y = scale * (x - mean) * inv_var + bias with "
            "scale / bias varying per batch entry: input [B, S, C], scale / bias [B, 1, C] normalize each of the "
            "B * S rows over C with that entry's scale; mean / inv_var are [B, S, 1] (X's dims, 1 where scale "
            "is not 1), written in TRAINING only (None in INFERENCE). scale is required, bias optional, as "
            "in cudnn-frontend; norm_forward_phase defaults to TRAINING like ncudnn's layernorm (cudnn-frontend "
            "requires it).")
    adalayernorm_backward = op_method(
        "adalayernorm_backward", BWD_PORTS, (), BWD_OUTS, _norm_bwd(NM.CUDNN_ADA_LAYER_NORM), required=BWD_PORTS,
        suffix=STAT_SUFFIX,
        doc="adalayernorm_backward(grad, input, scale, mean, inv_variance) -> [DX, DScale, DBias]\n\n"
            "The gradient of adalayernorm: DX like input, DScale / DBias shaped like scale ([B, 1, C]: summed "
            "over S for each batch entry); mean / inv_variance the forward's saved [B, S, 1] statistics.")
    genstats = op_method("genstats", ("input",), (), ("SUM", "SQ_SUM"), _lower_genstats, required=("input",),
                         doc="genstats(input) -> [SUM, SQ_SUM] (per-channel sum and sum of squares)")
