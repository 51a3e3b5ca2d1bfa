"""cudnnLRNCrossChannelForward / Backward, lowered to a 1x1 convolution over channels plus pointwise nodes.

With the band matrix B[c, j] = 1 when channel j lies in c's window [c - lb, c + la]
(lb = (n - 1) // 2, la = n - 1 - lb; reference/lrn.py) and D = k + (alpha / n) * conv(x^2, B):
    forward:   y = x * D^(-beta)
    backward:  dx = dy * D^(-beta) - (2 alpha beta / n) * x * conv(dy * x * D^(-beta - 1), B^T)
B is a constant filter in a buffer the call owns. cudnnDivisiveNormalization* is NOT_SUPPORTED.
"""
import numpy as np

from ..errors import BadParamError, CudnnError, c_api
from ..handle import get_handle_or_raise
from ..ir import ConvFprop
from ..ir.tensor import packed_strides
from ..types import cudnnDataType_t, cudnnLRNMode_t, cudnnPointwiseMode_t, cudnnStatus_t
from . import lower as L
from ._util import desc_arg, enum_arg, host_scalar, need_ptr, optional_ptrs
from .op_desc import LRNDescriptor
from .tensor_desc import TensorDescriptor

PM = cudnnPointwiseMode_t
F32 = cudnnDataType_t.CUDNN_DATA_FLOAT


def band(C, n, transpose=False):
    lb = (n - 1) // 2
    la = n - 1 - lb
    b = np.zeros((C, C, 1, 1), np.float32)
    for c in range(C):
        b[c, max(0, c - lb):min(C - 1, c + la) + 1, 0, 0] = 1.0
    return np.ascontiguousarray(b.transpose(1, 0, 2, 3)) if transpose else b


def _conv(b, x, w, nd, name, dims):
    out = b.anchor_out(name, dims)
    k = nd - 2
    b.add(ConvFprop(name, {"X": x, "W": w}, {"Y": out}, spatial_dims=k, stride=(1,) * k, pre_padding=(0,) * k,
                    post_padding=(0,) * k, dilation=(1,) * k))
    return out


def _denominator(b, d, xt, nd, C):
    """D = k + (alpha / n) * window_sum(x^2)."""
    sq = b.virtual("x^2", dtype=F32)
    b.pw(PM.CUDNN_POINTWISE_MUL, sq, "square", X=xt, B=xt)
    s = _conv(b, sq, b.constant("band", band(C, d.n), F32), nd, "window_sum", xt.dims)
    t = b.virtual("scaled_sum", dtype=F32)
    b.pw(PM.CUDNN_POINTWISE_MUL, t, "alpha_over_n", X=s, B=b.scalar("alpha_n", nd, F32, d.alpha / d.n))
    den = b.virtual("D", dtype=F32)
    b.pw(PM.CUDNN_POINTWISE_ADD, den, "plus_k", X=t, B=b.scalar("k", nd, F32, d.k))
    return den


def _check(d, lrnMode, descs):
    enum_arg(cudnnLRNMode_t, lrnMode, "lrnMode")
    dims = descs[0][0].dims
    for dd, name in descs:
        if dd.dims != dims:
            raise BadParamError(f"{name} dims {dd.dims} differ from {descs[0][1]} dims {dims}")
    if len(dims) not in (4, 5):
        raise CudnnError(f"LRN takes 4-d or 5-d tensors, not {len(dims)}-d", cudnnStatus_t.CUDNN_STATUS_NOT_SUPPORTED)


@c_api(0)
def cudnnLRNCrossChannelForward(handle, normDesc, lrnMode, alpha, xDesc, x, beta, yDesc, y):
    h = get_handle_or_raise(handle)
    d = desc_arg(normDesc, LRNDescriptor, "normDesc")
    xd, yd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(yDesc, TensorDescriptor, "yDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(x, "x"), need_ptr(y, "y")
    _check(d, lrnMode, [(xd, "xDesc"), (yd, "yDesc")])
    nd, C = xd.nbDims, xd.dims[1]

    def build(b):
        xt = b.tensor("x", xd)
        den = _denominator(b, d, xt, nd, C)
        p = b.virtual("D^-beta", dtype=F32)
        b.pw(PM.CUDNN_POINTWISE_POW, p, "pow", X=den, B=b.scalar("-beta", nd, F32, -d.beta))
        res = b.virtual("lrn", dtype=F32)
        b.pw(PM.CUDNN_POINTWISE_MUL, res, "times_x", X=p, B=xt)
        b.blend(res, "y", yd, al, be, L.scalar_dtype(yd.dtype))

    key = ("lrn_fwd", (d.n, d.alpha, d.beta, d.k), xd.signature(), yd.signature(), L.blend_key(al, be))
    L.run(h, key, build, {"x": x, "y": y}, {"alpha": al})


@c_api(0)
def cudnnLRNCrossChannelBackward(handle, normDesc, lrnMode, alpha, yDesc, y, dyDesc, dy, xDesc, x, beta, dxDesc, dx):
    h = get_handle_or_raise(handle)
    d = desc_arg(normDesc, LRNDescriptor, "normDesc")
    yd, dyd = desc_arg(yDesc, TensorDescriptor, "yDesc"), desc_arg(dyDesc, TensorDescriptor, "dyDesc")
    xd, dxd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(dxDesc, TensorDescriptor, "dxDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(dy, "dy"), need_ptr(x, "x"), need_ptr(dx, "dx")
    optional_ptrs(y=y)
    _check(d, lrnMode, [(xd, "xDesc"), (yd, "yDesc"), (dyd, "dyDesc"), (dxd, "dxDesc")])
    nd, C = xd.nbDims, xd.dims[1]

    def build(b):
        xt, dyt = b.tensor("x", xd), b.tensor("dy", dyd)
        den = _denominator(b, d, xt, nd, C)
        # D is read by two pointwise groups and a convolution: keep it in a buffer
        v = [b.virtual(n, dtype=F32) for n in ("D^-beta", "D^(-beta-1)", "dy*x", "t", "term1", "x*T", "term2",
                                               "dlrn")]
        dbuf = b.scratch_tensor("D", xd.dims, packed_strides(xd.dims), F32)
        b.pw(PM.CUDNN_POINTWISE_IDENTITY, dbuf, "keep_D", X=den)
        b.pw(PM.CUDNN_POINTWISE_POW, v[0], "pow_beta", X=dbuf, B=b.scalar("-beta", nd, F32, -d.beta))
        b.pw(PM.CUDNN_POINTWISE_POW, v[1], "pow_beta1", X=dbuf, B=b.scalar("-beta-1", nd, F32, -d.beta - 1.0))
        b.pw(PM.CUDNN_POINTWISE_MUL, v[2], "dy_x", X=dyt, B=xt)
        b.pw(PM.CUDNN_POINTWISE_MUL, v[3], "t", X=v[2], B=v[1])
        big_t = _conv(b, v[3], b.constant("band_t", band(C, d.n, transpose=True), F32), nd, "window_sum_t",
                      xd.dims)
        b.pw(PM.CUDNN_POINTWISE_MUL, v[4], "term1", X=dyt, B=v[0])
        b.pw(PM.CUDNN_POINTWISE_MUL, v[5], "x_T", X=big_t, B=xt)
        b.pw(PM.CUDNN_POINTWISE_MUL, v[6], "term2", X=v[5], B=b.scalar("c", nd, F32, 2.0 * d.alpha * d.beta / d.n))
        b.pw(PM.CUDNN_POINTWISE_SUB, v[7], "dx", X=v[4], B=v[6])
        b.blend(v[7], "dx", dxd, al, be, L.scalar_dtype(dxd.dtype))

    key = ("lrn_bwd", (d.n, d.alpha, d.beta, d.k), xd.signature(), dyd.signature(), dxd.signature(),
           L.blend_key(al, be))
    L.run(h, key, build, {"x": x, "dy": dy, "dx": dx}, {"alpha": al})


@c_api(0)
def cudnnDivisiveNormalizationForward(handle, normDesc, mode, alpha, xDesc, x, means, temp, temp2, beta, yDesc, y):
    get_handle_or_raise(handle)
    raise CudnnError("cudnnDivisiveNormalizationForward is not lowered (no IR node for it)",
                     cudnnStatus_t.CUDNN_STATUS_NOT_SUPPORTED)


@c_api(0)
def cudnnDivisiveNormalizationBackward(handle, normDesc, mode, alpha, xDesc, x, means, dy, temp, temp2, beta,
                                       dXdMeansDesc, dx, dMeans):
    get_handle_or_raise(handle)
    raise CudnnError("cudnnDivisiveNormalizationBackward is not lowered (no IR node for it)",
                     cudnnStatus_t.CUDNN_STATUS_NOT_SUPPORTED)
