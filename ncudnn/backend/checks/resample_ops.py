"""Finalize checks of the resample forward / backward operations.

Per spatial dimension i: y_i = 1 + floor((x_i + pre_i + post_i - w_i) / s_i) (fractions allowed).
"""
import math
from fractions import Fraction

from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ..report import bad
from .tensor import tensor_of


def resample_output_size(x, pre, post, window, stride):
    return 1 + math.floor((Fraction(x) + Fraction(pre) + Fraction(post) - Fraction(window)) / Fraction(stride))


def _check(d, desc_name, x_name, y_name, idx_name):
    rs = d.value(desc_name)
    nb = rs.value(A.CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS)
    x, y = tensor_of(d, x_name), tensor_of(d, y_name)
    for n, t in ((x_name, x), (y_name, y)):
        if t.rank != nb + 2:
            bad(d, n, f"{t.rank} dimensions: the resample has {nb} spatial dimensions, so {nb + 2} are needed")
    if tuple(x.dims[:2]) != tuple(y.dims[:2]):
        bad(d, y_name, f"leading dims {list(y.dims[:2])} differ from {list(x.dims[:2])}")
    pre = rs.values(A.CUDNN_ATTR_RESAMPLE_PRE_PADDINGS)
    post = rs.values(A.CUDNN_ATTR_RESAMPLE_POST_PADDINGS)
    window = rs.values(A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS)
    strides = rs.values(A.CUDNN_ATTR_RESAMPLE_STRIDES)
    for i in range(nb):
        want = resample_output_size(x.dims[2 + i], pre[i], post[i], window[i], strides[i])
        if y.dims[2 + i] != want:
            bad(d, y_name, f"spatial dim {i} is {y.dims[2 + i]}, padding and stride give {want}")
    idx = tensor_of(d, idx_name, False)
    if idx is not None and idx.dims != y.dims:
        bad(d, idx_name, f"dims {list(idx.dims)} differ from the output's {list(y.dims)}")


def finalize_resample_fwd(d):
    _check(d, A.CUDNN_ATTR_OPERATION_RESAMPLE_FWD_DESC, A.CUDNN_ATTR_OPERATION_RESAMPLE_FWD_XDESC,
           A.CUDNN_ATTR_OPERATION_RESAMPLE_FWD_YDESC, A.CUDNN_ATTR_OPERATION_RESAMPLE_FWD_IDXDESC)


def finalize_resample_bwd(d):
    _check(d, A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DESC, A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DXDESC,
           A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DYDESC, A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_IDXDESC)
    dx = tensor_of(d, A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DXDESC)
    dy = tensor_of(d, A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DYDESC)
    for n, ref in ((A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_XDESC, dx), (A.CUDNN_ATTR_OPERATION_RESAMPLE_BWD_YDESC, dy)):
        t = tensor_of(d, n, False)
        if t is not None and t.dims != ref.dims:
            bad(d, n, f"dims {list(t.dims)} differ from the gradient's {list(ref.dims)}")


FINALIZERS = {
    D.CUDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR: finalize_resample_fwd,
    D.CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR: finalize_resample_bwd,
}
