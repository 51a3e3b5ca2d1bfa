"""cudnnPoolingForward / cudnnPoolingBackward, lowered to ResampleFwd / ResampleBwd (+ blending).

Mode mapping (reference/resample.py documents the same): MAX and MAX_DETERMINISTIC -> MAXPOOL with
NEG_INF_PAD (padding never wins), AVERAGE_COUNT_INCLUDE_PADDING -> AVGPOOL with ZERO_PAD,
AVERAGE_COUNT_EXCLUDE_PADDING -> AVGPOOL_EXCLUDE_PADDING; symmetric padding (pre = post = pad).
y's dims must be the descriptor's output dims (BAD_PARAM otherwise). Max-pooling backward routes dy to
each window's first maximum (y is not read): the backward gather recomputes the winners from x itself
where the resample engine's direct gather can (:func:`recomputes_from_x`: windows of at most 256 taps
over their covering outputs, padding below the window), else a forward with an index output runs first.
"""
from ..engines import api
from ..errors import BadParamError, c_api
from ..handle import get_handle_or_raise
from ..ir import ResampleBwd, ResampleFwd
from ..ir.tensor import packed_strides
from ..types import cudnnDataType_t, cudnnPaddingMode_t, cudnnPoolingMode_t, cudnnResampleMode_t
from . import lower as L
from ._util import desc_arg, host_scalar, need_ptr, optional_ptrs
from .op_desc import PoolingDescriptor
from .tensor_desc import TensorDescriptor

PM = cudnnPoolingMode_t
RM = cudnnResampleMode_t
PAD = cudnnPaddingMode_t


def resample_attrs(p):
    if p.mode in (PM.CUDNN_POOLING_MAX, PM.CUDNN_POOLING_MAX_DETERMINISTIC):
        mode, pad = RM.CUDNN_RESAMPLE_MAXPOOL, PAD.CUDNN_NEG_INF_PAD
    elif p.mode == PM.CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING:
        mode, pad = RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING, PAD.CUDNN_ZERO_PAD
    else:
        mode, pad = RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING, PAD.CUDNN_ZERO_PAD
    return dict(mode=mode, spatial_dims=p.nbDims, window=p.window, stride=p.stride, pre_padding=p.pad,
                post_padding=p.pad, padding_mode=pad, nan_propagation=p.nan_opt)


def recomputes_from_x(p):
    """Whether the max-pooling backward of ``p`` reads x directly (the gather recomputes each covering
    window's first maximum, as the forward's index would name it) instead of a forward writing an index."""
    a = resample_attrs(p)
    return api.resample_bwd_from_x(a["mode"], a["padding_mode"], a["pre_padding"], a["window"], a["stride"])[0]


def _check_out(p, xd, yd, xn, yn):
    want = p.output_dims(xd)
    if yd.dims != want:
        raise BadParamError(f"{yn} dims {yd.dims}, but pooling {xn} {xd.dims} gives {want}")


@c_api(0)
def cudnnPoolingForward(handle, poolingDesc, alpha, xDesc, x, beta, yDesc, y):
    h = get_handle_or_raise(handle)
    p = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc")
    xd = desc_arg(xDesc, TensorDescriptor, "xDesc")
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(x, "x"), need_ptr(y, "y")
    _check_out(p, xd, yd, "xDesc", "yDesc")
    sdt = L.scalar_dtype(yd.dtype)

    def build(b):
        xt = b.tensor("x", xd)
        if L.needs_blend(al, be):
            out = b.virtual("pool", dtype=sdt)
            b.blend(out, "y", yd, al, be, sdt)
        else:
            out = b.blend(None, "y", yd, al, be)
        b.add(ResampleFwd("pooling", {"X": xt}, {"Y": out}, **resample_attrs(p)))

    key = ("pool_fwd", p.signature(), xd.signature(), yd.signature(), L.blend_key(al, be))
    L.run(h, key, build, {"x": x, "y": y}, {"alpha": al})


@c_api(0)
def cudnnPoolingBackward(handle, poolingDesc, alpha, yDesc, y, dyDesc, dy, xDesc, x, beta, dxDesc, dx):
    h = get_handle_or_raise(handle)
    p = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc")
    yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
    dyd = desc_arg(dyDesc, TensorDescriptor, "dyDesc")
    xd = desc_arg(xDesc, TensorDescriptor, "xDesc")
    dxd = desc_arg(dxDesc, TensorDescriptor, "dxDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(dy, "dy"), need_ptr(dx, "dx")
    is_max = p.mode in (PM.CUDNN_POOLING_MAX, PM.CUDNN_POOLING_MAX_DETERMINISTIC)
    if is_max:
        need_ptr(x, "x"), need_ptr(y, "y")
    else:
        optional_ptrs(x=x, y=y)
    _check_out(p, dxd, dyd, "dxDesc", "dyDesc")
    if xd.dims != dxd.dims or yd.dims != dyd.dims:
        raise BadParamError(f"xDesc {xd.dims} / yDesc {yd.dims} must match dxDesc {dxd.dims} / dyDesc {dyd.dims}")
    sdt = L.scalar_dtype(dxd.dtype)
    from_x = is_max and recomputes_from_x(p)

    def build(b):
        ins = {"DY": b.tensor("dy", dyd)}
        if from_x:  # the gather recomputes the window winners from x
            ins["X"] = b.tensor("x", xd)
        elif is_max:  # the window winners: the forward recomputed from x with its index output
            idx = b.scratch_tensor("argmax", yd.dims, packed_strides(yd.dims), cudnnDataType_t.CUDNN_DATA_INT32)
            ys = b.scratch_tensor("y_recomputed", yd.dims, packed_strides(yd.dims), yd.dtype)
            b.add(ResampleFwd("pooling_index", {"X": b.tensor("x", xd)}, {"Y": ys, "IDX": idx}, **resample_attrs(p)))
            ins["IDX"] = idx
        if L.needs_blend(al, be):
            out = b.virtual("dpool", dims=dxd.dims, dtype=sdt)
            b.blend(out, "dx", dxd, al, be, sdt)
        else:
            out = b.blend(None, "dx", dxd, al, be)
        b.add(ResampleBwd("pooling_bwd", ins, {"DX": out}, **resample_attrs(p)))

    key = ("pool_bwd", p.signature(), yd.signature(), dyd.signature(), xd.signature(), dxd.signature(),
           L.blend_key(al, be))
    bind = {"dy": dy, "dx": dx}
    if is_max:
        bind["x"] = x
    L.run(h, key, build, bind, {"alpha": al})
