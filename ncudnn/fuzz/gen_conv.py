"""Convolution graphs: fprop (sometimes with a bias and an activation fused after it), dgrad and wgrad,
1-3 spatial dims, random padding (asymmetric too), strides, dilations and groups, NCHW / NHWC / any dim
order with padded strides, FP32 / FP16 / BF16 data with FP32 compute. About a third of the graphs
without an epilogue are built through the backend API instead of pygraph.

``rng`` draws the structure (types, op, spatial rank, groups, strides, dim orders, epilogue, front end)
and ``shapes`` the sizes, filters, dilations, paddings and stride gaps: cases that share a structure
compile the same implicit-GEMM kernels (see :data:`.families.VARIANTS`)."""
from ..testing import SIM
from .spec import DT, Spec, graph, pick, rand_strides

CH = (1, 2, 3, 4) if SIM else (1, 2, 3, 4, 8, 16)
SPATIAL = ((1, 2, 3, 4, 5), (1, 2, 3, 4, 5, 6), (1, 2, 3)) if SIM else \
    ((1, 3, 5, 7, 9, 16), (1, 3, 5, 7, 8, 14), (1, 3, 4, 6))
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))


def _kind(rng, nd):
    """A layout of an ``nd``-dim tensor: 'row', 'nhwc' or a random dim order (a list)."""
    kind = pick(rng, ("row", "nhwc", None), p=(0.4, 0.4, 0.2))
    return [int(i) for i in rng.permutation(nd)] if kind is None else kind


def _layout(kind, shapes, dims):
    strides = rand_strides(shapes, dims, kind, pad_p=0.25)
    return strides, kind if isinstance(kind, str) else "perm"


def generate(rng, shapes=None):
    shapes = rng if shapes is None else shapes
    dtype, dname = pick(rng, DTYPES, p=(0.5, 0.3, 0.2))
    nsp = pick(rng, (1, 2, 2, 2, 3))
    groups = pick(rng, (1, 1, 1, 2, 3))
    stride = [pick(rng, (1, 1, 2, 3)) for _ in range(nsp)]
    op = pick(rng, ("fprop", "fprop", "dgrad", "wgrad"))
    kinds = [_kind(rng, nsp + 2) for _ in range(3)]
    r = rng.random()
    backend = rng.random() < 0.35
    n = pick(shapes, (1, 2))
    cg, kg = pick(shapes, CH), pick(shapes, CH)
    c, k = cg * groups, kg * groups
    for _ in range(20):
        size = [pick(shapes, SPATIAL[nsp - 1]) for _ in range(nsp)]
        filt = [pick(shapes, (1, 2, 3)) for _ in range(nsp)]
        dil = [pick(shapes, (1, 1, 2)) for _ in range(nsp)]
        pre = [int(shapes.integers(0, 3)) for _ in range(nsp)]
        post = list(pre) if shapes.random() < 0.7 else [int(shapes.integers(0, 3)) for _ in range(nsp)]
        out = [(s + a + b - ((f - 1) * d + 1)) // st + 1 for s, a, b, f, d, st in zip(size, pre, post, filt, dil, stride)]
        if all(o >= 1 for o in out) and all(a < (f - 1) * d + 1 and b < (f - 1) * d + 1 or a == b == 0
                                               for a, b, f, d in zip(pre, post, filt, dil)):
            break
    else:
        size, filt, dil, pre, post = [3 * max(stride)] * nsp, [1] * nsp, [1] * nsp, [0] * nsp, [0] * nsp
        out = [(s - 1) // st + 1 for s, st in zip(size, stride)]
    xd, wd, yd = [n, c] + size, [k, cg] + filt, [n, k] + out
    g = graph(dtype)
    geo = dict(pre_padding=pre, post_padding=post, stride=stride, dilation=dil)
    xs, xl = _layout(kinds[0], shapes, xd)
    ws, wl = _layout(kinds[1], shapes, wd)
    ys, yl = _layout(kinds[2], shapes, yd)
    desc = f"conv_{op} {dname} {nsp}-D x {xd} {xl} w {wd} {wl} y {yd} {yl} groups {groups} pad {pre}/{post} " \
           f"stride {stride} dil {dil}"
    if op == "fprop":
        X = g.tensor(name="X", dim=xd, stride=xs)
        W = g.tensor(name="W", dim=wd, stride=ws)
        Y = g.conv_fprop(X, W, name="conv", **geo)
        if r < 0.3:
            B = g.tensor(name="bias", dim=[1, k] + [1] * nsp, stride=[k] + [1] * (nsp + 1))
            Y = g.bias(input=Y, bias=B, name="bias")
            desc += " + bias"
        if r < 0.15 or 0.3 <= r < 0.4:
            Y = g.relu(Y, name="relu")
            desc += " + relu"
        Y.set_output(True).set_name("Y").set_dim(yd).set_stride(ys)
    elif op == "dgrad":
        DY = g.tensor(name="DY", dim=yd, stride=ys)
        W = g.tensor(name="W", dim=wd, stride=ws)
        DX = g.conv_dgrad(loss=DY, filter=W, out_dims=xd, name="dgrad", **geo)
        DX.set_output(True).set_name("DX").set_stride(xs)
    else:
        X = g.tensor(name="X", dim=xd, stride=xs)
        DY = g.tensor(name="DY", dim=yd, stride=ys)
        DW = g.conv_wgrad(image=X, loss=DY, out_dims=wd, name="wgrad", **geo)
        DW.set_output(True).set_name("DW").set_stride(ws)
    fe = "backend" if "+" not in desc and backend else "pygraph"
    return Spec(g, desc + (" [backend API]" if fe == "backend" else ""), front_end=fe)
