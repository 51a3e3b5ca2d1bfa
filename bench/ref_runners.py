"""The references, run in the same process on the same buffers as ncudnn.

* ``torch-*``: cuDNN (and torch's own kernels where torch has no cuDNN path) through ``torch.nn.functional``
  / ``torch.ops.aten``; for conv and GEMM with TF32 off (``torch-nchw``, ``torch-nhwc``, ``cublas``) and on
  (``*-tf32``); conv in NCHW (contiguous copies made before timing) and NHWC (``channels_last``).
  ``torch.backends.cudnn.benchmark`` stays False: cuDNN's heuristic pick, as ncudnn's heur_mode.A.
* ``cublas``: GEMMs through ``torch.matmul``.
* ``cudnn-fe``: cuDNN's graph API through nvidia-cudnn-frontend (``import cudnn``), the same graph as
  ncudnn's (:mod:`bench.graphs`), heuristics A then FALLBACK; ``cudnn-fe-fp32`` deselects engines with the
  TENSOR_CORE numerical note (FP32 I/O otherwise computes in TF32 there).

:func:`truth` gives the float64 result every implementation is checked against before it is timed.
"""
import time

from . import data
from .graphs import Unsupported, build
from .harness import Impl, Prepared

EPS, MOMENTUM = 1e-5, 0.1


def _torch():
    import torch

    return torch


def _flags(tf32):
    """TF32 on or off for cuDNN convolutions and cuBLAS matmuls (the legacy flags; the fp32_precision
    API of torch >= 2.9 when the legacy ones are refused). FP16 / BF16 cuBLAS GEMMs keep FP32 accumulation
    throughout (no reduced-precision split-K reduction), as ncudnn's tensor-core GEMMs do."""
    import warnings

    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
            try:
                setattr(torch.backends.cuda.matmul, flag, False)
            except (RuntimeError, AttributeError):
                pass
        try:
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
        except (RuntimeError, AttributeError):
            prec = "tf32" if tf32 else "ieee"
            torch.backends.cudnn.conv.fp32_precision = prec
            torch.backends.cuda.matmul.fp32_precision = prec


def _math(case, tf32):
    return "tf32" if tf32 and case.dtype == "float32" else case.dtype


# ------------------------------------------------------------------------------ torch ops

def torch_op(case, t, tf32=False):
    """``fn() -> {role: tensor}`` running ``case`` with torch on the tensors ``t`` (role -> tensor)."""
    torch = _torch()
    F = torch.nn.functional
    p, op = case.params, case.op
    conv = dict(stride=[p.get("stride", 1)] * 2, padding=[p.get("pad", 0)] * 2, dilation=[1, 1])
    cb = torch.ops.aten.convolution_backward
    if op == "conv_fprop":
        return lambda: (_flags(tf32), {"y": F.conv2d(t["x"], t["w"], None, **conv)})[1]
    if op == "conv_fprop_bias_relu":  # cuDNN conv with bias, then relu in place (what a torch model runs)
        b = t["bias"].reshape(-1)
        return lambda: (_flags(tf32), {"y": F.relu(F.conv2d(t["x"], t["w"], b, **conv), inplace=True)})[1]
    if op == "conv_dgrad":
        xe = torch.empty(data.specs(case)[1]["dx"].dims, device="cuda", dtype=t["dy"].dtype,
                         memory_format=_fmt(t["dy"]))
        return lambda: (_flags(tf32), {"dx": cb(t["dy"], xe, t["w"], None, conv["stride"], conv["padding"], [1, 1],
                                                False, [0, 0], 1, [True, False, False])[0]})[1]
    if op == "conv_wgrad":
        we = torch.empty(data.specs(case)[1]["dw"].dims, device="cuda", dtype=t["x"].dtype,
                         memory_format=_fmt(t["x"]))
        return lambda: (_flags(tf32), {"dw": cb(t["dy"], t["x"], we, None, conv["stride"], conv["padding"], [1, 1],
                                                False, [0, 0], 1, [False, True, False])[1]})[1]
    if op == "matmul":
        a, b = t["a"][0], t["b"][0]
        return lambda: (_flags(tf32), {"c": torch.matmul(a, b)[None]})[1]
    c = p.get("c")
    if op == "batchnorm_fwd":
        rm, rv = t["running_mean"].reshape(c).clone(), t["running_var"].reshape(c).clone()
        w, b = t["scale"].reshape(c), t["bias"].reshape(c)
        return lambda: {"y": F.batch_norm(t["x"], rm, rv, w, b, True, MOMENTUM, EPS)}
    if op == "batchnorm_bwd":
        w, m, iv = t["scale"].reshape(c), t["mean"].reshape(c), t["inv_var"].reshape(c)
        fn = torch.ops.aten.native_batch_norm_backward

        def bn_bwd():
            dx, dw, db = fn(t["dy"], t["x"], w, None, None, m, iv, True, EPS, [True, True, True])
            return {"dx": dx, "dscale": dw.view(1, c, 1, 1), "dbias": db.view(1, c, 1, 1)}
        return bn_bwd
    rows, cols = p.get("rows"), p.get("cols")
    if op in ("layernorm_fwd", "layernorm_bwd", "rmsnorm_fwd", "softmax", "bias_gelu"):
        x2 = t["x"].view(rows, cols)
        if op == "layernorm_fwd":
            w, b = t["scale"].view(cols), t["bias"].view(cols)

            def ln():
                y, mean, rstd = torch.native_layer_norm(x2, [cols], w, b, EPS)
                st = (rows, 1, 1, 1)
                return {"y": y.view(rows, cols, 1, 1), "mean": mean.view(st), "inv_var": rstd.view(st)}
            return ln
        if op == "layernorm_bwd":
            w, dy2 = t["scale"].view(cols), t["dy"].view(rows, cols)
            m, iv = t["mean"].view(rows, 1), t["inv_var"].view(rows, 1)
            fn = torch.ops.aten.native_layer_norm_backward

            def ln_bwd():
                dx, dw, db = fn(dy2, x2, [cols], m, iv, w, w, [True, True, True])
                vec = (1, cols, 1, 1)
                return {"dx": dx.view(rows, cols, 1, 1), "dscale": dw.view(vec), "dbias": db.view(vec)}
            return ln_bwd
        if op == "rmsnorm_fwd":
            w = t["scale"].view(cols)
            return lambda: {"y": F.rms_norm(x2, [cols], w, EPS).view(rows, cols, 1, 1)}
        if op == "softmax":
            return lambda: {"y": torch.softmax(x2, -1).view(rows, cols, 1, 1)}
        b = t["bias"].view(cols)
        return lambda: {"y": F.gelu(x2 + b).view(rows, cols, 1, 1)}
    if case.suite == "reduce":
        x2, ax = t["x"].view(p["rows"], p["cols"]), p["axis"]
        if op == "reduce_amax":
            return lambda: {"y": torch.amax(torch.abs(x2)).view(1, 1, 1, 1)}
        shape = (p["rows"], 1, 1, 1) if ax == 1 else (1, p["cols"], 1, 1)
        return lambda: {"y": torch.sum(x2, dim=ax).view(shape)}
    if case.suite == "pool" and op.endswith("_bwd"):
        k, s, pd = [p["r"]] * 2, [p["stride"]] * 2, [p["pad"]] * 2
        if op == "max_pool_bwd":   # torch's training path: the forward's indices, kept (made before timing)
            _, idx = F.max_pool2d(t["x"], k, s, pd, return_indices=True)
            back = torch.ops.aten.max_pool2d_with_indices_backward
            return lambda: {"dx": back(t["dy"], t["x"], k, s, pd, [1, 1], False, idx)}
        return avg_pool_bwd(t["dy"], data.specs(case)[1]["dx"].dims, p["r"], p["stride"], p["pad"])
    if case.suite == "pool":
        pool = F.max_pool2d if op == "max_pool" else F.avg_pool2d
        return lambda: {"y": pool(t["x"], p["r"], p["stride"], p["pad"])}
    if op == "relu":
        return lambda: {"y": torch.relu(t["x"])}
    if op == "bias_relu":
        return lambda: {"y": torch.relu(t["x"] + t["bias"])}
    if op == "scale_bias_relu_add":
        return lambda: {"y": torch.relu(t["x"] * t["scale"] + t["bias"] + t["residual"])}
    gqa = dict(enable_gqa=True) if p.get("hk", p.get("h")) != p.get("h") else {}
    if op == "sdpa_fwd":
        return lambda: {"o": F.scaled_dot_product_attention(t["q"], t["k"], t["v"], is_causal=bool(p["causal"]),
                                                            **gqa)}
    if op == "sdpa_bwd":   # the backward of torch's own forward (kept, made before timing): dQ, dK, dV only
        q, k, v = (t[r].detach().clone().requires_grad_(True) for r in ("q", "k", "v"))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(p["causal"]), **gqa)
        grad = torch.autograd.grad
        return lambda: dict(zip(("dq", "dk", "dv"), grad(o, (q, k, v), t["dO"], retain_graph=True)))
    raise Unsupported(f"no torch reference for {op}")


def avg_pool_bwd(dy, x_dims, r, stride, pad):
    """``fn() -> {"dx": tensor}``: torch's average-pool backward (count_include_pad, as cuDNN's
    AVGPOOL_INCLUDE_PADDING with zero padding) of ``dy``, in dy's memory format, on dy's device.

    Channels-last with padding goes around a torch bug (pytorch/pytorch#188344, in torch <= 2.11: the
    channels-last CUDA kernel leaves the padding offset out of the input coordinates, so every input
    pixel meets the wrong windows; rel. error ~1 at the pool benchmark shape): the pad-0 kernel (correct
    there) runs on the zero-padded input's shape, and dx is its interior. With count_include_pad every
    window divides by r*r either way, and the padded border only receives the padding taps' shares,
    which the interior slice drops; the output size is the same formula. Costs 2*pad rows and columns
    more written (3.6% at 112x112, pad 1)."""
    torch = _torch()
    back = torch.ops.aten.avg_pool2d_backward
    k, s = [r] * 2, [stride] * 2
    fmt = _fmt(dy)
    n, c, h, w = x_dims
    if pad and fmt == torch.channels_last:
        xp = torch.empty((n, c, h + 2 * pad, w + 2 * pad), device=dy.device, dtype=dy.dtype, memory_format=fmt)
        return lambda: {"dx": back(dy, xp, k, s, [0, 0], False, True, None)[:, :, pad:pad + h, pad:pad + w]}
    xe = torch.empty(tuple(x_dims), device=dy.device, dtype=dy.dtype, memory_format=fmt)
    return lambda: {"dx": back(dy, xe, k, s, [pad] * 2, False, True, None)}


def _fmt(x):
    torch = _torch()
    return torch.channels_last if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
        and not x.is_contiguous() else torch.contiguous_format


def _prepare_torch(case, inputs, layout, tf32, backend=None):
    def prepare():
        torch = _torch()
        t = dict(inputs)
        if layout == "nchw":
            t = {r: v.contiguous() for r, v in t.items()}
        elif layout == "nhwc":
            t = {r: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for r, v in t.items()}
        holder = {}
        if backend is None:
            fn = torch_op(case, t, tf32)
        else:   # under the backend both when the op is set up (a backward case's forward) and when it runs
            from torch.nn.attention import sdpa_kernel

            with sdpa_kernel(backend):
                inner = torch_op(case, t, tf32)

            def fn():
                with sdpa_kernel(backend):
                    return inner()

        def run():
            holder["out"] = fn()
        return Prepared(run, lambda: holder["out"], _math(case, tf32),
                        f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    return prepare


def torch_impls(case, inputs):
    """The torch / cuBLAS reference implementations of ``case`` (name -> Impl)."""
    out = []
    if case.suite == "conv":
        for lay in ("nchw", "nhwc"):
            for tf32 in (False, True):
                out.append(Impl(f"torch-{lay}{'-tf32' if tf32 else ''}", "reference",
                                _prepare_torch(case, inputs, lay, tf32)))
    elif case.suite == "gemm":
        out.append(Impl("cublas", "reference", _prepare_torch(case, inputs, None, False)))
        if case.dtype == "float32":
            out.append(Impl("cublas-tf32", "reference", _prepare_torch(case, inputs, None, True)))
    elif case.suite == "attention":
        from torch.nn.attention import SDPBackend

        out.append(Impl("torch-sdpa-cudnn", "reference",
                        _prepare_torch(case, inputs, None, False, SDPBackend.CUDNN_ATTENTION)))
        out.append(Impl("torch-sdpa-flash", "reference",
                        _prepare_torch(case, inputs, None, False, SDPBackend.FLASH_ATTENTION)))
    else:
        out.append(Impl("torch", "reference", _prepare_torch(case, inputs, case.layout, False)))
    return out


# ------------------------------------------------------------------------------ cudnn-frontend

def cudnn_fe_available():
    """(module or None, why not)."""
    try:
        import cudnn
    except Exception as e:  # ImportError, or a cuDNN library that fails to load
        return None, f"nvidia-cudnn-frontend not importable ({type(e).__name__}: {e})"
    return cudnn, ""


_HANDLES = {}  # one cudnn-frontend handle per process


def _prepare_fe(case, inputs, fp32_only):
    def prepare():
        cudnn, why = cudnn_fe_available()
        if cudnn is None:
            raise Unsupported(why)
        torch = _torch()
        if "fe" not in _HANDLES:
            _HANDLES["fe"] = cudnn.create_handle()
            cudnn.set_stream(_HANDLES["fe"], torch.cuda.current_stream().cuda_stream)
        handle = _HANDLES["fe"]
        t0 = time.perf_counter()
        try:
            g, T, scalars = build(cudnn, case, handle)
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            if fp32_only:
                g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
            g.check_support()
            g.build_plans()
        except Exception as e:
            raise Unsupported(f"cudnn-frontend: {type(e).__name__}: {str(e)[:300]}") from None
        build_ms = (time.perf_counter() - t0) * 1e3
        _, outs = data.specs(case)
        bufs = {r: data.torch_poisoned(s) for r, s in outs.items() if r in T}
        pack = {T[r]: v for r, v in inputs.items()}
        pack.update({T[r]: v for r, v in bufs.items()})
        pack.update({T[r]: torch.full((1, 1, 1, 1), v, dtype=torch.float32) for r, v in scalars.items()})
        ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
        name = g.get_plan_name_at_index(g.get_selected_plan_index()) if hasattr(g, "get_selected_plan_index") \
            else ""
        math_ = case.dtype if fp32_only or case.suite not in ("conv", "gemm") else _math(case, True)
        return Prepared(lambda: g.execute(pack, ws, handle=handle), lambda: bufs, math_,
                        f"cudnn-frontend {getattr(cudnn, '__version__', '?')}, backend "
                        f"{cudnn.backend_version()}; plan {name}", build_ms)
    return prepare


def fe_impls(case, inputs):
    out = [Impl("cudnn-fe", "reference", _prepare_fe(case, inputs, False))]
    if case.dtype == "float32" and case.suite in ("conv", "gemm"):
        out.append(Impl("cudnn-fe-fp32", "reference", _prepare_fe(case, inputs, True)))
    return out


def impls(case, inputs):
    return torch_impls(case, inputs) + fe_impls(case, inputs)


# ------------------------------------------------------------------------------ float64 truth

def truth(case, t):
    """role -> float64 torch tensor: the exact result of ``case`` on inputs ``t``."""
    torch = _torch()
    F = torch.nn.functional
    d = {r: v.double().contiguous() for r, v in t.items()}
    p, op = case.params, case.op
    if case.suite == "conv":
        st, pad = [p["stride"]] * 2, [p["pad"]] * 2
        if op == "conv_fprop":
            return {"y": F.conv2d(d["x"], d["w"], None, st, pad)}
        if op == "conv_fprop_bias_relu":
            return {"y": F.relu(F.conv2d(d["x"], d["w"], d["bias"].reshape(-1), st, pad))}
        cb = torch.ops.aten.convolution_backward
        _, outs = data.specs(case)
        if op == "conv_dgrad":
            xe = torch.empty(outs["dx"].dims, device="cuda", dtype=torch.float64)
            return {"dx": cb(d["dy"], xe, d["w"], None, st, pad, [1, 1], False, [0, 0], 1, [True, False, False])[0]}
        we = torch.empty(outs["dw"].dims, device="cuda", dtype=torch.float64)
        return {"dw": cb(d["dy"], d["x"], we, None, st, pad, [1, 1], False, [0, 0], 1, [False, True, False])[1]}
    if op == "matmul":
        return {"c": torch.matmul(d["a"], d["b"])}
    if op == "batchnorm_fwd":
        x = d["x"]
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        var = x.var(dim=(0, 2, 3), keepdim=True, unbiased=False)
        inv = torch.rsqrt(var + EPS)
        m = x.numel() // x.shape[1]
        return {"y": (x - mean) * inv * d["scale"] + d["bias"], "mean": mean, "inv_var": inv,
                "next_running_mean": (1 - MOMENTUM) * d["running_mean"] + MOMENTUM * mean,
                "next_running_var": (1 - MOMENTUM) * d["running_var"] + MOMENTUM * var * m / (m - 1)}
    if op == "batchnorm_bwd":
        return _norm_bwd(d, (0, 2, 3))
    if op == "layernorm_bwd":
        return _norm_bwd(d, (1,))
    if op in ("layernorm_fwd", "rmsnorm_fwd"):
        x = d["x"]
        if op == "rmsnorm_fwd":
            inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + EPS)
            return {"y": x * inv * d["scale"], "inv_var": inv}
        mean = x.mean(dim=1, keepdim=True)
        inv = torch.rsqrt(x.var(dim=1, keepdim=True, unbiased=False) + EPS)
        return {"y": (x - mean) * inv * d["scale"] + d["bias"], "mean": mean, "inv_var": inv}
    if op == "softmax":
        return {"y": torch.softmax(d["x"], dim=1)}
    if case.suite == "reduce":
        x = d["x"].reshape(p["rows"], p["cols"])
        if op == "reduce_amax":
            return {"y": x.abs().amax().reshape(1, 1, 1, 1)}
        return {"y": x.sum(dim=p["axis"], keepdim=True).reshape(data.specs(case)[1]["y"].dims)}
    if case.suite == "pool" and op.endswith("_bwd"):
        if op == "max_pool_bwd":
            x = d["x"].detach().clone().requires_grad_(True)
            F.max_pool2d(x, p["r"], p["stride"], p["pad"]).backward(d["dy"])
        else:
            x = torch.zeros(data.specs(case)[1]["dx"].dims, device="cuda", dtype=torch.float64, requires_grad=True)
            F.avg_pool2d(x, p["r"], p["stride"], p["pad"]).backward(d["dy"])
        return {"dx": x.grad}
    if case.suite == "pool":
        pool = F.max_pool2d if op == "max_pool" else F.avg_pool2d
        return {"y": pool(d["x"], p["r"], p["stride"], p["pad"])}
    if op == "relu":
        return {"y": torch.relu(d["x"])}
    if op == "bias_relu":
        return {"y": torch.relu(d["x"] + d["bias"])}
    if op == "scale_bias_relu_add":
        return {"y": torch.relu(d["x"] * d["scale"] + d["bias"] + d["residual"])}
    if op == "bias_gelu":
        return {"y": F.gelu(d["x"] + d["bias"])}
    if op in ("sdpa_fwd", "sdpa_bwd"):
        return _sdpa_truth(case, d)
    raise Unsupported(f"no float64 truth for {op}")


def _sdpa_truth(case, d):
    """The forward's O, or the backward's dQ, dK, dV from the given O, dO and stats (P = exp(S - stats), as
    cuDNN's backward rebuilds it), one batch at a time in float64 (a batch's S is H x Sq x S)."""
    torch = _torch()
    p = case.params
    h, hk, scale = p["h"], p.get("hk", p["h"]), p["d"] ** -0.5
    g = h // hk
    out = {}
    for b in range(p["b"]):
        q = d["q"][b]
        s, k, v = data.attention_batch(p, q, d["k"][b], d["v"][b])
        if case.op == "sdpa_fwd":
            out.setdefault("o", []).append(torch.softmax(s, dim=-1) @ v)
            continue
        pr = torch.exp(s - d["stats"][b])
        do = d["dO"][b]
        ds = pr * (do @ v.transpose(-1, -2) - (do * d["o"][b]).sum(dim=-1, keepdim=True))
        out.setdefault("dq", []).append(scale * ds @ k)
        fold = lambda x: x.reshape(hk, g, *x.shape[1:]).sum(dim=1)  # noqa: E731  (GQA: a K/V head's query heads)
        out.setdefault("dk", []).append(fold(scale * ds.transpose(-1, -2) @ q))
        out.setdefault("dv", []).append(fold(pr.transpose(-1, -2) @ do))
    return {r: torch.stack(v) for r, v in out.items()}


def _norm_bwd(d, axes):
    """dx, dscale, dbias of y = (x - mean) * inv_var * scale + bias, statistics given as inputs.

    Batch norm reduces over ``axes`` = (N, H, W) per channel; layer norm over the features of each row
    (axis 1), while its dscale / dbias sum over the rows."""
    x, dy, scale, mean, inv = d["x"], d["dy"], d["scale"], d["mean"], d["inv_var"]
    xhat = (x - mean) * inv
    param_axes = (0, 2, 3)
    dbias = dy.sum(dim=param_axes, keepdim=True)
    dscale = (dy * xhat).sum(dim=param_axes, keepdim=True)
    g = dy * scale
    m = 1
    for a in axes:
        m *= x.shape[a]
    gsum = g.sum(dim=axes, keepdim=True)
    gx = (g * xhat).sum(dim=axes, keepdim=True)
    dx = inv / m * (m * g - gsum - xhat * gx)
    return {"dx": dx, "dscale": dscale, "dbias": dbias}
