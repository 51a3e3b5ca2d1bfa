"""Batch normalization (cudnn_ops.h): cudnnDeriveBNTensorDescriptor, forward training / inference,
backward, and the Ex variants (ops BN and BN_ACTIVATION; BN_ADD_ACTIVATION: z is added before the
activation).

* Training lowers to NormFwd(BATCH_NORM, TRAINING): saved mean / inverse std and (when given) the
  running statistics, updated in place with exponentialAverageFactor (the running variance takes
  the unbiased batch variance, as cuDNN). Saved outputs left NULL go to scratch buffers.
* Inference lowers to pointwise nodes: y = scale * (x - mean) * rsqrt(var + eps) + bias (then + z and
  the activation for the Ex ops of cudnnNormalizationForwardInference).
* Backward lowers to NormBwd (saved statistics given) or NormFwd(TRAINING) + NormBwd (NULL saved
  statistics: recomputed); the Ex ops (RELU only, as cuDNN) first zero dy where the forward output
  y is not positive (and write that as dz for BN_ADD_ACTIVATION); dx is blended with alphaDataDiff /
  betaDataDiff, dscale and dbias with alphaParamDiff / betaParamDiff.
* PER_ACTIVATION normalizes each (c, h, w) over N: lowered as a spatial batch norm of the view
  [N, C*H*W, 1, 1] (x's C, H, W strides must collapse; NOT_SUPPORTED otherwise). SPATIAL_PERSISTENT
  is SPATIAL. epsilon below CUDNN_BN_MIN_EPSILON is BAD_PARAM.
"""
import math

from ..errors import BadParamError, CudnnError, c_api
from ..handle import get_handle_or_raise
from ..ir import NormBwd, NormFwd
from ..ir.tensor import packed_strides
from ..types import (MACROS, cudnnActivationMode_t, cudnnBackendNormFwdPhase_t, cudnnBackendNormMode_t,
                     cudnnBatchNormMode_t, cudnnBatchNormOps_t, cudnnDataType_t, cudnnPointwiseMode_t, cudnnStatus_t)
from . import lower as L
from ._util import desc_arg, enum_arg, float_arg, host_scalar, need_ptr
from .activation import _FWD as ACT_FWD, act_attrs
from .op_desc import ActivationDescriptor
from .tensor_desc import TensorDescriptor

S = cudnnStatus_t
BM = cudnnBatchNormMode_t
BO = cudnnBatchNormOps_t
NM = cudnnBackendNormMode_t
PH = cudnnBackendNormFwdPhase_t
PM = cudnnPointwiseMode_t
AM = cudnnActivationMode_t
F32 = cudnnDataType_t.CUDNN_DATA_FLOAT
MIN_EPS = MACROS["CUDNN_BN_MIN_EPSILON"]


def bn_param_dims(mode, x_dims):
    if mode == BM.CUDNN_BATCHNORM_PER_ACTIVATION:
        return (1,) + tuple(x_dims[1:])
    return (1, x_dims[1]) + (1,) * (len(x_dims) - 2)


@c_api(0)
def cudnnDeriveBNTensorDescriptor(derivedBnDesc, xDesc, mode):
    d = desc_arg(derivedBnDesc, TensorDescriptor, "derivedBnDesc", need_set=False)
    xd = desc_arg(xDesc, TensorDescriptor, "xDesc")
    mode = enum_arg(BM, mode, "mode")
    if xd.nbDims not in (4, 5):
        raise BadParamError(f"xDesc has {xd.nbDims} dims: batch norm takes 4-d or 5-d tensors")
    dt = F32 if xd.dtype in (cudnnDataType_t.CUDNN_DATA_HALF, cudnnDataType_t.CUDNN_DATA_BFLOAT16) else xd.dtype
    dims = bn_param_dims(mode, xd.dims)
    d.set(dt, dims, packed_strides(dims))


def _view(mode, d, name):
    """(dims, strides) of the tensor the IR sees: PER_ACTIVATION collapses C, spatial into one channel dim."""
    if mode != BM.CUDNN_BATCHNORM_PER_ACTIVATION:
        return d.dims, d.strides
    dims, st = d.dims, d.strides
    for i in range(1, len(dims) - 1):
        if dims[i] > 1 and st[i] != st[i + 1] * dims[i + 1]:
            raise CudnnError(f"{name}: PER_ACTIVATION needs C and the spatial dims packed together, strides {st}",
                             S.CUDNN_STATUS_NOT_SUPPORTED)
    n = len(dims)
    return (dims[0], math.prod(dims[1:])) + (1,) * (n - 2), (st[0], st[-1]) + (1,) * (n - 2)


class _BN:
    """Checked arguments shared by the batch-norm calls."""

    def __init__(self, mode, xd, pd, eps, others=()):
        self.mode = enum_arg(BM, mode, "mode")
        self.xd, self.pd = xd, pd
        self.eps = float_arg(eps, "epsilon")
        if self.eps < MIN_EPS:
            raise BadParamError(f"epsilon {self.eps} < CUDNN_BN_MIN_EPSILON ({MIN_EPS})")
        if xd.nbDims not in (4, 5):
            raise BadParamError(f"xDesc has {xd.nbDims} dims: batch norm takes 4-d or 5-d tensors")
        for od, on in others:
            if od.dims != xd.dims:
                raise BadParamError(f"{on} dims {od.dims} differ from xDesc dims {xd.dims}")
        want = bn_param_dims(self.mode, xd.dims)
        if pd.dims != want:
            raise BadParamError(f"bnScaleBiasMeanVarDesc dims {pd.dims}, expected {want}")

    def t(self, b, name, d):
        dims, strides = _view(self.mode, d, name)
        return b.tensor(name, d, dims=dims, strides=strides)

    def scratch(self, b, name):
        dims, strides = _view(self.mode, self.pd, name)
        return b.scratch_tensor(name, dims, strides, self.pd.dtype)

    def sig(self):
        return (int(self.mode), self.xd.signature(), self.pd.signature())


def _fwd_training(b, bn, yd, ops, ad, zd, z_name, al, be, saved, running, sdt):
    """NormFwd training with optional activation epilogue (Ex) and blending; saved / running: booleans."""
    xt = bn.t(b, "x", bn.xd)
    eps = b.scalar("epsilon", bn.xd.nbDims, F32, bn.eps)
    ins = {"X": xt, "SCALE": bn.t(b, "scale", bn.pd), "BIAS": bn.t(b, "bias", bn.pd), "EPSILON": eps}
    outs = {}
    if saved:
        outs["MEAN"], outs["INV_VARIANCE"] = bn.t(b, "save_mean", bn.pd), bn.t(b, "save_inv_var", bn.pd)
    else:
        outs["MEAN"], outs["INV_VARIANCE"] = bn.scratch(b, "save_mean"), bn.scratch(b, "save_inv_var")
    if running:
        ins["EXP_AVG_FACTOR"] = b.scalar("factor", bn.xd.nbDims, F32)
        ins["INPUT_RUNNING_MEAN"] = bn.t(b, "running_mean:prior", bn.pd)
        ins["INPUT_RUNNING_VAR"] = bn.t(b, "running_var:prior", bn.pd)
        outs["OUTPUT_RUNNING_MEAN"] = bn.t(b, "running_mean", bn.pd)
        outs["OUTPUT_RUNNING_VAR"] = bn.t(b, "running_var", bn.pd)
    act = ops != BO.CUDNN_BATCHNORM_OPS_BN
    ydims, ystrides = _view(bn.mode, yd, "yDesc")
    if not act and not L.needs_blend(al, be):
        outs["Y"] = b.blend(None, "y", yd, al, be, dims=ydims, strides=ystrides)
    else:
        cur = outs["Y"] = b.anchor_out("bn", ydims)
        if ops == BO.CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION:
            nxt = b.virtual("bn+z", dtype=sdt)
            b.pw(PM.CUDNN_POINTWISE_ADD, nxt, "add_z", X=cur, B=bn.t(b, z_name, zd))
            cur = nxt
        if act:
            nxt = b.virtual("act", dtype=sdt)
            b.pw(ACT_FWD[ad.mode], nxt, "activation", X=cur, **act_attrs(ad))
            cur = nxt
        b.blend(cur, "y", yd, al, be, sdt, dims=ydims, strides=ystrides)
    b.add(NormFwd("batchnorm", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING))


def training(handle, mode, ops, alpha, beta, xDesc, x, zDesc, z, yDesc, y, pDesc, scale, bias, factor,
              rmean, rvar, epsilon, smean, sinv, activationDesc):
    h = get_handle_or_raise(handle)
    xd, yd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(yDesc, TensorDescriptor, "yDesc")
    pd = desc_arg(pDesc, TensorDescriptor, "bnScaleBiasMeanVarDesc")
    ops = enum_arg(BO, ops, "bnOps")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    others = [(yd, "yDesc")]
    zd = ad = None
    if ops == BO.CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION:
        zd = desc_arg(zDesc, TensorDescriptor, "zDesc")
        others.append((zd, "zDesc"))
        need_ptr(z, "zData")
    if ops != BO.CUDNN_BATCHNORM_OPS_BN:
        ad = desc_arg(activationDesc, ActivationDescriptor, "activationDesc")
    bn = _BN(mode, xd, pd, epsilon, others)
    for p, n in ((x, "x"), (y, "y"), (scale, "bnScale"), (bias, "bnBias")):
        need_ptr(p, n)
    if (rmean is None) != (rvar is None):
        raise BadParamError("resultRunningMean and resultRunningVariance must be both NULL or both given")
    if (smean is None) != (sinv is None):
        raise BadParamError("resultSaveMean and resultSaveInvVariance must be both NULL or both given")
    f = float_arg(factor, "exponentialAverageFactor")
    saved, running = smean is not None, rmean is not None
    sdt = L.scalar_dtype(yd.dtype)
    key = ("bn_train", bn.sig(), yd.signature(), int(ops), ad.signature() if ad else None,
           zd.signature() if zd else None, saved, running, L.blend_key(al, be), bn.eps)
    bind = {"x": x, "y": y, "scale": scale, "bias": bias, "save_mean": smean, "save_inv_var": sinv,
            "running_mean": rmean, "running_var": rvar, "z": z}
    bind = {k: v for k, v in bind.items() if v is not None}
    L.run(h, key, lambda b: _fwd_training(b, bn, yd, ops, ad, zd, "z", al, be, saved, running, sdt), bind,
          {"alpha": al, "factor": f, "epsilon": bn.eps})


@c_api(0)
def cudnnBatchNormalizationForwardTraining(handle, mode, alpha, beta, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc,
                                           bnScale, bnBias, exponentialAverageFactor, resultRunningMean,
                                           resultRunningVariance, epsilon, resultSaveMean, resultSaveInvVariance):
    training(handle, mode, BO.CUDNN_BATCHNORM_OPS_BN, alpha, beta, xDesc, x, None, None, yDesc, y,
              bnScaleBiasMeanVarDesc, bnScale, bnBias, exponentialAverageFactor, resultRunningMean,
              resultRunningVariance, epsilon, resultSaveMean, resultSaveInvVariance, None)


@c_api(0)
def cudnnBatchNormalizationForwardTrainingEx(handle, mode, bnOps, alpha, beta, xDesc, xData, zDesc, zData, yDesc,
                                             yData, bnScaleBiasMeanVarDesc, bnScale, bnBias,
                                             exponentialAverageFactor, resultRunningMean, resultRunningVariance,
                                             epsilon, resultSaveMean, resultSaveInvVariance, activationDesc,
                                             workspace, workSpaceSizeInBytes, reserveSpace, reserveSpaceSizeInBytes):
    from ._util import plausible

    plausible(locals(), ptrs=("bnScale", "bnBias", "resultRunningMean", "resultRunningVariance", "resultSaveMean",
                              "resultSaveInvVariance", "workspace", "reserveSpace"),
              sizes=("workSpaceSizeInBytes", "reserveSpaceSizeInBytes"))
    training(handle, mode, bnOps, alpha, beta, xDesc, xData, zDesc, zData, yDesc, yData, bnScaleBiasMeanVarDesc,
              bnScale, bnBias, exponentialAverageFactor, resultRunningMean, resultRunningVariance, epsilon,
              resultSaveMean, resultSaveInvVariance, activationDesc)


def inference(handle, mode, ops, alpha, beta, xDesc, x, zDesc, z, yDesc, y, pDesc, scale, bias, mean, var, epsilon,
              activationDesc):
    """Inference (also cudnnNormalizationForwardInference): pointwise nodes, optional + z and activation."""
    h = get_handle_or_raise(handle)
    xd, yd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(yDesc, TensorDescriptor, "yDesc")
    pd = desc_arg(pDesc, TensorDescriptor, "bnScaleBiasMeanVarDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    others, zd, ad = [(yd, "yDesc")], None, None
    if ops == BO.CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION:
        zd = desc_arg(zDesc, TensorDescriptor, "zDesc")
        others.append((zd, "zDesc"))
        need_ptr(z, "z")
    if ops != BO.CUDNN_BATCHNORM_OPS_BN:
        ad = desc_arg(activationDesc, ActivationDescriptor, "activationDesc")
    bn = _BN(mode, xd, pd, epsilon, others)
    for p, n in ((x, "x"), (y, "y"), (scale, "bnScale"), (bias, "bnBias"), (mean, "estimatedMean"),
                 (var, "estimatedVariance")):
        need_ptr(p, n)
    sdt = L.scalar_dtype(yd.dtype)

    def build(b):
        # parameters broadcast over x's dims as [1, C, 1, 1] / [1, C, H, W]
        xt = b.tensor("x", xd)
        sc, bi, mu, vr = (b.tensor(n, pd) for n in ("scale", "bias", "mean", "var"))
        eps = b.scalar("epsilon", xd.nbDims, F32, bn.eps)
        v = [b.virtual(n, dtype=F32) for n in ("x-mean", "var+eps", "inv_std", "xhat", "scaled", "bn")]
        b.pw(PM.CUDNN_POINTWISE_SUB, v[0], "center", X=xt, B=mu)
        b.pw(PM.CUDNN_POINTWISE_ADD, v[1], "var_eps", X=vr, B=eps)
        b.pw(PM.CUDNN_POINTWISE_RSQRT, v[2], "rsqrt", X=v[1])
        b.pw(PM.CUDNN_POINTWISE_MUL, v[3], "normalize", X=v[0], B=v[2])
        b.pw(PM.CUDNN_POINTWISE_MUL, v[4], "scale", X=v[3], B=sc)
        b.pw(PM.CUDNN_POINTWISE_ADD, v[5], "shift", X=v[4], B=bi)
        cur = v[5]
        if zd is not None:
            nxt = b.virtual("bn+z", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_ADD, nxt, "add_z", X=cur, B=b.tensor("z", zd))
            cur = nxt
        if ad is not None:
            nxt = b.virtual("act", dtype=F32)
            b.pw(ACT_FWD[ad.mode], nxt, "activation", X=cur, **act_attrs(ad))
            cur = nxt
        b.blend(cur, "y", yd, al, be, sdt)

    key = ("bn_infer", bn.sig(), yd.signature(), int(ops), ad.signature() if ad else None,
           zd.signature() if zd else None, L.blend_key(al, be))
    bind = {"x": x, "y": y, "scale": scale, "bias": bias, "mean": mean, "var": var}
    if zd is not None:
        bind["z"] = z
    L.run(h, key, build, bind, {"alpha": al, "epsilon": bn.eps})


@c_api(0)
def cudnnBatchNormalizationForwardInference(handle, mode, alpha, beta, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc,
                                            bnScale, bnBias, estimatedMean, estimatedVariance, epsilon):
    inference(handle, mode, BO.CUDNN_BATCHNORM_OPS_BN, alpha, beta, xDesc, x, None, None, yDesc, y,
              bnScaleBiasMeanVarDesc, bnScale, bnBias, estimatedMean, estimatedVariance, epsilon, None)


def backward(handle, mode, ops, aD, bD, aP, bP, xDesc, x, yDesc, y, dyDesc, dy, dzDesc, dz, dxDesc, dx, dPDesc,
              scale, bias, dscale, dbias, epsilon, smean, sinv, activationDesc):
    h = get_handle_or_raise(handle)
    xd, dyd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(dyDesc, TensorDescriptor, "dyDesc")
    dxd = desc_arg(dxDesc, TensorDescriptor, "dxDesc")
    pd = desc_arg(dPDesc, TensorDescriptor, "dBnScaleBiasDesc")
    ops = enum_arg(BO, ops, "bnOps")
    act = ops != BO.CUDNN_BATCHNORM_OPS_BN
    yd = dzd = None
    if act:
        ad = desc_arg(activationDesc, ActivationDescriptor, "activationDesc")
        if ad.mode != AM.CUDNN_ACTIVATION_RELU:
            raise CudnnError(f"{ad.mode.name}: the fused batch-norm backward takes RELU only",
                             S.CUDNN_STATUS_NOT_SUPPORTED)
        yd = desc_arg(yDesc, TensorDescriptor, "yDesc")
        need_ptr(y, "yData")
        if ops == BO.CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION:
            dzd = desc_arg(dzDesc, TensorDescriptor, "dzDesc")
            need_ptr(dz, "dzData")
    ad_, bd_, ap, bp = (host_scalar(v, n) for v, n in ((aD, "alphaDataDiff"), (bD, "betaDataDiff"),
                                                       (aP, "alphaParamDiff"), (bP, "betaParamDiff")))
    bn = _BN(mode, xd, pd, epsilon, [(dyd, "dyDesc"), (dxd, "dxDesc")] + ([(yd, "yDesc")] if yd else []) +
             ([(dzd, "dzDesc")] if dzd else []))
    for p, n in ((x, "x"), (dy, "dy"), (dx, "dx"), (scale, "bnScale"), (dscale, "dBnScaleResult"),
                 (dbias, "dBnBiasResult")):
        need_ptr(p, n)
    if (smean is None) != (sinv is None):
        raise BadParamError("savedMean and savedInvVariance must be both NULL or both given")
    saved = smean is not None
    sdt = L.scalar_dtype(dxd.dtype)

    def build(b):
        xt = bn.t(b, "x", xd)
        sc = bn.t(b, "scale", pd)
        if saved:
            mean, inv = bn.t(b, "save_mean", pd), bn.t(b, "save_inv_var", pd)
        else:
            mean, inv = bn.scratch(b, "mean"), bn.scratch(b, "inv_var")
            # y of the recomputation is discarded: any bias will do, the scale serves
            yscr = b.scratch_tensor("y_recomputed", *_view(bn.mode, xd, "x"), xd.dtype)
            eps = b.scalar("epsilon", xd.nbDims, F32, bn.eps)
            b.add(NormFwd("batchnorm_stats", {"X": xt, "SCALE": sc, "BIAS": sc, "EPSILON": eps},
                          {"Y": yscr, "MEAN": mean, "INV_VARIANCE": inv}, mode=NM.CUDNN_BATCH_NORM,
                          phase=PH.CUDNN_NORM_FWD_TRAINING))
        outs = {}
        for port, name, d, al, be in (("DX", "dx", dxd, ad_, bd_), ("DSCALE", "dscale", pd, ap, bp),
                                      ("DBIAS", "dbias", pd, ap, bp)):
            vd, vs = _view(bn.mode, d, name)
            if L.needs_blend(al, be):
                outs[port] = b.virtual(name + "_raw", dims=vd, dtype=F32)
                b.blend(outs[port], name, d, al, be, sdt, dims=vd, strides=vs)
            else:
                outs[port] = b.tensor(name, d, dims=vd, strides=vs)
        dyt = bn.t(b, "dy", dyd)
        if act:  # dy through the RELU: y > 0 exactly where its input was > 0
            nd = len(xd.dims)
            live = b.virtual("y>0", dtype=cudnnDataType_t.CUDNN_DATA_BOOLEAN)
            b.pw(PM.CUDNN_POINTWISE_CMP_GT, live, "relu_mask", X=bn.t(b, "y", yd), B=b.scalar("zero", nd, F32, 0.0))
            dyr = b.virtual("dy_relu", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_BINARY_SELECT, dyr, "relu_bwd", X=dyt, B=b.scalar("zero_dy", nd, F32, 0.0),
                 T=live)
            if dzd is not None:
                b.pw(PM.CUDNN_POINTWISE_IDENTITY, bn.t(b, "dz", dzd), "dz", X=dyr)
            dyt = dyr
        b.add(NormBwd("batchnorm_bwd", {"X": xt, "DY": dyt, "SCALE": sc, "MEAN": mean, "INV_VARIANCE": inv}, outs,
                      mode=NM.CUDNN_BATCH_NORM))

    key = ("bn_bwd", bn.sig(), dyd.signature(), dxd.signature(), saved, L.blend_key(ad_, bd_), L.blend_key(ap, bp),
           bn.eps, int(ops), yd.signature() if yd else None, dzd.signature() if dzd else None)
    bind = {"x": x, "dy": dy, "dx": dx, "scale": scale, "dscale": dscale, "dbias": dbias, "save_mean": smean,
            "save_inv_var": sinv, "y": y if act else None, "dz": dz if dzd else None}
    low = L.lower(h, key, build)
    L.execute(h, low, {k: v for k, v in bind.items() if v is not None},
              {"alpha:dx": ad_, "alpha:dscale": ap, "alpha:dbias": ap, "epsilon": bn.eps})


@c_api(0)
def cudnnBatchNormalizationBackward(handle, mode, alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff,
                                    xDesc, x, dyDesc, dy, dxDesc, dx, dBnScaleBiasDesc, bnScale, dBnScaleResult,
                                    dBnBiasResult, epsilon, savedMean, savedInvVariance):
    backward(handle, mode, BO.CUDNN_BATCHNORM_OPS_BN, alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff,
              xDesc, x, None, None, dyDesc, dy, None, None, dxDesc, dx, dBnScaleBiasDesc, bnScale, None,
              dBnScaleResult, dBnBiasResult, epsilon, savedMean, savedInvVariance, None)


@c_api(0)
def cudnnBatchNormalizationBackwardEx(handle, mode, bnOps, alphaDataDiff, betaDataDiff, alphaParamDiff,
                                      betaParamDiff, xDesc, xData, yDesc, yData, dyDesc, dyData, dzDesc, dzData,
                                      dxDesc, dxData, dBnScaleBiasDesc, bnScaleData, bnBiasData, dBnScaleData,
                                      dBnBiasData, epsilon, savedMean, savedInvVariance, activationDesc, workSpace,
                                      workSpaceSizeInBytes, reserveSpace, reserveSpaceSizeInBytes):
    from ._util import plausible

    plausible(locals(), ptrs=("bnScaleData", "bnBiasData", "dBnScaleData", "dBnBiasData", "savedMean",
                              "savedInvVariance", "workSpace", "reserveSpace"),
              sizes=("workSpaceSizeInBytes", "reserveSpaceSizeInBytes"))
    backward(handle, mode, bnOps, alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff, xDesc, xData, yDesc,
              yData, dyDesc, dyData, dzDesc, dzData, dxDesc, dxData, dBnScaleBiasDesc, bnScaleData, bnBiasData,
              dBnScaleData, dBnBiasData, epsilon, savedMean, savedInvVariance, activationDesc)


def _ex_size(handle, mode, bnOps, **descs):
    from ._util import optional_descs

    optional_descs(**descs)
    get_handle_or_raise(handle)
    enum_arg(BM, mode, "mode")
    enum_arg(BO, bnOps, "bnOps")
    return 0


@c_api(1)
def cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle, mode, bnOps, xDesc, zDesc, yDesc,
                                                             bnScaleBiasMeanVarDesc, activationDesc):
    """(status, 0): the engines' workspace comes from the handle's pool."""
    return _ex_size(handle, mode, bnOps, xDesc=xDesc, zDesc=zDesc, yDesc=yDesc,
                    bnScaleBiasMeanVarDesc=bnScaleBiasMeanVarDesc, activationDesc=activationDesc)


@c_api(1)
def cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle, mode, bnOps, xDesc, yDesc, dyDesc, dzDesc, dxDesc,
                                                      dBnScaleBiasDesc, activationDesc):
    return _ex_size(handle, mode, bnOps, xDesc=xDesc, yDesc=yDesc, dyDesc=dyDesc, dzDesc=dzDesc, dxDesc=dxDesc,
                    dBnScaleBiasDesc=dBnScaleBiasDesc, activationDesc=activationDesc)


@c_api(1)
def cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, mode, bnOps, activationDesc, xDesc):
    return _ex_size(handle, mode, bnOps, activationDesc=activationDesc, xDesc=xDesc)

