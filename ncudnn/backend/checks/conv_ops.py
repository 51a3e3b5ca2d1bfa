"""Finalize checks of the convolution operations (forward, backward data, backward filter).

X, W, Y (or DX, W, DY / X, DW, DY) are bound as documented: with SPATIAL_DIMS + 2 dimensions
X = [N, G*C, ...], W = [G*K, C, ...], Y = [N, G*K, ...]; with SPATIAL_DIMS + 3 dimensions
X = [N, G, C, ...], W = [G, K, C, ...], Y = [N, G, K, ...] with each group packed. Any other
combination is BAD_PARAM naming the tensor.
"""
from dataclasses import dataclass

from ...ir.ops.conv_common import out_size
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ..report import bad
from .tensor import tensor_of


@dataclass(frozen=True)
class ConvGeometry:
    groups: int
    n: int
    c: int  # input channels per group
    k: int  # output channels per group
    x_spatial: tuple
    w_spatial: tuple
    y_spatial: tuple
    grouped_layout: bool  # True for the SPATIAL_DIMS + 3 form
    mode: int
    comp_type: int
    pre: tuple
    post: tuple
    strides: tuple
    dilations: tuple


def check_conv(d, conv_name, names):
    """names: (x-like, w-like, y-like) attribute names of this operation."""
    conv = d.value(conv_name)
    nb = conv.value(A.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS)
    pre = tuple(conv.values(A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS))
    post = tuple(conv.values(A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS))
    strides = tuple(conv.values(A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES))
    dil = tuple(conv.values(A.CUDNN_ATTR_CONVOLUTION_DILATIONS))
    xn, wn, yn = names
    x, w, y = (tensor_of(d, n) for n in names)
    for name, t in zip(names, (x, w, y)):
        if t.rank not in (nb + 2, nb + 3):
            bad(d, name, f"{t.rank} dimensions {list(t.dims)}: the convolution has {nb} spatial dimensions, "
                f"so {nb + 2} or {nb + 3} are needed")
    if not x.rank == w.rank == y.rank:
        bad(d, wn, f"tensors have {x.rank}, {w.rank} and {y.rank} dimensions: they must agree")
    if x.rank == nb + 2:
        n, gc = x.dims[:2]
        gk, c = w.dims[:2]
        if gc % c:
            bad(d, wn, f"input has {gc} channels, not a multiple of the filter's {c} channels per group")
        g = gc // c
        if gk % g:
            bad(d, wn, f"{gk} output channels do not split into {g} groups")
        k = gk // g
        if y.dims[0] != n or y.dims[1] != gk:
            bad(d, yn, f"dims {list(y.dims[:2])} lead, [N, G*K] = [{n}, {gk}] expected")
    else:
        n, g, c = x.dims[:3]
        if tuple(w.dims[:1]) + tuple(w.dims[2:3]) != (g, c):
            bad(d, wn, f"dims {list(w.dims[:3])} lead, [G, K, C] with G={g}, C={c} expected")
        k = w.dims[1]
        if tuple(y.dims[:3]) != (n, g, k):
            bad(d, yn, f"dims {list(y.dims[:3])} lead, [N, G, K] = [{n}, {g}, {k}] expected")
        if g > 1:
            for name, t, inner in ((xn, x, c), (wn, w, k), (yn, y, k)):
                gi = 0 if t is w else 1
                if t.strides[gi] != inner * t.strides[gi + 1]:
                    bad(d, name, f"strides {list(t.strides)}: each group must be packed "
                        f"(group stride = {inner} x channel stride)")
    xs, ws, ys = x.dims[-nb:], w.dims[-nb:], y.dims[-nb:]
    for i in range(nb):
        out = out_size(xs[i], ws[i], strides[i], pre[i], post[i], dil[i])
        if out < 1:
            bad(d, wn, f"spatial dim {i}: the dilated filter ({ws[i]}) exceeds the padded input ({xs[i]})")
        if out != ys[i]:
            bad(d, yn, f"spatial dim {i} is {ys[i]}, the convolution gives {out}")
    d.state["conv"] = ConvGeometry(
        groups=g, n=n, c=c, k=k, x_spatial=tuple(xs), w_spatial=tuple(ws), y_spatial=tuple(ys),
        grouped_layout=x.rank == nb + 3, mode=conv.value(A.CUDNN_ATTR_CONVOLUTION_CONV_MODE),
        comp_type=conv.value(A.CUDNN_ATTR_CONVOLUTION_COMP_TYPE), pre=pre, post=post, strides=strides,
        dilations=dil)


def finalize_fprop(d):
    check_conv(d, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
               (A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y))


def finalize_dgrad(d):
    check_conv(d, A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
               (A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY))


def finalize_wgrad(d):
    check_conv(d, A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
               (A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                A.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY))


FINALIZERS = {
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: finalize_fprop,
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR: finalize_dgrad,
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: finalize_wgrad,
}
