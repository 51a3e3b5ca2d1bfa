"""Reduction graphs (ADD / MAX / MIN / AMAX / AVG / NORM1 / NORM2 / MUL over any subset of axes, with a
pointwise op before it sometimes) and softmax / log-softmax written as cuDNN graphs express them
(max-reduce, subtract, exp, add-reduce, divide or subtract the log) over the last axis or the channels.
MUL reduces values in [0.8, 1.25) (a product of many random values vanishes or overflows otherwise)."""
import ncudnn as cudnn
from ..testing import SIM
from .spec import DT, Spec, capped, graph, pick, rand_strides

SIZES = (1, 2, 3, 4, 5) if SIM else (1, 2, 3, 4, 7, 8, 16, 33, 64)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))
RM = cudnn.reduction_mode
MODES = ("ADD", "MAX", "MIN", "AMAX", "AVG", "NORM1", "NORM2", "MUL")


def _dims(rng):
    rank = pick(rng, (2, 3, 4))
    return capped([pick(rng, SIZES) for _ in range(rank)])


def reduction(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.5, 0.3, 0.2))
    dims = _dims(rng)
    g = graph(dtype)
    X = g.tensor(name="X", dim=dims, stride=rand_strides(rng, dims, None, pad_p=0.2))
    mode = pick(rng, MODES)
    axes = [i for i in range(len(dims)) if rng.random() < 0.5] or [len(dims) - 1]
    out = [1 if i in axes else d for i, d in enumerate(dims)]
    src, pre = X, ""
    if rng.random() < 0.25:
        src, pre = g.relu(X, name="pre") if mode != "MUL" else g.abs(X, name="pre"), " after a pointwise"
    Y = g.reduction(src, getattr(RM, mode), name="red")
    Y.set_output(True).set_name("Y").set_dim(out).set_data_type(DT.FLOAT if rng.random() < 0.5 else dtype)
    ranges = {"X": (0.8, 1.25)} if mode == "MUL" else {}
    return Spec(g, f"reduce {mode} {dname} x {dims} {X.get_stride()} -> {out}{pre}", ranges=ranges)


def softmax(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.5, 0.3, 0.2))
    dims = capped(_dims(rng) + [pick(rng, SIZES)])
    g = graph(dtype)
    layout = pick(rng, ("row", "nhwc", None))
    X = g.tensor(name="X", dim=dims, stride=rand_strides(rng, dims, layout if len(dims) >= 3 else "row", pad_p=0.2))
    axis = len(dims) - 1 if rng.random() < 0.7 else 1
    red = [1 if i == axis else d for i, d in enumerate(dims)]
    m = g.reduction(X, RM.MAX, name="max")
    m.set_dim(red)
    s = g.sub(X, m, name="sub")
    e = g.exp(s, name="exp")
    z = g.reduction(e, RM.ADD, name="sum")
    z.set_dim(red)
    log = rng.random() < 0.3
    Y = g.sub(s, g.log(z, name="log"), name="out") if log else g.div(e, z, name="out")
    Y.set_output(True).set_name("Y").set_dim(dims).set_stride(X.get_stride() if rng.random() < 0.7 else
                                                                rand_strides(rng, dims, "row"))
    return Spec(g, f"{'log_' if log else ''}softmax {dname} x {dims} {X.get_stride()} axis {axis}",
                ranges={"X": (-3.0, 3.0)})
