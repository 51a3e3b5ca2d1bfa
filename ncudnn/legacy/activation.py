"""cudnnActivationForward / cudnnActivationBackward, lowered to one pointwise node (+ blending).

Modes: SIGMOID, RELU (NaN option honoured), TANH, CLIPPED_RELU (upper clip = coef), ELU
(alpha = coef), SWISH (beta = the descriptor's swish beta). IDENTITY is refused with BAD_PARAM as
cuDNN documents (it exists only to bypass the activation of cudnnConvolutionBiasActivationForward).
Backward computes dy * f'(x) from x (y is accepted and not read).
"""
from ..errors import BadParamError, c_api
from ..handle import get_handle_or_raise
from ..types import cudnnActivationMode_t, cudnnPointwiseMode_t
from . import lower as L
from ._util import desc_arg, host_scalar, need_ptr, optional_ptrs
from .op_desc import ActivationDescriptor
from .tensor_desc import TensorDescriptor

AM = cudnnActivationMode_t
PM = cudnnPointwiseMode_t

_NAMES = {AM.CUDNN_ACTIVATION_SIGMOID: "SIGMOID", AM.CUDNN_ACTIVATION_RELU: "RELU", AM.CUDNN_ACTIVATION_TANH: "TANH",
          AM.CUDNN_ACTIVATION_CLIPPED_RELU: "RELU", AM.CUDNN_ACTIVATION_ELU: "ELU", AM.CUDNN_ACTIVATION_SWISH: "SWISH"}
#: activation mode -> pointwise forward / backward mode (CLIPPED_RELU is RELU with an upper clip)
_FWD = {m: PM[f"CUDNN_POINTWISE_{n}_FWD"] for m, n in _NAMES.items()}
_BWD = {m: PM[f"CUDNN_POINTWISE_{n}_BWD"] for m, n in _NAMES.items()}


def act_attrs(a):
    """Pointwise attributes of activation descriptor ``a``."""
    m = a.mode
    if m in (AM.CUDNN_ACTIVATION_RELU, AM.CUDNN_ACTIVATION_CLIPPED_RELU):
        attrs = {"nan_propagation": a.nan_opt}
        if m == AM.CUDNN_ACTIVATION_CLIPPED_RELU:
            attrs["relu_upper_clip"] = a.coef
        return attrs
    if m == AM.CUDNN_ACTIVATION_ELU:
        return {"elu_alpha": a.coef}
    if m == AM.CUDNN_ACTIVATION_SWISH:
        return {"swish_beta": a.swish_beta}
    return {}


def _check_act(a):
    if a.mode == AM.CUDNN_ACTIVATION_IDENTITY:
        raise BadParamError("CUDNN_ACTIVATION_IDENTITY only bypasses the activation of "
                            "cudnnConvolutionBiasActivationForward; it does not work with cudnnActivation*")


def same_dims(a, b, an, bn):
    if a.dims != b.dims:
        raise BadParamError(f"{an} dims {a.dims} differ from {bn} dims {b.dims}")


@c_api(0)
def cudnnActivationForward(handle, activationDesc, alpha, xDesc, x, beta, yDesc, y):
    h = get_handle_or_raise(handle)
    a = desc_arg(activationDesc, ActivationDescriptor, "activationDesc")
    xd = desc_arg(xDesc, TensorDescriptor, "xDesc")
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(x, "x"), need_ptr(y, "y")
    _check_act(a)
    same_dims(xd, yd, "xDesc", "yDesc")
    sdt = L.scalar_dtype(yd.dtype)

    def build(b):
        xt = b.tensor("x", xd)
        out = b.virtual("act", dtype=sdt) if L.needs_blend(al, be) else None
        if out is None:
            out = b.blend(None, "y", yd, al, be)
        else:
            b.blend(out, "y", yd, al, be, sdt)
        b.pw(_FWD[a.mode], out, "activation", X=xt, **act_attrs(a))

    key = ("act_fwd", a.signature(), xd.signature(), yd.signature(), L.blend_key(al, be))
    L.run(h, key, build, {"x": x, "y": y}, {"alpha": al})


@c_api(0)
def cudnnActivationBackward(handle, activationDesc, alpha, yDesc, y, dyDesc, dy, xDesc, x, beta, dxDesc, dx):
    h = get_handle_or_raise(handle)
    a = desc_arg(activationDesc, ActivationDescriptor, "activationDesc")
    desc_arg(yDesc, TensorDescriptor, "yDesc")
    dyd = desc_arg(dyDesc, TensorDescriptor, "dyDesc")
    xd = desc_arg(xDesc, TensorDescriptor, "xDesc")
    dxd = desc_arg(dxDesc, TensorDescriptor, "dxDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(dy, "dy"), need_ptr(x, "x"), need_ptr(dx, "dx")
    optional_ptrs(y=y)
    _check_act(a)
    same_dims(dyd, dxd, "dyDesc", "dxDesc")
    same_dims(xd, dxd, "xDesc", "dxDesc")
    sdt = L.scalar_dtype(dxd.dtype)

    def build(b):
        dyt, xt = b.tensor("dy", dyd), b.tensor("x", xd)
        out = b.virtual("dact", dtype=sdt) if L.needs_blend(al, be) else None
        if out is None:
            out = b.blend(None, "dx", dxd, al, be)
        else:
            b.blend(out, "dx", dxd, al, be, sdt)
        b.pw(_BWD[a.mode], out, "activation_bwd", DY=dyt, X=xt, **act_attrs(a))

    key = ("act_bwd", a.signature(), dyd.signature(), xd.signature(), dxd.signature(), L.blend_key(al, be))
    L.run(h, key, build, {"dy": dy, "x": x, "dx": dx}, {"alpha": al})
