"""Normalization graphs: layer / RMS / instance norm forward (inference and training) and backward,
batch norm training forward (running statistics updated), inference and backward; NCHW / NHWC / padded
layouts, FP32 / FP16 / BF16 data. At least four elements are normalized together (a variance of fewer
random values is ill-conditioned in the backward), and inverse-variance inputs lie in [0.5, 2)."""
from ..testing import SIM
from .spec import DT, Spec, capped, graph, packed, pick, rand_strides

SIZES = (1, 2, 3, 4) if SIM else (1, 2, 3, 4, 7, 8, 16, 32)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))
OPS = ("layernorm", "layernorm_bwd", "rmsnorm", "rmsnorm_bwd", "instancenorm", "batchnorm", "batchnorm_inference",
       "batchnorm_bwd")


def _t(g, rng, name, dims, layout=True, like=None):
    """A tensor: random layout, packed row-major (``layout`` False), or packed in the dim order of the
    tensor ``like`` (the norm engines want parameters that follow X's layout on the normalized dims)."""
    if like is not None and rng.random() < 0.85:
        xs = like.get_stride()
        strides = packed(dims, sorted(range(len(dims)), key=lambda i: (-xs[i], i)))
    elif layout:
        strides = rand_strides(rng, dims, pick(rng, ("row", "nhwc", None)), pad_p=0.2)
    else:
        strides = packed(dims)
    return g.tensor(name=name, dim=dims, stride=strides)


def generate(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.5, 0.3, 0.2))
    op = pick(rng, OPS)
    for _ in range(20):
        n, c, h, w = capped([pick(rng, SIZES) for _ in range(4)])
        per_row = c * h * w if op.startswith(("layer", "rms")) else h * w if op.startswith("instance") else n * h * w
        if per_row >= 4:
            break
    else:
        n, c, h, w = 2, 2, 2, 2
    dims = [n, c, h, w]
    g = graph(dtype)
    X = _t(g, rng, "X", dims)
    ranges = {"inv_var": (0.5, 2.0), "running_var": (0.5, 2.0)}
    eps = float(pick(rng, (1e-5, 1e-3, 0.1)))
    outs = []
    if op.startswith(("layernorm", "rmsnorm")):
        pd = [1, c, h, w]
        S = _t(g, rng, "scale", pd, like=X)
        B = _t(g, rng, "bias", pd, like=X) if op.startswith("layer") or rng.random() < 0.5 else None
        if op.endswith("_bwd"):
            DY = _t(g, rng, "DY", dims, like=X)
            inv = _t(g, rng, "inv_var", [n, 1, 1, 1], layout=False)
            if op == "layernorm_bwd":
                mean = _t(g, rng, "mean", [n, 1, 1, 1], layout=False)
                outs = g.layernorm_backward(grad=DY, input=X, scale=S, mean=mean, inv_variance=inv, name="ln_bwd")
            else:
                outs = g.rmsnorm_backward(grad=DY, input=X, scale=S, inv_variance=inv, has_dbias=False, name="rms_bwd")
        else:
            phase = pick(rng, (cudnn_phase("INFERENCE"), cudnn_phase("TRAINING")))
            fn = g.layernorm if op == "layernorm" else g.rmsnorm
            kw = dict(input=X, scale=S, epsilon=eps, norm_forward_phase=phase, name=op)
            if B is not None:
                kw["bias"] = B
            outs = fn(**kw)
    elif op == "instancenorm":
        pd = [1, c, 1, 1]
        outs = g.instancenorm(input=X, scale=_t(g, rng, "scale", pd, False), bias=_t(g, rng, "bias", pd, False),
                              epsilon=eps, norm_forward_phase=cudnn_phase("TRAINING"), name="in")
    else:
        pd = [1, c, 1, 1]
        S, B = _t(g, rng, "scale", pd, False), _t(g, rng, "bias", pd, False)
        if op == "batchnorm":
            outs = g.batchnorm(input=X, scale=S, bias=B, in_running_mean=_t(g, rng, "running_mean", pd, False),
                               in_running_var=_t(g, rng, "running_var", pd, False), epsilon=eps,
                               momentum=float(pick(rng, (0.1, 0.5))), name="bn")
        elif op == "batchnorm_inference":
            outs = [g.batchnorm_inference(input=X, mean=_t(g, rng, "mean", pd, False),
                                          inv_variance=_t(g, rng, "inv_var", pd, False), scale=S, bias=B, name="bn")]
        else:
            outs = g.batchnorm_backward(grad=_t(g, rng, "DY", dims, like=X), input=X, scale=S,
                                        mean=_t(g, rng, "mean", pd, False), inv_variance=_t(g, rng, "inv_var", pd, False),
                                        name="bn_bwd")
    outs = [o for o in (outs if isinstance(outs, (list, tuple)) else [outs]) if o is not None]
    for o in outs:
        o.set_output(True)
    outs[0].set_dim(dims).set_stride(X.get_stride() if rng.random() < 0.8 else rand_strides(rng, dims, "row"))
    return Spec(g, f"{op} {dname} x {dims} strides {X.get_stride()} eps {eps}", ranges=ranges)


def cudnn_phase(name):
    import ncudnn as cudnn

    return getattr(cudnn.norm_forward_phase, name)
