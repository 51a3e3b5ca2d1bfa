"""Tensors of a case: their roles, logical dims and layouts, and device buffers holding random data.

:func:`specs` gives, for a case, the input and output tensors by role (``x``, ``w``, ``y``, ...), each
with logical dims (NCHW order for images, KCRS for filters) and element strides of the case's layout.
Every runner (ncudnn, torch, cudnn-frontend) binds the same buffers, so they all read the same bytes.

Buffers are torch tensors when torch is present (random data drawn on the device from a fixed seed);
otherwise numba device arrays filled from NumPy, with the host copies kept for the float64 oracle.
"""
from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

POSITIVE = {"running_var", "inv_var", "scale"}  # drawn from [0.5, 1.5): variances, scales


@dataclass(frozen=True)
class Spec:
    role: str
    dims: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: str
    by_value: bool = False


def packed(dims):
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def nhwc(dims):
    """Strides of a 4-D NCHW-ordered tensor laid out channels-last (torch's channels_last)."""
    n, c, h, w = dims
    return (h * w * c, 1, w * c, c)


def _img(dims, layout, dtype, role):
    return Spec(role, tuple(dims), nhwc(dims) if layout == "nhwc" else packed(dims), dtype)


def _vec(c, role, dtype="float32"):
    return Spec(role, (1, c, 1, 1), packed((1, c, 1, 1)), dtype)


def specs(case) -> Tuple[Dict[str, Spec], Dict[str, Spec]]:
    """(inputs, outputs) of ``case``, role -> :class:`Spec`."""
    p, dt, lay, op = case.params, case.dtype, case.layout, case.op
    if case.suite == "conv":
        x, w, y = (p["n"], p["c"], p["h"], p["w"]), (p["k"], p["c"], p["r"], p["s"]), (p["n"], p["k"], p["p"], p["q"])
        X, W, Y = _img(x, lay, dt, "x"), _img(w, lay, dt, "w"), _img(y, lay, dt, "y")
        if op == "conv_fprop":
            return {"x": X, "w": W}, {"y": Y}
        if op == "conv_fprop_bias_relu":
            return {"x": X, "w": W, "bias": _vec(p["k"], "bias", dt)}, {"y": Y}
        if op == "conv_dgrad":
            return {"dy": _img(y, lay, dt, "dy"), "w": W}, {"dx": _img(x, lay, dt, "dx")}
        return {"x": X, "dy": _img(y, lay, dt, "dy")}, {"dw": _img(w, lay, dt, "dw")}
    if op == "matmul":
        m, n, k = p["m"], p["n"], p["k"]
        b_str = (k * n, 1, k) if p.get("tf32") else packed((1, k, n))   # TF32 cases: B stored (n, k), k-contiguous
        return ({"a": Spec("a", (1, m, k), packed((1, m, k)), dt), "b": Spec("b", (1, k, n), b_str, dt)},
                {"c": Spec("c", (1, m, n), packed((1, m, n)), dt)})
    if op.startswith("batchnorm"):
        x = (p["n"], p["c"], p["h"], p["w"])
        c = p["c"]
        if op == "batchnorm_fwd":
            ins = {"x": _img(x, lay, dt, "x"), "scale": _vec(c, "scale"), "bias": _vec(c, "bias"),
                   "running_mean": _vec(c, "running_mean"), "running_var": _vec(c, "running_var")}
            outs = {"y": _img(x, lay, dt, "y"), "mean": _vec(c, "mean"), "inv_var": _vec(c, "inv_var"),
                    "next_running_mean": _vec(c, "next_running_mean"), "next_running_var": _vec(c, "next_running_var")}
            return ins, outs
        ins = {"x": _img(x, lay, dt, "x"), "dy": _img(x, lay, dt, "dy"), "scale": _vec(c, "scale"),
               "mean": _vec(c, "mean"), "inv_var": _vec(c, "inv_var")}
        return ins, {"dx": _img(x, lay, dt, "dx"), "dscale": _vec(c, "dscale"), "dbias": _vec(c, "dbias")}
    if op in ("layernorm_fwd", "rmsnorm_fwd", "layernorm_bwd", "softmax", "bias_gelu"):
        r, c = p["rows"], p["cols"]
        row = Spec("x", (r, c, 1, 1), packed((r, c, 1, 1)), dt)
        stat = lambda role: Spec(role, (r, 1, 1, 1), packed((r, 1, 1, 1)), "float32")  # noqa: E731
        like = lambda role: Spec(role, row.dims, row.strides, dt)  # noqa: E731
        if op == "softmax":  # exp(x - max) stays virtual: the partitioner fuses the softmax pattern
            return {"x": row}, {"y": like("y")}
        if op == "bias_gelu":
            return {"x": row, "bias": _vec(c, "bias", dt)}, {"y": like("y")}
        if op == "layernorm_fwd":
            return ({"x": row, "scale": _vec(c, "scale"), "bias": _vec(c, "bias")},
                    {"y": like("y"), "mean": stat("mean"), "inv_var": stat("inv_var")})
        if op == "rmsnorm_fwd":
            return {"x": row, "scale": _vec(c, "scale")}, {"y": like("y"), "inv_var": stat("inv_var")}
        return ({"x": row, "dy": like("dy"), "scale": _vec(c, "scale"), "mean": stat("mean"),
                 "inv_var": stat("inv_var")},
                {"dx": like("dx"), "dscale": _vec(c, "dscale"), "dbias": _vec(c, "dbias")})
    if case.suite == "reduce":
        r, c = p["rows"], p["cols"]
        x = Spec("x", (r, c, 1, 1), packed((r, c, 1, 1)), dt)
        out = {1: (r, 1, 1, 1), 0: (1, c, 1, 1), -1: (1, 1, 1, 1)}[p["axis"]]
        return {"x": x}, {"y": Spec("y", out, packed(out), "float32")}
    if case.suite == "pool" and op.endswith("_bwd"):
        x, y = (p["n"], p["c"], p["h"], p["w"]), (p["n"], p["c"], p["p"], p["q"])
        ins = {"dy": _img(y, lay, dt, "dy")}
        if op == "max_pool_bwd":
            ins["x"] = _img(x, lay, dt, "x")
        return ins, {"dx": _img(x, lay, dt, "dx")}
    if case.suite == "pool":
        return ({"x": _img((p["n"], p["c"], p["h"], p["w"]), lay, dt, "x")},
                {"y": _img((p["n"], p["c"], p["p"], p["q"]), lay, dt, "y")})
    if op == "relu":
        d = (1, 1, 1, p["elems"])
        return {"x": Spec("x", d, packed(d), dt)}, {"y": Spec("y", d, packed(d), dt)}
    if op in ("bias_relu", "scale_bias_relu_add"):
        x = (p["n"], p["c"], p["h"], p["w"])
        ins = {"x": _img(x, lay, dt, "x"), "bias": _vec(p["c"], "bias", dt)}
        if op == "scale_bias_relu_add":
            ins.update(scale=_vec(p["c"], "scale", dt), residual=_img(x, lay, dt, "residual"))
        return ins, {"y": _img(x, lay, dt, "y")}
    if op in ("sdpa_fwd", "sdpa_bwd"):
        b, h, d = p["b"], p["h"], p["d"]
        hk, sq, s = p.get("hk", h), p.get("sq", p["s"]), p["s"]
        t = lambda role, heads, rows: Spec(role, (b, heads, rows, d), packed((b, heads, rows, d)), dt)  # noqa: E731
        q, k, v = t("q", h, sq), t("k", hk, s), t("v", hk, s)
        if op == "sdpa_fwd":
            return {"q": q, "k": k, "v": v}, {"o": t("o", h, sq)}
        stats = Spec("stats", (b, h, sq, 1), packed((b, h, sq, 1)), "float32")
        return ({"q": q, "k": k, "v": v, "o": t("o", h, sq), "dO": t("dO", h, sq), "stats": stats},
                {"dq": t("dq", h, sq), "dk": t("dk", hk, s), "dv": t("dv", hk, s)})
    raise KeyError(f"no tensor specs for op {op!r}")


def span(spec):
    """Elements a buffer of ``spec`` spans (1 + the largest offset)."""
    return 1 + sum((d - 1) * s for d, s in zip(spec.dims, spec.strides))


# ------------------------------------------------------------------------------ torch buffers

def torch_dtype(name):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float64": torch.float64}[name]


def torch_empty(spec, device="cuda"):
    """An uninitialised torch tensor with ``spec``'s dims and strides."""
    import torch

    return torch.empty_strided(spec.dims, spec.strides, dtype=torch_dtype(spec.dtype), device=device)


def torch_poisoned(spec, device="cuda"):
    t = torch_empty(spec, device)
    t.fill_(float("nan"))
    return t


def torch_inputs(case, seed=0, device="cuda"):
    """role -> torch tensor with random data (normal; POSITIVE roles uniform in [0.5, 1.5))."""
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    ins, _ = specs(case)
    out = {}
    for role, s in ins.items():
        t = torch_empty(s, device)
        if role in POSITIVE:
            t.uniform_(0.5, 1.5, generator=gen)
        else:
            t.normal_(generator=gen)
        out[role] = t
    if case.op == "sdpa_bwd":
        _torch_attention_forward(case, out)
    return out


def attention_batch(p, q, k, v):
    """(S, K, V) of one batch entry of an SDPA case (``p`` its params): the scaled scores Q K^T with the causal
    mask (top-left) as -inf, and K, V repeated to the query heads (GQA); torch tensors of q's dtype."""
    import torch

    g = p["h"] // p.get("hk", p["h"])
    k, v = k.repeat_interleave(g, dim=0), v.repeat_interleave(g, dim=0)
    s = (q @ k.transpose(-1, -2)) * (p["d"] ** -0.5)
    if p["causal"]:
        s.masked_fill_(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s, k, v


def _torch_attention_forward(case, t):
    """Overwrite ``o`` and ``stats`` with the forward of ``q, k, v`` (FP32 math, one batch at a time), so that
    a backward case starts from what a training step's forward left: P = exp(S - stats) is a softmax."""
    import torch

    for b in range(case.params["b"]):
        s, _, v = attention_batch(case.params, *(t[r][b].float() for r in ("q", "k", "v")))
        lse = torch.logsumexp(s, dim=-1, keepdim=True)
        t["o"][b].copy_(torch.exp(s - lse) @ v)
        t["stats"][b].copy_(lse)


# ------------------------------------------------------------------------------ numba buffers

def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def host_inputs(case, seed=0):
    """role -> host NumPy array (logical dims, packed) with random data, as :func:`torch_inputs`."""
    rng = np.random.default_rng(seed)
    ins, _ = specs(case)
    out = {}
    for role, s in ins.items():
        a = rng.uniform(0.5, 1.5, s.dims) if role in POSITIVE else rng.standard_normal(s.dims)
        out[role] = a.astype(np.float32).astype(np_dtype(s.dtype))
    if case.op == "sdpa_bwd":   # o and stats from the forward of q, k, v (as _torch_attention_forward)
        from ncudnn.reference.attention import sdpa_forward

        p = case.params
        o, stats = sdpa_forward(out["q"], out["k"], out["v"], p["d"] ** -0.5, causal=bool(p["causal"]))
        out["o"], out["stats"] = o.astype(np.float32).astype(np_dtype(ins["o"].dtype)), stats.astype(np.float32)
    return out


def numba_strided(a, spec):
    """A flat numba device buffer holding host array ``a`` at ``spec``'s strides."""
    from numba import cuda

    flat = np.zeros(span(spec), dtype=a.dtype)
    view = np.lib.stride_tricks.as_strided(flat, spec.dims, [s * flat.itemsize for s in spec.strides])
    view[...] = a
    return cuda.to_device(flat)


def numba_poisoned(spec):
    from numba import cuda

    return cuda.to_device(np.full(span(spec), np.nan, dtype=np_dtype(spec.dtype)))


def numba_read(buf, spec):
    """The logical (dims-shaped) host array of a flat strided device buffer."""
    host = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(host, spec.dims, [s * host.itemsize for s in spec.strides]).copy()
