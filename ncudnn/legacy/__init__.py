"""The legacy (v7-style) cuDNN API of cudnn_ops.h and cudnn_cnn.h, and the multi-head attention and CTC loss of
cudnn_adv.h (mha_desc.py, mha.py, mha_bwd.py; ctc.py), C-style: ``(status, *outs)``.

Descriptors are Python objects (create / set / get / destroy); data arguments are device buffers
(numba / CuPy / torch arrays, DLPack, or raw pointers sized by the descriptor); alpha / beta are host
scalars. Every call lowers onto the op-graph IR and runs through ncudnn.engines.api (lower.py).
"""
from .tensor_desc import (  # noqa: F401
    cudnnCreateFilterDescriptor, cudnnCreateTensorDescriptor, cudnnDestroyFilterDescriptor,
    cudnnDestroyTensorDescriptor, cudnnGetFilter4dDescriptor, cudnnGetFilterNdDescriptor, cudnnGetFilterSizeInBytes,
    cudnnGetTensor4dDescriptor, cudnnGetTensorNdDescriptor, cudnnGetTensorSizeInBytes, cudnnSetFilter4dDescriptor,
    cudnnSetFilterNdDescriptor, cudnnSetTensor4dDescriptor, cudnnSetTensor4dDescriptorEx, cudnnSetTensorNdDescriptor,
    cudnnSetTensorNdDescriptorEx)
from .conv_desc import (  # noqa: F401
    cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor, cudnnGetConvolution2dDescriptor,
    cudnnGetConvolution2dForwardOutputDim, cudnnGetConvolutionGroupCount, cudnnGetConvolutionMathType,
    cudnnGetConvolutionNdDescriptor, cudnnGetConvolutionNdForwardOutputDim, cudnnGetConvolutionReorderType,
    cudnnSetConvolution2dDescriptor, cudnnSetConvolutionGroupCount, cudnnSetConvolutionMathType,
    cudnnSetConvolutionNdDescriptor, cudnnSetConvolutionReorderType)
from .op_desc import (  # noqa: F401
    cudnnCreateActivationDescriptor, cudnnCreateLRNDescriptor, cudnnCreateOpTensorDescriptor,
    cudnnCreatePoolingDescriptor, cudnnCreateReduceTensorDescriptor, cudnnDestroyActivationDescriptor,
    cudnnDestroyLRNDescriptor, cudnnDestroyOpTensorDescriptor, cudnnDestroyPoolingDescriptor,
    cudnnDestroyReduceTensorDescriptor, cudnnGetActivationDescriptor, cudnnGetActivationDescriptorSwishBeta,
    cudnnGetLRNDescriptor, cudnnGetOpTensorDescriptor, cudnnGetPooling2dDescriptor, cudnnGetPooling2dForwardOutputDim,
    cudnnGetPoolingNdDescriptor, cudnnGetPoolingNdForwardOutputDim, cudnnGetReduceTensorDescriptor,
    cudnnSetActivationDescriptor, cudnnSetActivationDescriptorSwishBeta, cudnnSetLRNDescriptor,
    cudnnSetOpTensorDescriptor, cudnnSetPooling2dDescriptor, cudnnSetPoolingNdDescriptor,
    cudnnSetReduceTensorDescriptor)
from .dropout import (  # noqa: F401
    cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor, cudnnDropoutBackward, cudnnDropoutForward,
    cudnnDropoutGetReserveSpaceSize, cudnnDropoutGetStatesSize, cudnnGetDropoutDescriptor,
    cudnnRestoreDropoutDescriptor, cudnnSetDropoutDescriptor)
from .activation import cudnnActivationBackward, cudnnActivationForward  # noqa: F401
from .lrn import (  # noqa: F401
    cudnnDivisiveNormalizationBackward, cudnnDivisiveNormalizationForward, cudnnLRNCrossChannelBackward,
    cudnnLRNCrossChannelForward)
from .pooling import cudnnPoolingBackward, cudnnPoolingForward  # noqa: F401
from .softmax import cudnnSoftmaxBackward, cudnnSoftmaxForward  # noqa: F401
from .tensor_ops import (  # noqa: F401
    cudnnAddTensor, cudnnOpTensor, cudnnScaleTensor, cudnnSetTensor, cudnnTransformTensor)
from .reduce import cudnnGetReductionIndicesSize, cudnnGetReductionWorkspaceSize, cudnnReduceTensor  # noqa: F401
from .batchnorm import (  # noqa: F401
    cudnnBatchNormalizationBackward, cudnnBatchNormalizationBackwardEx, cudnnBatchNormalizationForwardInference,
    cudnnBatchNormalizationForwardTraining, cudnnBatchNormalizationForwardTrainingEx, cudnnDeriveBNTensorDescriptor,
    cudnnGetBatchNormalizationBackwardExWorkspaceSize, cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize,
    cudnnGetBatchNormalizationTrainingExReserveSpaceSize)
from .normalization import (  # noqa: F401
    cudnnDeriveNormTensorDescriptor, cudnnGetNormalizationBackwardWorkspaceSize,
    cudnnGetNormalizationForwardTrainingWorkspaceSize, cudnnGetNormalizationTrainingReserveSpaceSize,
    cudnnNormalizationBackward, cudnnNormalizationForwardInference, cudnnNormalizationForwardTraining)
from .conv import (  # noqa: F401
    cudnnConvolutionBackwardBias, cudnnConvolutionBackwardData, cudnnConvolutionBackwardFilter,
    cudnnConvolutionBiasActivationForward, cudnnConvolutionForward)
from .conv_algo import (  # noqa: F401
    cudnnFindConvolutionBackwardDataAlgorithm, cudnnFindConvolutionBackwardDataAlgorithmEx,
    cudnnFindConvolutionBackwardFilterAlgorithm, cudnnFindConvolutionBackwardFilterAlgorithmEx,
    cudnnFindConvolutionForwardAlgorithm, cudnnFindConvolutionForwardAlgorithmEx,
    cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
    cudnnGetConvolutionBackwardDataWorkspaceSize, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
    cudnnGetConvolutionBackwardFilterAlgorithmMaxCount, cudnnGetConvolutionBackwardFilterWorkspaceSize,
    cudnnGetConvolutionForwardAlgorithm_v7, cudnnGetConvolutionForwardAlgorithmMaxCount,
    cudnnGetConvolutionForwardWorkspaceSize)
from .transform import (  # noqa: F401
    cudnnCreateTensorTransformDescriptor, cudnnDestroyTensorTransformDescriptor, cudnnGetTensorTransformDescriptor,
    cudnnInitTransformDest, cudnnSetTensorTransformDescriptor, cudnnTransformFilter, cudnnTransformTensorEx)
from .unsupported import (  # noqa: F401
    cudnnCreateFusedOpsConstParamPack, cudnnCreateFusedOpsPlan, cudnnCreateFusedOpsVariantParamPack,
    cudnnCreateSpatialTransformerDescriptor, cudnnDestroyFusedOpsConstParamPack, cudnnDestroyFusedOpsPlan,
    cudnnDestroyFusedOpsVariantParamPack, cudnnDestroySpatialTransformerDescriptor, cudnnFusedOpsExecute,
    cudnnGetFoldedConvBackwardDataDescriptors, cudnnGetFusedOpsConstParamPackAttribute,
    cudnnGetFusedOpsVariantParamPackAttribute, cudnnIm2Col, cudnnMakeFusedOpsPlan, cudnnReorderFilterAndBias,
    cudnnSetFusedOpsConstParamPackAttribute, cudnnSetFusedOpsVariantParamPackAttribute,
    cudnnSetSpatialTransformerNdDescriptor, cudnnSpatialTfGridGeneratorBackward, cudnnSpatialTfGridGeneratorForward,
    cudnnSpatialTfSamplerBackward, cudnnSpatialTfSamplerForward)
from .mha_desc import (  # noqa: F401
    cudnnCreateAttnDescriptor, cudnnCreateSeqDataDescriptor, cudnnDestroyAttnDescriptor,
    cudnnDestroySeqDataDescriptor, cudnnGetAttnDescriptor, cudnnGetMultiHeadAttnBuffers, cudnnGetMultiHeadAttnWeights,
    cudnnGetSeqDataDescriptor, cudnnSetAttnDescriptor, cudnnSetSeqDataDescriptor)
from .mha import cudnnMultiHeadAttnForward  # noqa: F401
from .mha_bwd import cudnnMultiHeadAttnBackwardData, cudnnMultiHeadAttnBackwardWeights  # noqa: F401
from .ctc import (  # noqa: F401
    cudnnCreateCTCLossDescriptor, cudnnCTCLoss, cudnnCTCLoss_v8, cudnnDestroyCTCLossDescriptor,
    cudnnGetCTCLossDescriptor, cudnnGetCTCLossDescriptor_v8, cudnnGetCTCLossDescriptor_v9, cudnnGetCTCLossDescriptorEx,
    cudnnGetCTCLossWorkspaceSize, cudnnGetCTCLossWorkspaceSize_v8, cudnnSetCTCLossDescriptor,
    cudnnSetCTCLossDescriptor_v8, cudnnSetCTCLossDescriptor_v9, cudnnSetCTCLossDescriptorEx)
from .algos import (  # noqa: F401
    cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionFwdAlgoPerf_t)

__all__ = [n for n in dir() if n.startswith("cudnn")]
