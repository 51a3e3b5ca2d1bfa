"""cudnnReduceTensor (+ cudnnGetReductionIndicesSize / WorkspaceSize), lowered to a Reduction node.

C = alpha * reduce(A) + beta * C over every dim where C's size is 1 and A's is not. Ops: ADD, MUL,
MIN, MAX, AMAX, AVG, NORM1, NORM2, MUL_NO_ZEROS (reference/reduction.py defines them).

FLATTENED_INDICES (MIN, MAX, AMAX; 32-bit indices only, as cuDNN): the row-major position of the
first extremal element inside each reduced sub-tensor, computed on the graph as
    key = (v == r) ? flat_index : BIG,  indices = MIN-reduce(key)
with v = A (|A| for AMAX), r the reduced value broadcast back, flat_index built from GEN_INDEX
per reduced axis. The reduced value is materialized once and feeds both C and the indices.
"""
import math

from ..errors import BadParamError, CudnnError, c_api
from ..handle import get_handle_or_raise
from ..ir import Reduction
from ..ir.tensor import packed_strides
from ..types import (cudnnDataType_t, cudnnIndicesType_t, cudnnPointwiseMode_t, cudnnReduceTensorIndices_t,
                     cudnnReduceTensorOp_t, cudnnStatus_t)
from . import lower as L
from ._util import desc_arg, host_scalar, need_ptr, optional_ptrs, size_arg
from .op_desc import ReduceTensorDescriptor
from .tensor_desc import TensorDescriptor

S = cudnnStatus_t
RO = cudnnReduceTensorOp_t
PM = cudnnPointwiseMode_t
F32 = cudnnDataType_t.CUDNN_DATA_FLOAT
_ARG = (RO.CUDNN_REDUCE_TENSOR_MIN, RO.CUDNN_REDUCE_TENSOR_MAX, RO.CUDNN_REDUCE_TENSOR_AMAX)


def _check(rd, ad, cd):
    if ad.nbDims != cd.nbDims:
        raise BadParamError(f"aDesc has {ad.nbDims} dims, cDesc {cd.nbDims}")
    for i, (a, c) in enumerate(zip(ad.dims, cd.dims)):
        if c not in (1, a):
            raise BadParamError(f"cDesc dim {i} is {c}: must be 1 (reduced) or aDesc's {a}")


def _wants_indices(rd):
    if rd.indices != cudnnReduceTensorIndices_t.CUDNN_REDUCE_TENSOR_FLATTENED_INDICES:
        return False
    if rd.op not in _ARG:
        return False  # cuDNN ignores the indices request for ops without an argument
    if rd.indices_type != cudnnIndicesType_t.CUDNN_32BIT_INDICES:
        raise CudnnError(f"{rd.indices_type.name}: only 32-bit indices are supported", S.CUDNN_STATUS_NOT_SUPPORTED)
    return True


@c_api(1)
def cudnnGetReductionIndicesSize(handle, reduceTensorDesc, aDesc, cDesc):
    get_handle_or_raise(handle)
    rd = desc_arg(reduceTensorDesc, ReduceTensorDescriptor, "reduceTensorDesc")
    ad, cd = desc_arg(aDesc, TensorDescriptor, "aDesc"), desc_arg(cDesc, TensorDescriptor, "cDesc")
    _check(rd, ad, cd)
    return 4 * math.prod(cd.dims) if _wants_indices(rd) else 0


@c_api(1)
def cudnnGetReductionWorkspaceSize(handle, reduceTensorDesc, aDesc, cDesc):
    """(status, 0): intermediates live in the handle's pool."""
    get_handle_or_raise(handle)
    rd = desc_arg(reduceTensorDesc, ReduceTensorDescriptor, "reduceTensorDesc")
    ad, cd = desc_arg(aDesc, TensorDescriptor, "aDesc"), desc_arg(cDesc, TensorDescriptor, "cDesc")
    _check(rd, ad, cd)
    return 0


def _indices(b, rd, ad, cd, at, red):
    """Nodes computing the flattened argument indices into external tensor "indices"."""
    n = ad.nbDims
    axes = [i for i in range(n) if cd.dims[i] == 1 and ad.dims[i] != 1]
    v = at
    if rd.op == RO.CUDNN_REDUCE_TENSOR_AMAX:
        v = b.virtual("|a|", dtype=F32)
        b.pw(PM.CUDNN_POINTWISE_ABS, v, "abs", X=at)
    eq = b.virtual("is_extremum", dtype=cudnnDataType_t.CUDNN_DATA_BOOLEAN)
    b.pw(PM.CUDNN_POINTWISE_CMP_EQ, eq, "is_extremum", X=v, B=red)
    flat = None
    for k, ax in enumerate(axes):
        weight = math.prod(ad.dims[a] for a in axes[k + 1:])
        gi = b.virtual(f"index{ax}", dtype=F32)
        b.pw(PM.CUDNN_POINTWISE_GEN_INDEX, gi, f"gen_index{ax}", X=at, axis=ax)
        if weight != 1:
            w = b.virtual(f"index{ax}*{weight}", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_MUL, w, f"weigh{ax}", X=gi, B=b.scalar(f"w{ax}", n, F32, float(weight)))
            gi = w
        if flat is not None:
            s = b.virtual(f"flat{ax}", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_ADD, s, f"flat{ax}", X=flat, B=gi)
            gi = s
        flat = gi
    big = b.scalar("big", n, F32, float(math.prod(ad.dims)))
    key = b.virtual("key", dtype=F32)
    b.pw(PM.CUDNN_POINTWISE_BINARY_SELECT, key, "select", X=flat, B=big, T=eq)
    idx = b.virtual("index", dims=cd.dims, dtype=F32)
    b.add(Reduction("argument", {"X": key}, {"Y": idx}, mode=RO.CUDNN_REDUCE_TENSOR_MIN))
    out = b.raw("indices", cd.dims, packed_strides(cd.dims), cudnnDataType_t.CUDNN_DATA_INT32)
    b.pw(PM.CUDNN_POINTWISE_IDENTITY, out, "store_index", X=idx)


@c_api(0)
def cudnnReduceTensor(handle, reduceTensorDesc, indices, indicesSizeInBytes, workspace, workspaceSizeInBytes,
                      alpha, aDesc, A, beta, cDesc, C):
    h = get_handle_or_raise(handle)
    rd = desc_arg(reduceTensorDesc, ReduceTensorDescriptor, "reduceTensorDesc")
    ad, cd = desc_arg(aDesc, TensorDescriptor, "aDesc"), desc_arg(cDesc, TensorDescriptor, "cDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(A, "A"), need_ptr(C, "C")
    optional_ptrs(workspace=workspace)
    size_arg(workspaceSizeInBytes, "workspaceSizeInBytes")
    _check(rd, ad, cd)
    want_idx = _wants_indices(rd)
    if want_idx:
        need_ptr(indices, "indices")
        if size_arg(indicesSizeInBytes, "indicesSizeInBytes") < 4 * math.prod(cd.dims):
            raise BadParamError(f"indicesSizeInBytes = {indicesSizeInBytes}, {4 * math.prod(cd.dims)} needed",
                                S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    else:
        optional_ptrs(indices=indices)
        size_arg(indicesSizeInBytes, "indicesSizeInBytes")
    sdt = L.scalar_dtype(cd.dtype)

    def build(b):
        at = b.tensor("a", ad)
        if L.needs_blend(al, be) or want_idx:
            red = b.virtual("reduced", dims=cd.dims, dtype=F32)
            b.blend(red, "c", cd, al, be, sdt)
        else:
            red = b.tensor("c", cd)
        b.add(Reduction("reduce", {"X": at}, {"Y": red}, mode=rd.op, math_precision=rd.comp_type))
        if want_idx:
            _indices(b, rd, ad, cd, at, red)

    key = ("reduce", int(rd.op), int(rd.comp_type), want_idx, ad.signature(), cd.signature(), L.blend_key(al, be))
    bind = {"a": A, "c": C}
    if want_idx:
        bind["indices"] = indices
    L.run(h, key, build, bind, {"alpha": al})
