"""The rest of cudnn_ops.h / cudnn_cnn.h: descriptors that hold what they are given, and calls that
have no lowering yet and say so with NOT_SUPPORTED and the reason (never a silent no-op).

* spatial transformer: descriptor create / set / destroy; grid generator and sampler NOT_SUPPORTED
  (no IR node for them; reference/spatial_tf.py has the oracle).
* fused ops (the v7 cudnnFusedOps* API): const / variant param packs store attributes by label;
  plans are created and destroyed; cudnnMakeFusedOpsPlan and cudnnFusedOpsExecute are NOT_SUPPORTED
  (the graph API covers these fusions).
* cudnnIm2Col, cudnnReorderFilterAndBias (only CUDNN_NO_REORDER, a copy, is meaningful without int8x32
  engines), cudnnGetFoldedConvBackwardDataDescriptors: NOT_SUPPORTED.
"""
from ..errors import BadParamError, CudnnError, c_api
from ..handle import get_handle_or_raise
from ..types import (cudnnDataType_t, cudnnFusedOpsConstParamLabel_t, cudnnFusedOps_t,
                     cudnnFusedOpsVariantParamLabel_t, cudnnSamplerType_t, cudnnStatus_t)
from ._util import Descriptor, desc_arg, enum_arg, int_arg, int_array

S = cudnnStatus_t


def _ns(what):
    return CudnnError(what, S.CUDNN_STATUS_NOT_SUPPORTED)


# ------------------------------------------------------------------------ spatial transformer

class SpatialTransformerDescriptor(Descriptor):
    KIND = "SpatialTransformer"


@c_api(1)
def cudnnCreateSpatialTransformerDescriptor():
    return SpatialTransformerDescriptor()


@c_api(0)
def cudnnDestroySpatialTransformerDescriptor(stDesc):
    if stDesc is not None:
        desc_arg(stDesc, SpatialTransformerDescriptor, "stDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetSpatialTransformerNdDescriptor(stDesc, samplerType, dataType, nbDims, dimA):
    d = desc_arg(stDesc, SpatialTransformerDescriptor, "stDesc", need_set=False)
    d.sampler = enum_arg(cudnnSamplerType_t, samplerType, "samplerType")
    d.dtype = enum_arg(cudnnDataType_t, dataType, "dataType")
    nb = int_arg(nbDims, "nbDims")
    if nb != 4:
        raise _ns(f"nbDims = {nb}: only 4-d spatial transformers exist")
    d.dims = int_array(dimA, nb, "dimA")
    if any(v < 1 for v in d.dims):
        raise BadParamError(f"dimA {d.dims} must be >= 1")
    d.is_set = True


def _st(handle, stDesc, name):
    get_handle_or_raise(handle)
    desc_arg(stDesc, SpatialTransformerDescriptor, "stDesc")
    return _ns(f"{name}: the spatial transformer has no IR lowering yet")


@c_api(0)
def cudnnSpatialTfGridGeneratorForward(handle, stDesc, theta, grid):
    raise _st(handle, stDesc, "cudnnSpatialTfGridGeneratorForward")


@c_api(0)
def cudnnSpatialTfGridGeneratorBackward(handle, stDesc, dgrid, dtheta):
    raise _st(handle, stDesc, "cudnnSpatialTfGridGeneratorBackward")


@c_api(0)
def cudnnSpatialTfSamplerForward(handle, stDesc, alpha, xDesc, x, grid, beta, yDesc, y):
    raise _st(handle, stDesc, "cudnnSpatialTfSamplerForward")


@c_api(0)
def cudnnSpatialTfSamplerBackward(handle, stDesc, alpha, xDesc, x, beta, dxDesc, dx, alphaDgrid, dyDesc, dy, grid,
                                  betaDgrid, dgrid):
    raise _st(handle, stDesc, "cudnnSpatialTfSamplerBackward")


# -------------------------------------------------------------------------------- fused ops

class _Pack(Descriptor):
    LABELS = None

    def __init__(self, ops):
        super().__init__()
        self.ops = enum_arg(cudnnFusedOps_t, ops, "ops")
        self.attrs = {}
        self.is_set = True


class FusedOpsConstParamPack(_Pack):
    KIND = "FusedOpsConstParamPack"
    LABELS = cudnnFusedOpsConstParamLabel_t


class FusedOpsVariantParamPack(_Pack):
    KIND = "FusedOpsVariantParamPack"
    LABELS = cudnnFusedOpsVariantParamLabel_t


class FusedOpsPlan(_Pack):
    KIND = "FusedOpsPlan"


@c_api(1)
def cudnnCreateFusedOpsConstParamPack(ops):
    return FusedOpsConstParamPack(ops)


@c_api(1)
def cudnnCreateFusedOpsVariantParamPack(ops):
    return FusedOpsVariantParamPack(ops)


@c_api(1)
def cudnnCreateFusedOpsPlan(ops):
    return FusedOpsPlan(ops)


def _destroy(obj, cls, name):
    if obj is not None:
        desc_arg(obj, cls, name, need_set=False).destroyed = True


@c_api(0)
def cudnnDestroyFusedOpsConstParamPack(constPack):
    _destroy(constPack, FusedOpsConstParamPack, "constPack")


@c_api(0)
def cudnnDestroyFusedOpsVariantParamPack(varPack):
    _destroy(varPack, FusedOpsVariantParamPack, "varPack")


@c_api(0)
def cudnnDestroyFusedOpsPlan(plan):
    _destroy(plan, FusedOpsPlan, "plan")


@c_api(0)
def cudnnSetFusedOpsConstParamPackAttribute(constPack, paramLabel, param):
    p = desc_arg(constPack, FusedOpsConstParamPack, "constPack")
    p.attrs[enum_arg(p.LABELS, paramLabel, "paramLabel")] = param


@c_api(2)
def cudnnGetFusedOpsConstParamPackAttribute(constPack, paramLabel):
    """(status, param, isNULL)."""
    p = desc_arg(constPack, FusedOpsConstParamPack, "constPack")
    label = enum_arg(p.LABELS, paramLabel, "paramLabel")
    v = p.attrs.get(label)
    return v, int(v is None)


@c_api(0)
def cudnnSetFusedOpsVariantParamPackAttribute(varPack, paramLabel, ptr):
    p = desc_arg(varPack, FusedOpsVariantParamPack, "varPack")
    p.attrs[enum_arg(p.LABELS, paramLabel, "paramLabel")] = ptr


@c_api(1)
def cudnnGetFusedOpsVariantParamPackAttribute(varPack, paramLabel):
    p = desc_arg(varPack, FusedOpsVariantParamPack, "varPack")
    return p.attrs.get(enum_arg(p.LABELS, paramLabel, "paramLabel"))


@c_api(1)
def cudnnMakeFusedOpsPlan(handle, plan, constPack):
    get_handle_or_raise(handle)
    pl = desc_arg(plan, FusedOpsPlan, "plan")
    desc_arg(constPack, FusedOpsConstParamPack, "constPack")
    raise _ns(f"{pl.ops.name}: the v7 fused-ops API is not lowered; build the fusion with the graph API")


@c_api(0)
def cudnnFusedOpsExecute(handle, plan, varPack):
    get_handle_or_raise(handle)
    desc_arg(plan, FusedOpsPlan, "plan")
    raise _ns("cudnnFusedOpsExecute: no fused-ops plan can be made (cudnnMakeFusedOpsPlan is NOT_SUPPORTED)")


# ------------------------------------------------------------------------------ conv extras

@c_api(0)
def cudnnIm2Col(handle, xDesc, x, wDesc, convDesc, colBuffer):
    get_handle_or_raise(handle)
    raise _ns("cudnnIm2Col: no IR node materializes the im2col matrix")


@c_api(0)
def cudnnReorderFilterAndBias(handle, filterDesc, reorderType, filterData, reorderedFilterData, reorderBias,
                              biasData, reorderedBiasData):
    get_handle_or_raise(handle)
    raise _ns("cudnnReorderFilterAndBias: the INT8x32 reordering exists for engines ncudnn does not have")


@c_api(0)
def cudnnGetFoldedConvBackwardDataDescriptors(handle, filterDesc, diffDesc, convDesc, gradDesc, transformFormat,
                                              foldedFilterDesc, paddedDiffDesc, foldedConvDesc, foldedGradDesc,
                                              filterFoldTransDesc, diffPadTransDesc, gradFoldTransDesc,
                                              gradUnfoldTransDesc):
    get_handle_or_raise(handle)
    raise _ns("cudnnGetFoldedConvBackwardDataDescriptors: folding transforms are not supported")
