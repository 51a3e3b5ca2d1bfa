"""Tensor arithmetic: AddTensor, OpTensor, ScaleTensor, SetTensor, TransformTensor — pointwise graphs.

* AddTensor: C = alpha * A + beta * C, A broadcast to C (each A dim equal to C's or 1; A is given
  C's dims with stride 0 on its broadcast dims).
* OpTensor: C = op(alpha1 * A, alpha2 * B) + beta * C; B broadcasts; SQRT and NOT read A only
  (NOT = 1 - a, as reference/legacy.py fixes it). MIN / MAX honour the NaN option.
* ScaleTensor: y = alpha * y (in place: the prior and the output are two uids on one buffer).
* SetTensor: y = value everywhere (a by-value scalar broadcast by zero strides; y is not read).
* TransformTensor: y = alpha * x + beta * y between any layouts / data types of equal dims.
"""
from ..errors import BadParamError, c_api
from ..handle import get_handle_or_raise
from ..types import cudnnOpTensorOp_t, cudnnPointwiseMode_t
from . import lower as L
from ._util import desc_arg, host_scalar, need_ptr
from .op_desc import OpTensorDescriptor
from .tensor_desc import TensorDescriptor

OT = cudnnOpTensorOp_t
PM = cudnnPointwiseMode_t
_BIN = {OT.CUDNN_OP_TENSOR_ADD: PM.CUDNN_POINTWISE_ADD, OT.CUDNN_OP_TENSOR_MUL: PM.CUDNN_POINTWISE_MUL,
        OT.CUDNN_OP_TENSOR_MIN: PM.CUDNN_POINTWISE_MIN, OT.CUDNN_OP_TENSOR_MAX: PM.CUDNN_POINTWISE_MAX}


def broadcast_view(src, dst, sname, dname):
    """(dims, strides) of ``src`` expanded to ``dst``'s dims with zero strides (BAD_PARAM if it cannot)."""
    if src.nbDims != dst.nbDims:
        raise BadParamError(f"{sname} has {src.nbDims} dims, {dname} has {dst.nbDims}")
    for i, (a, c) in enumerate(zip(src.dims, dst.dims)):
        if a not in (1, c):
            raise BadParamError(f"{sname} dim {i} is {a}: must be 1 or {dname}'s {c}")
    strides = tuple(0 if a == 1 and c != 1 else s for a, c, s in zip(src.dims, dst.dims, src.strides))
    return dst.dims, strides


def _scaled(b, x, name, value, rank, sdt):
    """x * value as a node (a by-value scalar, runtime), or x itself when value == 1."""
    if value == 1.0:
        return x
    s = b.scalar(name, rank, sdt)
    out = b.virtual(f"{name}*x", dtype=sdt)
    b.pw(PM.CUDNN_POINTWISE_MUL, out, f"scale_{name}", X=x, B=s)
    return out


@c_api(0)
def cudnnAddTensor(handle, alpha, aDesc, A, beta, cDesc, C):
    h = get_handle_or_raise(handle)
    ad = desc_arg(aDesc, TensorDescriptor, "aDesc")
    cd = desc_arg(cDesc, TensorDescriptor, "cDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(A, "A"), need_ptr(C, "C")
    dims, strides = broadcast_view(ad, cd, "aDesc", "cDesc")
    sdt = L.scalar_dtype(cd.dtype)

    def build(b):
        at = b.tensor("a", ad, dims=dims, strides=strides)
        b.blend(at, "c", cd, al, be, sdt)

    key = ("add_tensor", ad.signature(), cd.signature(), L.blend_key(al, be))
    L.run(h, key, build, {"a": A, "c": C}, {"alpha": al})


@c_api(0)
def cudnnOpTensor(handle, opTensorDesc, alpha1, aDesc, A, alpha2, bDesc, B, beta, cDesc, C):
    h = get_handle_or_raise(handle)
    od = desc_arg(opTensorDesc, OpTensorDescriptor, "opTensorDesc")
    ad = desc_arg(aDesc, TensorDescriptor, "aDesc")
    cd = desc_arg(cDesc, TensorDescriptor, "cDesc")
    a1, a2, be = host_scalar(alpha1, "alpha1"), host_scalar(alpha2, "alpha2"), host_scalar(beta, "beta")
    need_ptr(A, "A"), need_ptr(C, "C")
    unary = od.op in (OT.CUDNN_OP_TENSOR_SQRT, OT.CUDNN_OP_TENSOR_NOT)
    if ad.dims != cd.dims:
        raise BadParamError(f"aDesc dims {ad.dims} differ from cDesc dims {cd.dims}")
    if not unary:
        bd = desc_arg(bDesc, TensorDescriptor, "bDesc")
        need_ptr(B, "B")
        broadcast_view(bd, cd, "bDesc", "cDesc")
    sdt = L.scalar_dtype(cd.dtype)
    rank = cd.nbDims

    def build(b):
        xa = _scaled(b, b.tensor("a", ad), "alpha1", a1, rank, sdt)
        res = b.virtual("op", dtype=sdt)
        if od.op == OT.CUDNN_OP_TENSOR_SQRT:
            b.pw(PM.CUDNN_POINTWISE_SQRT, res, "sqrt", X=xa)
        elif od.op == OT.CUDNN_OP_TENSOR_NOT:
            one = b.scalar("one", rank, sdt, 1.0)
            b.pw(PM.CUDNN_POINTWISE_SUB, res, "not", X=one, B=xa)
        else:
            xb = _scaled(b, b.tensor("b", bd), "alpha2", a2, rank, sdt)
            b.pw(_BIN[od.op], res, od.op.name.lower(), X=xa, B=xb, nan_propagation=od.nan_opt)
        b.blend(res, "c", cd, 1.0, be, sdt)

    key = ("op_tensor", int(od.op), int(od.nan_opt), ad.signature(), None if unary else bd.signature(),
           cd.signature(), a1 != 1.0, a2 != 1.0 and not unary, be)
    bind = {"a": A, "c": C}
    if not unary:
        bind["b"] = B
    L.run(h, key, build, bind, {"alpha1": a1, "alpha2": a2, "one": 1.0})


@c_api(0)
def cudnnScaleTensor(handle, yDesc, y, alpha):
    h = get_handle_or_raise(handle)
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    al = host_scalar(alpha, "alpha")
    need_ptr(y, "y")
    sdt = L.scalar_dtype(yd.dtype)

    def build(b):
        prior = b.tensor("y:prior", yd)
        s = b.scalar("alpha", yd.nbDims, sdt)
        b.pw(PM.CUDNN_POINTWISE_MUL, b.tensor("y", yd), "scale", X=prior, B=s)

    L.run(h, ("scale_tensor", yd.signature()), build, {"y": y}, {"alpha": al})


@c_api(0)
def cudnnSetTensor(handle, yDesc, y, valuePtr):
    h = get_handle_or_raise(handle)
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    v = host_scalar(valuePtr, "valuePtr")
    need_ptr(y, "y")

    def build(b):
        s = b.scalar("value", yd.nbDims, yd.dtype)
        s.dims, s.strides = yd.dims, (0,) * yd.nbDims
        b.pw(PM.CUDNN_POINTWISE_IDENTITY, b.tensor("y", yd), "set", X=s)

    L.run(h, ("set_tensor", yd.signature()), build, {"y": y}, {"value": v})


@c_api(0)
def cudnnTransformTensor(handle, alpha, xDesc, x, beta, yDesc, y):
    h = get_handle_or_raise(handle)
    xd = desc_arg(xDesc, TensorDescriptor, "xDesc")
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(x, "x"), need_ptr(y, "y")
    if xd.dims != yd.dims:
        raise BadParamError(f"xDesc dims {xd.dims} differ from yDesc dims {yd.dims}")

    def build(b):
        b.blend(b.tensor("x", xd), "y", yd, al, be, L.scalar_dtype(yd.dtype))

    key = ("transform", xd.signature(), yd.signature(), L.blend_key(al, be))
    L.run(h, key, build, {"x": x, "y": y}, {"alpha": al})
