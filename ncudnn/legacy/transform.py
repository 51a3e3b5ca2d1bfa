"""Tensor transform descriptors, cudnnInitTransformDest, cudnnTransformTensorEx, cudnnTransformFilter.

A transform changes the layout (destFormat) and pads each dim (padBeforeA / padAfterA, zeros).
Lowering: when there is padding the destination is first set to zero (a pointwise graph writing a
by-value 0), then the source is blended into the interior (a pointwise graph whose output is the
destination viewed from the first interior element with the destination's strides). Folding
(foldA != 1) is NOT_SUPPORTED; padding with beta != 0 is NOT_SUPPORTED (cuDNN's padded region has no
prior to blend with).
"""
from .. import memory
from ..errors import BadParamError, CudnnError, c_api
from ..handle import get_handle_or_raise
from ..ir import TensorDesc
from ..ir.tensor import ITEMSIZE
from ..types import cudnnFoldingDirection_t, cudnnStatus_t, cudnnTensorFormat_t
from . import lower as L
from ._util import Descriptor, desc_arg, enum_arg, host_scalar, int_arg, int_array, need_ptr
from .tensor_desc import FilterDescriptor, TensorDescriptor, _format_strides

S = cudnnStatus_t
TF = cudnnTensorFormat_t


class TensorTransformDescriptor(Descriptor):
    KIND = "TensorTransform"

    def __init__(self):
        super().__init__()
        self.nb, self.fmt, self.pad_before, self.pad_after, self.fold = 0, TF.CUDNN_TENSOR_NCHW, (), (), ()
        self.direction = cudnnFoldingDirection_t.CUDNN_TRANSFORM_FOLD


@c_api(1)
def cudnnCreateTensorTransformDescriptor():
    return TensorTransformDescriptor()


@c_api(0)
def cudnnDestroyTensorTransformDescriptor(transformDesc):
    if transformDesc is None:
        return
    desc_arg(transformDesc, TensorTransformDescriptor, "transformDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetTensorTransformDescriptor(transformDesc, nbDims, destFormat, padBeforeA, padAfterA, foldA, direction):
    d = desc_arg(transformDesc, TensorTransformDescriptor, "transformDesc", need_set=False)
    nb = int_arg(nbDims, "nbDims")
    if not 3 <= nb <= 8:
        raise BadParamError(f"nbDims = {nb} outside 3..8")
    fmt = enum_arg(TF, destFormat, "destFormat")
    nsp = nb - 2
    before = int_array(padBeforeA, nb, "padBeforeA") if padBeforeA is not None else (0,) * nb
    after = int_array(padAfterA, nb, "padAfterA") if padAfterA is not None else (0,) * nb
    fold = int_array(foldA, nsp, "foldA") if foldA is not None else (1,) * nsp
    if any(p < 0 for p in before + after):
        raise BadParamError("paddings must be >= 0")
    if any(f < 1 for f in fold):
        raise BadParamError(f"foldA {fold} must be >= 1")
    d.direction = enum_arg(cudnnFoldingDirection_t, direction, "direction")
    d.nb, d.fmt, d.pad_before, d.pad_after, d.fold = nb, fmt, before, after, fold
    d.is_set = True


@c_api(5)
def cudnnGetTensorTransformDescriptor(transformDesc, nbDimsRequested):
    """(status, destFormat, padBeforeA, padAfterA, foldA, direction)."""
    d = desc_arg(transformDesc, TensorTransformDescriptor, "transformDesc")
    k = int_arg(nbDimsRequested, "nbDimsRequested")
    if k != d.nb:
        raise BadParamError(f"nbDimsRequested = {k}, the descriptor has {d.nb} dims")
    return d.fmt, list(d.pad_before), list(d.pad_after), list(d.fold), d.direction


def _check_transform(t, src_dims):
    if len(src_dims) != t.nb:
        raise BadParamError(f"the transform has {t.nb} dims, the source {len(src_dims)}")
    if any(f != 1 for f in t.fold):
        raise CudnnError(f"folding (foldA {t.fold}) is not supported", S.CUDNN_STATUS_NOT_SUPPORTED)
    return tuple(s + a + b for s, a, b in zip(src_dims, t.pad_before, t.pad_after))


@c_api(1)
def cudnnInitTransformDest(transformDesc, srcDesc, destDesc):
    """(status, destSizeInBytes): destDesc becomes the padded source dims in destFormat."""
    t = desc_arg(transformDesc, TensorTransformDescriptor, "transformDesc")
    src = desc_arg(srcDesc, TensorDescriptor, "srcDesc")
    dst = desc_arg(destDesc, TensorDescriptor, "destDesc", need_set=False)
    dims = _check_transform(t, src.dims)
    strides, v = _format_strides(t.fmt, src.dtype, dims)
    dst.set(src.dtype, dims, strides, t.fmt, v)
    return dst.size_in_bytes()


def _transform(h, t, al, be, sd, src, dd, dst, what):
    need_ptr(src, "srcData"), need_ptr(dst, "destData")
    want = _check_transform(t, sd.dims)
    if dd.dims != want:
        raise BadParamError(f"destDesc dims {dd.dims}, the transform of {sd.dims} gives {want}")
    padded = any(t.pad_before) or any(t.pad_after)
    if padded and be != 0.0:
        raise CudnnError("beta != 0 with padding is not supported", S.CUDNN_STATUS_NOT_SUPPORTED)
    interior = dst
    if padded:
        def zero(b):
            s = b.scalar("zero", len(dd.dims), dd.dtype, 0.0)
            s.dims, s.strides = dd.dims, (0,) * len(dd.dims)
            b.pw(L.PM.CUDNN_POINTWISE_IDENTITY, b.raw("dst", dd.dims, dd.strides, dd.dtype), "zero", X=s)

        L.run(h, (what + "_zero", dd.signature()), zero, {"dst": dst})
        offset = sum(p * s for p, s in zip(t.pad_before, dd.strides)) * ITEMSIZE[dd.dtype]
        interior = memory.as_view(dst, dims=(1,), dtype=memory.numpy_dtype(dd.dtype)).ptr + offset

    def build(b):
        b.blend(b.raw("src", sd.dims, sd.strides, sd.dtype), "dst", _Raw(sd.dims, dd.strides, dd.dtype), al, be,
                L.scalar_dtype(dd.dtype))

    key = (what, sd.signature(), dd.signature(), t.pad_before, L.blend_key(al, be))
    L.run(h, key, build, {"src": src, "dst": interior}, {"alpha": al})


class _Raw:
    """A descriptor-like (dims, strides, dtype) for Builder.tensor / blend."""

    def __init__(self, dims, strides, dtype):
        self.dims, self.strides, self.dtype = tuple(dims), tuple(strides), dtype

    def ir(self, uid, name="", dims=None, strides=None):
        return TensorDesc(uid, dims=dims or self.dims, strides=strides or self.strides, dtype=self.dtype, name=name)

    def signature(self):
        return (int(self.dtype), self.dims, self.strides)


@c_api(0)
def cudnnTransformTensorEx(handle, transDesc, alpha, srcDesc, srcData, beta, destDesc, destData):
    h = get_handle_or_raise(handle)
    t = desc_arg(transDesc, TensorTransformDescriptor, "transDesc")
    sd, dd = desc_arg(srcDesc, TensorDescriptor, "srcDesc"), desc_arg(destDesc, TensorDescriptor, "destDesc")
    _transform(h, t, host_scalar(alpha, "alpha"), host_scalar(beta, "beta"), sd, srcData, dd, destData,
               "transform_ex")


@c_api(0)
def cudnnTransformFilter(handle, transDesc, alpha, srcDesc, srcData, beta, destDesc, destData):
    h = get_handle_or_raise(handle)
    t = desc_arg(transDesc, TensorTransformDescriptor, "transDesc")
    sf, df = desc_arg(srcDesc, FilterDescriptor, "srcDesc"), desc_arg(destDesc, FilterDescriptor, "destDesc")
    _transform(h, t, host_scalar(alpha, "alpha"), host_scalar(beta, "beta"), _Raw(sf.dims, sf.strides, sf.dtype),
               srcData, _Raw(df.dims, df.strides, df.dtype), destData, "transform_filter")
