"""The cudnnNormalization* calls (cudnn_ops.h): the batch-norm calls with a norm mode, norm ops and a
group count. PER_CHANNEL is SPATIAL batch norm, PER_ACTIVATION is PER_ACTIVATION; norm ops map to the
batch-norm ops of the same value; both algorithms run the same graphs. groupCnt must be 1 (cuDNN's
own restriction for these calls): anything else is NOT_SUPPORTED.
"""
from ..errors import BadParamError, CudnnError, c_api
from ..handle import get_handle_or_raise
from ..types import cudnnBatchNormOps_t, cudnnNormAlgo_t, cudnnNormMode_t, cudnnNormOps_t, cudnnStatus_t
from . import batchnorm as BN
from ._util import desc_arg, enum_arg, int_arg, optional_descs, plausible
from .tensor_desc import TensorDescriptor

S = cudnnStatus_t
_TRAIN_PTRS = ("normScale", "normBias", "resultRunningMean", "resultRunningVariance", "resultSaveMean",
               "resultSaveInvVariance", "workspace", "reserveSpace")
_BWD_PTRS = ("normScaleData", "normBiasData", "dNormScaleData", "dNormBiasData", "savedMean", "savedInvVariance",
             "workSpace", "reserveSpace")


def _args(mode, normOps, algo, groupCnt):
    m = enum_arg(cudnnNormMode_t, mode, "mode")
    ops = cudnnBatchNormOps_t(int(enum_arg(cudnnNormOps_t, normOps, "normOps")))
    enum_arg(cudnnNormAlgo_t, algo, "algo")
    g = int_arg(groupCnt, "groupCnt")
    if g != 1:
        raise CudnnError(f"groupCnt = {g}: only 1 is supported", S.CUDNN_STATUS_NOT_SUPPORTED)
    return int(m), ops


def _same(a, b, an, bn):
    da = desc_arg(a, TensorDescriptor, an)
    db = desc_arg(b, TensorDescriptor, bn)
    if da.dims != db.dims:
        raise BadParamError(f"{an} dims {da.dims} differ from {bn} dims {db.dims}")


@c_api(0)
def cudnnDeriveNormTensorDescriptor(derivedNormScaleBiasDesc, derivedNormMeanVarDesc, xDesc, mode, groupCnt):
    m, _ = _args(mode, 0, 0, groupCnt)
    for d in (derivedNormScaleBiasDesc, derivedNormMeanVarDesc):
        st = BN.cudnnDeriveBNTensorDescriptor(d, xDesc, m)[0]
        if st != S.CUDNN_STATUS_SUCCESS:
            raise CudnnError("deriving the statistics descriptor failed", st)


@c_api(0)
def cudnnNormalizationForwardInference(handle, mode, normOps, algo, alpha, beta, xDesc, x, normScaleBiasDesc,
                                       normScale, normBias, normMeanVarDesc, estimatedMean, estimatedVariance, zDesc,
                                       z, activationDesc, yDesc, y, epsilon, groupCnt):
    m, ops = _args(mode, normOps, algo, groupCnt)
    _same(normScaleBiasDesc, normMeanVarDesc, "normScaleBiasDesc", "normMeanVarDesc")
    plausible(locals(), ptrs=("x", "normScale", "normBias", "estimatedMean", "estimatedVariance", "z", "y"))
    BN.inference(handle, m, ops, alpha, beta, xDesc, x, zDesc, z, yDesc, y, normScaleBiasDesc, normScale, normBias,
                 estimatedMean, estimatedVariance, epsilon, activationDesc)


@c_api(0)
def cudnnNormalizationForwardTraining(handle, mode, normOps, algo, alpha, beta, xDesc, xData, normScaleBiasDesc,
                                      normScale, normBias, exponentialAverageFactor, normMeanVarDesc,
                                      resultRunningMean, resultRunningVariance, epsilon, resultSaveMean,
                                      resultSaveInvVariance, activationDesc, zDesc, zData, yDesc, yData, workspace,
                                      workSpaceSizeInBytes, reserveSpace, reserveSpaceSizeInBytes, groupCnt):
    m, ops = _args(mode, normOps, algo, groupCnt)
    _same(normScaleBiasDesc, normMeanVarDesc, "normScaleBiasDesc", "normMeanVarDesc")
    plausible(locals(), ptrs=_TRAIN_PTRS, sizes=("workSpaceSizeInBytes", "reserveSpaceSizeInBytes"))
    BN.training(handle, m, ops, alpha, beta, xDesc, xData, zDesc, zData, yDesc, yData, normScaleBiasDesc, normScale,
                normBias, exponentialAverageFactor, resultRunningMean, resultRunningVariance, epsilon, resultSaveMean,
                resultSaveInvVariance, activationDesc)


@c_api(0)
def cudnnNormalizationBackward(handle, mode, normOps, algo, alphaDataDiff, betaDataDiff, alphaParamDiff,
                               betaParamDiff, xDesc, xData, yDesc, yData, dyDesc, dyData, dzDesc, dzData, dxDesc,
                               dxData, dNormScaleBiasDesc, normScaleData, normBiasData, dNormScaleData, dNormBiasData,
                               epsilon, normMeanVarDesc, savedMean, savedInvVariance, activationDesc, workSpace,
                               workSpaceSizeInBytes, reserveSpace, reserveSpaceSizeInBytes, groupCnt):
    m, ops = _args(mode, normOps, algo, groupCnt)
    _same(dNormScaleBiasDesc, normMeanVarDesc, "dNormScaleBiasDesc", "normMeanVarDesc")
    plausible(locals(), ptrs=_BWD_PTRS, sizes=("workSpaceSizeInBytes", "reserveSpaceSizeInBytes"))
    BN.backward(handle, m, ops, alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff, xDesc, xData, yDesc,
                yData, dyDesc, dyData, dzDesc, dzData, dxDesc, dxData, dNormScaleBiasDesc, normScaleData,
                normBiasData, dNormScaleData, dNormBiasData, epsilon, savedMean, savedInvVariance, activationDesc)


def _size(handle, mode, normOps, algo, groupCnt):
    get_handle_or_raise(handle)
    _args(mode, normOps, algo, groupCnt)
    return 0


@c_api(1)
def cudnnGetNormalizationForwardTrainingWorkspaceSize(handle, mode, normOps, algo, xDesc, zDesc, yDesc,
                                                      normScaleBiasDesc, activationDesc, normMeanVarDesc, groupCnt):
    """(status, 0): intermediates come from the handle's pool."""
    optional_descs(xDesc=xDesc, zDesc=zDesc, yDesc=yDesc, normScaleBiasDesc=normScaleBiasDesc,
                   activationDesc=activationDesc, normMeanVarDesc=normMeanVarDesc)
    return _size(handle, mode, normOps, algo, groupCnt)


@c_api(1)
def cudnnGetNormalizationBackwardWorkspaceSize(handle, mode, normOps, algo, xDesc, yDesc, dyDesc, dzDesc, dxDesc,
                                               dNormScaleBiasDesc, activationDesc, normMeanVarDesc, groupCnt):
    optional_descs(xDesc=xDesc, yDesc=yDesc, dyDesc=dyDesc, dzDesc=dzDesc, dxDesc=dxDesc,
                   dNormScaleBiasDesc=dNormScaleBiasDesc, activationDesc=activationDesc,
                   normMeanVarDesc=normMeanVarDesc)
    return _size(handle, mode, normOps, algo, groupCnt)


@c_api(1)
def cudnnGetNormalizationTrainingReserveSpaceSize(handle, mode, normOps, algo, activationDesc, xDesc, groupCnt):
    optional_descs(activationDesc=activationDesc, xDesc=xDesc)
    return _size(handle, mode, normOps, algo, groupCnt)
