"""One pygraph per case, built the same way for ncudnn and for cuDNN's own frontend.

``build(mod, case, handle)`` takes the module (``ncudnn`` or ``cudnn`` from nvidia-cudnn-frontend; both
offer the same ``pygraph`` API) and returns ``(graph, tensors, scalars)``: the graph, the graph tensor
of every data role of :func:`bench.data.specs`, and the by-value scalars (role -> value) to put in the
variant pack. Tensors are declared with the specs' dims and strides, so both libraries see the same
layouts. An op the module does not offer raises :class:`Unsupported` with the reason.
"""
import math

from .data import specs


class Unsupported(Exception):
    """The runner cannot run this case; the message says why (it goes into the report)."""


def _dt(mod, name):
    return {"float32": mod.data_type.FLOAT, "float16": mod.data_type.HALF, "bfloat16": mod.data_type.BFLOAT16,
            "float64": mod.data_type.DOUBLE}[name]


def _out(mod, t, spec):
    t.set_output(True).set_dim(list(spec.dims)).set_stride(list(spec.strides)).set_data_type(_dt(mod, spec.dtype))
    return t


def _method(g, name, mod):
    fn = getattr(g, name, None)
    if fn is None:
        raise Unsupported(f"{getattr(mod, '__name__', mod)}.pygraph has no {name}() op")
    return fn


def build(mod, case, handle=None):
    ins, outs = specs(case)
    f = mod.data_type.FLOAT
    g = mod.pygraph(handle=handle, name=case.id.replace("/", "_"), io_data_type=_dt(mod, case.dtype),
                    intermediate_data_type=f, compute_data_type=f)
    T = {r: g.tensor(name=r, dim=list(s.dims), stride=list(s.strides), data_type=_dt(mod, s.dtype))
         for r, s in ins.items()}
    scalars = {}

    def scalar(role, value):
        scalars[role] = value
        T[role] = g.tensor(name=role, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=f, is_pass_by_value=True)
        return T[role]

    p, op = case.params, case.op
    res = {}
    if case.suite == "conv":
        kw = dict(padding=[p["pad"]] * 2, stride=[p["stride"]] * 2, dilation=[1, 1], compute_data_type=f)
        if op == "conv_fprop":
            res["y"] = g.conv_fprop(image=T["x"], weight=T["w"], **kw)
        elif op == "conv_fprop_bias_relu":  # ConvBiasAct: one fused graph
            res["y"] = g.relu(input=g.bias(input=g.conv_fprop(image=T["x"], weight=T["w"], **kw), bias=T["bias"]))
        elif op == "conv_dgrad":
            res["dx"] = g.conv_dgrad(loss=T["dy"], filter=T["w"], out_dims=list(outs["dx"].dims), **kw)
        else:
            res["dw"] = g.conv_wgrad(image=T["x"], loss=T["dy"], out_dims=list(outs["dw"].dims), **kw)
    elif op == "matmul":
        res["c"] = g.matmul(A=T["a"], B=T["b"], compute_data_type=f)
        if p.get("tf32"):   # opt in to TF32 tensor-core plans (both libraries: plans without the note are barred)
            g.select_numeric_notes([mod.numerical_note.DOWN_CONVERT_INPUTS])
    elif op == "batchnorm_fwd":
        r = g.batchnorm(input=T["x"], scale=T["scale"], bias=T["bias"], in_running_mean=T["running_mean"],
                        in_running_var=T["running_var"], epsilon=scalar("epsilon", 1e-5),
                        momentum=scalar("momentum", 0.1))
        res.update(zip(("y", "mean", "inv_var", "next_running_mean", "next_running_var"), r))
    elif op in ("batchnorm_bwd", "layernorm_bwd"):
        fn = g.batchnorm_backward if op == "batchnorm_bwd" else g.layernorm_backward
        r = fn(grad=T["dy"], input=T["x"], scale=T["scale"], mean=T["mean"], inv_variance=T["inv_var"])
        res.update(zip(("dx", "dscale", "dbias"), r))
    elif op == "layernorm_fwd":
        r = g.layernorm(input=T["x"], scale=T["scale"], bias=T["bias"], epsilon=scalar("epsilon", 1e-5),
                        norm_forward_phase=mod.norm_forward_phase.TRAINING)
        res.update(zip(("y", "mean", "inv_var"), r))
    elif op == "rmsnorm_fwd":
        r = g.rmsnorm(input=T["x"], scale=T["scale"], epsilon=scalar("epsilon", 1e-5),
                      norm_forward_phase=mod.norm_forward_phase.TRAINING)
        res.update(zip(("y", "inv_var"), r))
    elif case.suite == "pool" and op.endswith("_bwd"):   # ncudnn's pygraph extension (cuDNN's backend op)
        back = _method(g, "resample_backward", mod)   # cudnn-frontend's Python API has no resample op
        kw = dict(window=[p["r"]] * 2, stride=[p["stride"]] * 2, padding=[p["pad"]] * 2)
        if op == "max_pool_bwd":
            kw.update(input=T["x"], mode=mod.resample_mode.MAXPOOL, padding_mode=mod.padding_mode.NEG_INF_PAD)
        else:
            kw.update(mode=mod.resample_mode.AVGPOOL, padding_mode=mod.padding_mode.ZERO_PAD)
        res["dx"] = back(grad=T["dy"], **kw)
    elif case.suite == "pool":
        kw = dict(window=[p["r"]] * 2, stride=[p["stride"]] * 2, padding=[p["pad"]] * 2)
        res["y"] = _method(g, op, mod)(T["x"], **kw)
    elif op == "softmax":
        rows = p["rows"]
        mx = g.reduction(input=T["x"], mode=mod.reduction_mode.MAX)
        mx.set_dim([rows, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(f)
        e = g.exp(input=g.sub(a=T["x"], b=mx))
        s = g.reduction(input=e, mode=mod.reduction_mode.ADD)
        s.set_dim([rows, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(f)
        res["y"] = g.div(a=e, b=s)
    elif case.suite == "reduce":
        mode = mod.reduction_mode.AMAX if op == "reduce_amax" else mod.reduction_mode.ADD
        res["y"] = g.reduction(input=T["x"], mode=mode)
    elif op == "relu":
        res["y"] = g.relu(input=T["x"])
    elif op == "bias_relu":
        res["y"] = g.relu(input=g.bias(input=T["x"], bias=T["bias"]))
    elif op == "scale_bias_relu_add":
        sb = g.bias(input=g.scale(input=T["x"], scale=T["scale"]), bias=T["bias"])
        res["y"] = g.relu(input=g.add(a=sb, b=T["residual"]))
    elif op == "bias_gelu":
        res["y"] = g.gelu(input=g.bias(input=T["x"], bias=T["bias"]))
    elif op == "sdpa_fwd":
        o, _ = _method(g, "sdpa", mod)(q=T["q"], k=T["k"], v=T["v"], attn_scale=1.0 / math.sqrt(p["d"]),
                                       generate_stats=False, use_causal_mask=bool(p["causal"]))
        res["o"] = o
    elif op == "sdpa_bwd":
        dq, dk, dv = _method(g, "sdpa_backward", mod)(
            q=T["q"], k=T["k"], v=T["v"], o=T["o"], dO=T["dO"], stats=T["stats"], attn_scale=1.0 / math.sqrt(p["d"]),
            use_causal_mask=bool(p["causal"]))
        res.update(dq=dq, dk=dk, dv=dv)
    else:
        raise Unsupported(f"no graph for op {op!r}")
    for role, t in res.items():
        if role in outs and t is not None:
            _out(mod, t, outs[role])
            T[role] = t
    return g, T, scalars
