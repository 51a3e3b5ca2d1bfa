"""Convolutions in the shapes the special-purpose conv engines take (their check_support is the
contract), so their plans run beside the implicit-GEMM ones; the general generator (:mod:`.gen_conv`)
draws these shapes too rarely.

* ``1x1`` (conv_gemm_1x1): 1x1 (1-D, 2-D or 3-D), unpadded, ungrouped fprop / dgrad / wgrad, stride 1
  (wgrad sometimes stride 2), NCHW / NHWC, FP32 / FP16 / BF16; fprop sometimes + bias + relu.
* ``winograd`` (conv_winograd_fused / _nonfused): 2-D 3x3, stride 1, undilated, ungrouped fprop / dgrad /
  wgrad, padding 0 or 1 (asymmetric sometimes), NCHW / NHWC, FP32 / FP16 / BF16; fprop sometimes +
  bias + relu. The heuristics rank Winograd after implicit GEMM below 64 channels, but
  build_plans(ALL) builds every plan, so the small simulator shapes reach it too.
* ``tc`` (conv_tc): 1-D / 2-D fprop of FP16 / BF16 NHWC images and KRSC filters, C a multiple of 8
  (or a packed NHWC stem with 3 channels, which the engine zero-pads), random stride, padding and
  dilation, the output NHWC (rows sometimes padded by 8), FP32 or the input type; sometimes + bias +
  relu. conv_tc refuses NCHW, so its graphs are channels-last only.

``rng`` draws the structure (kind, types, op, layout, epilogue, spatial rank) and ``shapes`` the sizes,
paddings, strides and dilations: cases that share a structure compile the same kernels where their
cache keys name no size (see :data:`.families.VARIANTS`).
"""
from ..testing import SIM
from .spec import DT, Spec, graph, packed, pick

DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))
HALF = ((DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))
CH = (1, 2, 3, 4) if SIM else (1, 3, 4, 8, 16, 32, 64)
CH_TC = (8, 16) if SIM else (8, 16, 32, 64)
SP = (2, 3, 4, 5) if SIM else (3, 5, 7, 8, 14, 16)


def nhwc(dims):
    """Packed channels-last strides of [N, C, spatial...] (KRSC for a filter)."""
    return packed(dims, [0] + list(range(2, len(dims))) + [1])


def _layout(dims, kind):
    """Packed NCHW (row-major) or NHWC (channels-last) strides of ``dims``."""
    return nhwc(dims) if kind == "nhwc" else packed(dims)


def _epilogue(g, rng, Y, k, nsp):
    """Y (+ per-channel bias) (+ relu), and the description's suffix."""
    desc = ""
    r = rng.random()
    if r < 0.3:
        B = g.tensor(name="bias", dim=[1, k] + [1] * nsp, stride=[k] + [1] * (nsp + 1))
        Y = g.bias(input=Y, bias=B, name="bias")
        desc += " + bias"
    if r < 0.15 or 0.3 <= r < 0.45:
        Y = g.relu(Y, name="relu")
        desc += " + relu"
    return Y, desc


def _graph(rng, op, dtype, xd, wd, yd, geo, layouts, epilogue):
    """The conv graph of ``op`` over x / w / y dims with (x, w, y) strides ``layouts`` (``rng`` draws the
    epilogue); returns (graph, epilogue description)."""
    g = graph(dtype)
    xs, ws, ys = layouts
    nsp = len(xd) - 2
    desc = ""
    if op == "fprop":
        X = g.tensor(name="X", dim=xd, stride=xs)
        W = g.tensor(name="W", dim=wd, stride=ws)
        Y = g.conv_fprop(X, W, name="conv", **geo)
        if epilogue:
            Y, desc = _epilogue(g, rng, Y, wd[0], nsp)
        Y.set_output(True).set_name("Y").set_dim(yd).set_stride(ys)
    elif op == "dgrad":
        DY = g.tensor(name="DY", dim=yd, stride=ys)
        W = g.tensor(name="W", dim=wd, stride=ws)
        g.conv_dgrad(loss=DY, filter=W, out_dims=xd, name="dgrad", **geo).set_output(True).set_name("DX") \
            .set_stride(xs)
    else:
        X = g.tensor(name="X", dim=xd, stride=xs)
        DY = g.tensor(name="DY", dim=yd, stride=ys)
        g.conv_wgrad(image=X, loss=DY, out_dims=wd, name="wgrad", **geo).set_output(True).set_name("DW") \
            .set_stride(ws)
    return g, desc


def _one_by_one(rng, shapes):
    dtype, dname = pick(rng, DTYPES)
    op = pick(rng, ("fprop", "dgrad", "wgrad"))
    nsp = pick(rng, (1, 2, 2, 3))
    stride = 2 if op == "wgrad" and nsp == 2 and rng.random() < 0.25 else 1
    kind = pick(rng, ("nchw", "nhwc"))
    n, c, k = pick(shapes, (1, 2)), pick(shapes, CH), pick(shapes, CH)
    size = [pick(shapes, SP) for _ in range(nsp)]
    out = [(s - 1) // stride + 1 for s in size]
    xd, wd, yd = [n, c] + size, [k, c] + [1] * nsp, [n, k] + out
    layouts = tuple(_layout(d, kind) for d in (xd, wd, yd))
    geo = dict(pre_padding=[0] * nsp, post_padding=[0] * nsp, stride=[stride] * nsp, dilation=[1] * nsp)
    g, epi = _graph(rng, op, dtype, xd, wd, yd, geo, layouts, True)
    return Spec(g, f"conv_{op} 1x1 {dname} {nsp}-D x {xd} w {wd} y {yd} {kind} stride {stride}{epi}")


def _winograd(rng, shapes):
    dtype, dname = pick(rng, DTYPES)
    op = pick(rng, ("fprop", "fprop", "dgrad", "wgrad"))
    kind = pick(rng, ("nchw", "nhwc"))
    n, c, k = pick(shapes, (1, 2)), pick(shapes, CH), pick(shapes, CH)
    size = [pick(shapes, SP) + 1 for _ in range(2)]
    pre = [pick(shapes, (0, 1, 1)) for _ in range(2)]
    post = list(pre) if shapes.random() < 0.7 else [pick(shapes, (0, 1, 2)) for _ in range(2)]
    out = [s + a + b - 2 for s, a, b in zip(size, pre, post)]
    xd, wd, yd = [n, c] + size, [k, c, 3, 3], [n, k] + out
    layouts = tuple(_layout(d, kind) for d in (xd, wd, yd))
    geo = dict(pre_padding=pre, post_padding=post, stride=[1, 1], dilation=[1, 1])
    g, epi = _graph(rng, op, dtype, xd, wd, yd, geo, layouts, True)
    return Spec(g, f"conv_{op} 3x3 {dname} x {xd} w {wd} y {yd} {kind} pad {pre}/{post}{epi}")


def _tensor_core(rng, shapes):
    dtype, dname = pick(rng, HALF)
    nsp = pick(rng, (1, 2, 2))
    stem = rng.random() < 0.15
    padded_rows = not stem and rng.random() < 0.25
    y_float = rng.random() < 0.3
    n, k = pick(shapes, (1, 2)), pick(shapes, CH_TC)
    c = 3 if stem else pick(shapes, CH_TC)
    for _ in range(20):
        size = [pick(shapes, SP) + 1 for _ in range(nsp)]
        filt = [pick(shapes, (1, 3, 3)) for _ in range(nsp)]
        stride = [pick(shapes, (1, 1, 2)) for _ in range(nsp)]
        dil = [pick(shapes, (1, 1, 2)) for _ in range(nsp)]
        pad = [int(shapes.integers(0, f)) if f > 1 else 0 for f in filt]
        out = [(s + 2 * p - ((f - 1) * d + 1)) // st + 1 for s, p, f, d, st in zip(size, pad, filt, dil, stride)]
        if all(o >= 1 for o in out):
            break
    else:
        size, filt, stride, dil, pad, out = [4] * nsp, [1] * nsp, [1] * nsp, [1] * nsp, [0] * nsp, [4] * nsp
    xd, wd, yd = [n, c] + size, [k, c] + filt, [n, k] + out
    ys = nhwc(yd)
    row = k
    if padded_rows:        # output pixel rows padded by 8 channels' worth
        row = k + 8
        ys = [0, 1] + [0] * nsp
        acc = row
        for i in reversed(range(nsp)):
            ys[2 + i] = acc
            acc *= out[i]
        ys[0] = acc
    geo = dict(pre_padding=pad, post_padding=pad, stride=stride, dilation=dil)
    g = graph(dtype)
    X = g.tensor(name="X", dim=xd, stride=nhwc(xd))
    W = g.tensor(name="W", dim=wd, stride=nhwc(wd))
    Y = g.conv_fprop(X, W, name="conv", **geo)
    epi = ""
    if not stem:
        Y, epi = _epilogue(g, rng, Y, k, nsp)
    Y.set_output(True).set_name("Y").set_dim(yd).set_stride(ys)
    if y_float:
        Y.set_data_type(DT.FLOAT)
        epi += ", Y float"
    return Spec(g, f"conv_fprop tc {dname} {nsp}-D x {xd} nhwc w {wd} krsc y {yd} row {row} pad {pad} stride "
                   f"{stride} dil {dil}{' (stem: C = 3)' if stem else ''}{epi}")


def generate(rng, shapes=None):
    return pick(rng, (_one_by_one, _winograd, _tensor_core))(rng, rng if shapes is None else shapes)
