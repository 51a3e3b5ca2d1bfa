"""cudnnSoftmaxForward / cudnnSoftmaxBackward, lowered to reductions and pointwise nodes.

Axes: MODE_INSTANCE normalizes over every dim but N (stats [N, 1, 1, ...]); MODE_CHANNEL over C
(stats [N, 1, H, W]). Forward, with m = max(x), s = sum(exp(x - m)):
    ACCURATE: y = exp(x - m) / s        FAST: the same (computed max-shifted)        LOG: y = (x - m) - log(s)
Backward from y:  ACCURATE / FAST: dx = y * (dy - sum(dy * y));  LOG: dx = dy - exp(y) * sum(dy).
This is the pattern ir.partition recognizes as one "softmax" subgraph (the softmax_fused engine: one
kernel); when no engine takes it, the unfused variant keeps exp(x - m) (LOG: x - m) in a buffer the
call owns and runs reductions and pointwise kernels.
"""
from ..errors import BadParamError, c_api
from ..handle import get_handle_or_raise
from ..ir import Reduction
from ..types import (cudnnDataType_t, cudnnPointwiseMode_t, cudnnReduceTensorOp_t, cudnnSoftmaxAlgorithm_t,
                     cudnnSoftmaxMode_t)
from . import lower as L
from ._util import desc_arg, enum_arg, host_scalar, need_ptr
from .tensor_desc import TensorDescriptor

PM = cudnnPointwiseMode_t
RO = cudnnReduceTensorOp_t
SA = cudnnSoftmaxAlgorithm_t
SM = cudnnSoftmaxMode_t
F32 = cudnnDataType_t.CUDNN_DATA_FLOAT


def stats_dims(mode, dims):
    if mode == SM.CUDNN_SOFTMAX_MODE_INSTANCE:
        return (dims[0],) + (1,) * (len(dims) - 1)
    return (dims[0], 1) + tuple(dims[2:])


def _reduce(b, mode, x, dims, name):
    out = b.virtual(name, dims=dims, dtype=F32)
    b.add(Reduction(name, {"X": x}, {"Y": out}, mode=mode))
    return out


@c_api(0)
def cudnnSoftmaxForward(handle, algo, mode, alpha, xDesc, x, beta, yDesc, y):
    h = get_handle_or_raise(handle)
    algo = enum_arg(SA, algo, "algo")
    mode = enum_arg(SM, mode, "mode")
    xd = desc_arg(xDesc, TensorDescriptor, "xDesc")
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(x, "x"), need_ptr(y, "y")
    if xd.dims != yd.dims:
        raise BadParamError(f"xDesc dims {xd.dims} differ from yDesc dims {yd.dims}")
    sd = stats_dims(mode, xd.dims)

    def build(b):
        xt = b.tensor("x", xd)
        if L.needs_blend(al, be):
            res = b.virtual("softmax", dtype=F32)
            b.blend(res, "y", yd, al, be, L.scalar_dtype(yd.dtype))
        else:
            res = b.tensor("y", yd)
        m = _reduce(b, RO.CUDNN_REDUCE_TENSOR_MAX, xt, sd, "max")
        if algo != SA.CUDNN_SOFTMAX_LOG:  # FAST computes the max-shifted form too: the same value
            d = b.virtual("x-max", dtype=F32)
            e = b.anchor_out("exp", xd.dims)
            b.pw(PM.CUDNN_POINTWISE_SUB, d, "sub_max", X=xt, B=m)
            b.pw(PM.CUDNN_POINTWISE_EXP, e, "exp", X=d)
            s = _reduce(b, RO.CUDNN_REDUCE_TENSOR_ADD, e, sd, "sum")
            b.pw(PM.CUDNN_POINTWISE_DIV, res, "normalize", X=e, B=s)
        else:
            d = b.anchor_out("x-max", xd.dims)
            e = b.virtual("exp", dtype=F32)
            ls = b.virtual("log_sum", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_SUB, d, "sub_max", X=xt, B=m)
            b.pw(PM.CUDNN_POINTWISE_EXP, e, "exp", X=d)
            s = _reduce(b, RO.CUDNN_REDUCE_TENSOR_ADD, e, sd, "sum")
            b.pw(PM.CUDNN_POINTWISE_LOG, ls, "log", X=s)
            b.pw(PM.CUDNN_POINTWISE_SUB, res, "sub_log_sum", X=d, B=ls)

    key = ("softmax_fwd", int(algo), int(mode), xd.signature(), yd.signature(), L.blend_key(al, be))
    L.run(h, key, build, {"x": x, "y": y}, {"alpha": al})


@c_api(0)
def cudnnSoftmaxBackward(handle, algo, mode, alpha, yDesc, y, dyDesc, dy, beta, dxDesc, dx):
    h = get_handle_or_raise(handle)
    algo = enum_arg(SA, algo, "algo")
    mode = enum_arg(SM, mode, "mode")
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    dyd = desc_arg(dyDesc, TensorDescriptor, "dyDesc")
    dxd = desc_arg(dxDesc, TensorDescriptor, "dxDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(y, "y"), need_ptr(dy, "dy"), need_ptr(dx, "dx")
    if not (yd.dims == dyd.dims == dxd.dims):
        raise BadParamError(f"yDesc {yd.dims}, dyDesc {dyd.dims} and dxDesc {dxd.dims} must have equal dims")
    sd = stats_dims(mode, yd.dims)

    def build(b):
        yt, dyt = b.tensor("y", yd), b.tensor("dy", dyd)
        res = b.virtual("dsoftmax", dtype=F32)
        b.blend(res, "dx", dxd, al, be, L.scalar_dtype(dxd.dtype))
        if algo == SA.CUDNN_SOFTMAX_LOG:
            s = _reduce(b, RO.CUDNN_REDUCE_TENSOR_ADD, dyt, sd, "sum_dy")
            ey, t = b.virtual("exp_y", dtype=F32), b.virtual("exp_y*sum", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_EXP, ey, "exp_y", X=yt)
            b.pw(PM.CUDNN_POINTWISE_MUL, t, "scale", X=ey, B=s)
            b.pw(PM.CUDNN_POINTWISE_SUB, res, "sub", X=dyt, B=t)
        else:
            p, q = b.virtual("dy*y", dtype=F32), b.virtual("dy-sum", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_MUL, p, "dy_y", X=dyt, B=yt)
            s = _reduce(b, RO.CUDNN_REDUCE_TENSOR_ADD, p, sd, "sum_dy_y")
            b.pw(PM.CUDNN_POINTWISE_SUB, q, "sub", X=dyt, B=s)
            b.pw(PM.CUDNN_POINTWISE_MUL, res, "mul_y", X=yt, B=q)

    key = ("softmax_bwd", int(algo), int(mode), yd.signature(), dyd.signature(), dxd.signature(),
           L.blend_key(al, be))
    L.run(h, key, build, {"y": y, "dy": dy, "dx": dx}, {"alpha": al})
