"""Builders and assertions shared by the backend descriptor tests (C-style calls, exact statuses)."""
import ncudnn
from ncudnn import cudnnGetLastErrorString
from ncudnn.backend import (cudnnBackendCreateDescriptor, cudnnBackendFinalize, cudnnBackendGetAttribute,
                            cudnnBackendSetAttribute)
from ncudnn.errors import peek_last_error
from ncudnn.types import cudnnBackendAttributeName_t as A
from ncudnn.types import cudnnBackendAttributeType_t as T
from ncudnn.types import cudnnBackendDescriptorType_t as D
from ncudnn.types import cudnnDataType_t as DT
from ncudnn.types import cudnnStatus_t as S

__all__ = ["A", "T", "D", "DT", "S", "ok", "expect", "create", "set_attr", "get", "make", "tensor", "packed",
           "conv_desc", "conv_op", "pointwise_desc", "pointwise_op", "graph", "handle", "finalize"]

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR


def ok(result):
    """Assert SUCCESS (showing the last error otherwise); return the out-parameters."""
    assert result[0] == S.CUDNN_STATUS_SUCCESS, f"{result[0]!r}: {cudnnGetLastErrorString()}"
    outs = result[1:]
    return outs[0] if len(outs) == 1 else (outs or None)


def expect(result, status, *fragments):
    """Assert exactly ``status`` and a last-error message containing every fragment."""
    msg = peek_last_error()
    assert result[0] == status, f"got {result[0]!r}, expected {status!r}; last error: {msg}"
    for f in fragments:
        f = f.name if hasattr(f, "name") else str(f)
        assert f in msg, f"{f!r} not in last error {msg!r}"
    assert ncudnn.cudnnGetLastErrorString() == msg
    return msg


def create(dtype):
    return ok(cudnnBackendCreateDescriptor(dtype))


def _count(values):
    if isinstance(values, str):
        return len(values) + 1  # CUDNN_TYPE_CHAR: the NUL-terminated length
    return len(values) if isinstance(values, (list, tuple)) else 1


def set_attr(d, name, atype, values):
    return cudnnBackendSetAttribute(d, name, atype, _count(values), values)


def get(d, name, atype, n=16, elements=None):
    """(count, values) of a finalized descriptor's attribute, asserting SUCCESS."""
    return ok(cudnnBackendGetAttribute(d, name, atype, n, elements))


def finalize(d):
    return cudnnBackendFinalize(d)


def make(dtype, attrs, fin=True):
    """A descriptor with ``attrs`` {name: (type, values)} set (and finalized, asserting SUCCESS)."""
    d = create(dtype)
    for name, (atype, values) in attrs.items():
        ok(set_attr(d, name, atype, values))
    if fin:
        ok(finalize(d))
    return d


def packed(dims):
    strides, s = [0] * len(dims), 1
    for i in range(len(dims) - 1, -1, -1):
        strides[i] = s
        s *= dims[i]
    return strides


def tensor(uid, dims, strides=None, dtype=DT.CUDNN_DATA_FLOAT, virtual=False, by_value=False, alignment=16,
           fin=True):
    attrs = {
        A.CUDNN_ATTR_TENSOR_UNIQUE_ID: (T.CUDNN_TYPE_INT64, uid),
        A.CUDNN_ATTR_TENSOR_DATA_TYPE: (T.CUDNN_TYPE_DATA_TYPE, dtype),
        A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: (T.CUDNN_TYPE_INT64, alignment),
        A.CUDNN_ATTR_TENSOR_DIMENSIONS: (T.CUDNN_TYPE_INT64, list(dims)),
        A.CUDNN_ATTR_TENSOR_STRIDES: (T.CUDNN_TYPE_INT64, list(strides or packed(dims))),
    }
    if virtual:
        attrs[A.CUDNN_ATTR_TENSOR_IS_VIRTUAL] = (T.CUDNN_TYPE_BOOLEAN, True)
    if by_value:
        attrs[A.CUDNN_ATTR_TENSOR_IS_BY_VALUE] = (T.CUDNN_TYPE_BOOLEAN, True)
    return make(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR, attrs, fin)


def conv_desc(nb, pre=None, post=None, stride=None, dilation=None, mode=None, fin=True):
    mode = ncudnn.CUDNN_CROSS_CORRELATION if mode is None else mode
    return make(D.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, {
        A.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: (T.CUDNN_TYPE_INT64, nb),
        A.CUDNN_ATTR_CONVOLUTION_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT),
        A.CUDNN_ATTR_CONVOLUTION_CONV_MODE: (T.CUDNN_TYPE_CONVOLUTION_MODE, mode),
        A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: (T.CUDNN_TYPE_INT64, pre or [0] * nb),
        A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: (T.CUDNN_TYPE_INT64, post or [0] * nb),
        A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: (T.CUDNN_TYPE_INT64, stride or [1] * nb),
        A.CUDNN_ATTR_CONVOLUTION_DILATIONS: (T.CUDNN_TYPE_INT64, dilation or [1] * nb),
    }, fin)


_CONV_PREFIX = {
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: ("FORWARD", "X", "W", "Y"),
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR: ("BWD_DATA", "DX", "W", "DY"),
    D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: ("BWD_FILTER", "X", "DW", "DY"),
}


def conv_op(kind, x, w, y, conv, alpha=1.0, beta=0.0, fin=True):
    """A convolution operation; x, w, y are the x-like, w-like and y-like tensors of ``kind``."""
    prefix, xn, wn, yn = _CONV_PREFIX[kind]
    p = f"CUDNN_ATTR_OPERATION_CONVOLUTION_{prefix}_"
    return make(kind, {
        A[p + xn]: (DESC, x), A[p + wn]: (DESC, w), A[p + yn]: (DESC, y), A[p + "CONV_DESC"]: (DESC, conv),
        A[p + "ALPHA"]: (T.CUDNN_TYPE_FLOAT, alpha), A[p + "BETA"]: (T.CUDNN_TYPE_FLOAT, beta)}, fin)


def pointwise_desc(mode, prec=DT.CUDNN_DATA_FLOAT, extra=None):
    attrs = {A.CUDNN_ATTR_POINTWISE_MODE: (T.CUDNN_TYPE_POINTWISE_MODE, mode),
             A.CUDNN_ATTR_POINTWISE_MATH_PREC: (T.CUDNN_TYPE_DATA_TYPE, prec)}
    attrs.update(extra or {})
    return make(D.CUDNN_BACKEND_POINTWISE_DESCRIPTOR, attrs)


def pointwise_op(pw, fin=True, **tensors):
    """tensors: x, b, t, y, dx, dy (attribute suffix XDESC ...)."""
    attrs = {A.CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: (DESC, pw)}
    for k, v in tensors.items():
        attrs[A[f"CUDNN_ATTR_OPERATION_POINTWISE_{k.upper()}DESC"]] = (DESC, v)
    return make(D.CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, attrs, fin)


_HANDLE = []


def handle():
    if not _HANDLE:
        from ncudnn.handle import cudnnCreate
        _HANDLE.append(ok(cudnnCreate()))
    return _HANDLE[0]


def graph(ops, fin=True):
    return make(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATIONGRAPH_OPS: (DESC, list(ops)),
        A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE: (T.CUDNN_TYPE_HANDLE, handle())}, fin)
