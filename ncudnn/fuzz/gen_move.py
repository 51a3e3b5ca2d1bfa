"""Data movement graphs: layout changes (an identity from one set of strides to another, NCHW <-> NHWC
and padded), transposes and slices of a graph input, and concatenation along any axis; every dtype the
copies take (FP32 / FP16 / BF16 / FP64)."""
from ..testing import SIM
from .spec import DT, MAX_ELEMENTS, Spec, capped, graph, packed, pick, rand_strides

SIZES = (1, 2, 3, 4, 5) if SIM else (1, 2, 3, 4, 7, 8, 16, 33)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"), (DT.DOUBLE, "double"))


def generate(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.4, 0.25, 0.2, 0.15))
    rank = pick(rng, (2, 3, 4, 5))
    dims = capped([pick(rng, SIZES) for _ in range(rank)], MAX_ELEMENTS // 4)   # concat: up to 3 parts
    g = graph(dtype)
    op = pick(rng, ("copy", "transpose", "slice", "concat"))
    X = g.tensor(name="X", dim=dims, stride=rand_strides(rng, dims, None, pad_p=0.3))
    if op == "copy":
        Y = g.identity(X, name="copy")
        out = dims
        what = f"copy x {dims} {X.get_stride()}"
    elif op == "transpose":
        perm = [int(p) for p in rng.permutation(rank)]
        Y = g.transpose(X, perm, name="transpose")
        out = [dims[p] for p in perm]
        what = f"transpose x {dims} {X.get_stride()} perm {perm}"
    elif op == "slice":
        sls = []
        for d in dims:
            a = int(rng.integers(0, d))
            b = int(rng.integers(a + 1, d + 1))
            sls.append(slice(a, b, int(pick(rng, (1, 1, 2)))))
        Y = g.slice(X, sls, name="slice")
        out = [len(range(s.start, s.stop, s.step)) for s in sls]
        what = f"slice x {dims} {X.get_stride()} {[(s.start, s.stop, s.step) for s in sls]}"
    else:
        axis = int(rng.integers(0, rank))
        parts, xs = [X], [dims]
        for k in range(int(rng.integers(1, 3))):
            d = list(dims)
            d[axis] = pick(rng, SIZES)
            parts.append(g.tensor(name=f"X{k + 1}", dim=d, stride=rand_strides(rng, d, None, pad_p=0.3)))
            xs.append(d)
        Y = g.concatenate(inputs=parts, axis=axis, name="concat")
        out = list(dims)
        out[axis] = sum(d[axis] for d in xs)
        what = f"concat axis {axis} of {xs}"
    Y.set_output(True).set_name("Y").set_dim(out)
    ys = rand_strides(rng, out, None, pad_p=0.3) if rng.random() < 0.5 else packed(out)
    Y.set_stride(ys)
    return Spec(g, f"{op} {dname}: {what} -> {out} {ys}")
