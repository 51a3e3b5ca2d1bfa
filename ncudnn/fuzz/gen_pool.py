"""Pooling graphs: max / average (padding included or excluded) over 2-D and 3-D windows, random windows,
strides and padding, NCHW / NHWC / padded layouts, FP32 / FP16 / BF16."""
from ..testing import SIM
from .spec import DT, Spec, graph, pick, rand_strides

SIZES = (1, 2, 3, 4, 5) if SIM else (1, 2, 3, 5, 7, 8, 13)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))


def generate(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.5, 0.3, 0.2))
    nsp = pick(rng, (2, 2, 3))
    n, c = pick(rng, (1, 2)), pick(rng, SIZES)
    for _ in range(20):
        size = [pick(rng, SIZES) for _ in range(nsp)]
        win = [pick(rng, (1, 2, 3)) for _ in range(nsp)]
        stride = [pick(rng, (1, 2, 3)) for _ in range(nsp)]
        pad = [int(rng.integers(0, w)) for w in win]
        if all(s + 2 * p >= w for s, p, w in zip(size, pad, win)):
            break
    else:
        size, win, stride, pad = [2] * nsp, [1] * nsp, [1] * nsp, [0] * nsp
    dims = [n, c] + size
    g = graph(dtype)
    X = g.tensor(name="X", dim=dims, stride=rand_strides(rng, dims, pick(rng, ("row", "nhwc", None)), pad_p=0.2))
    mode = pick(rng, ("max", "avg", "avg_exclude"))
    if mode == "max":
        Y = g.max_pool(X, window=win, stride=stride, padding=pad, name="pool")
    else:
        Y = g.avg_pool(X, window=win, stride=stride, padding=pad, include_padding=mode == "avg", name="pool")
    Y.set_output(True).set_name("Y")
    return Spec(g, f"{mode}_pool {dname} x {dims} {X.get_stride()} window {win} stride {stride} pad {pad}")
