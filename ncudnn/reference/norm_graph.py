"""The backend NORM_FORWARD / NORM_BACKWARD operations (cudnnBackendNormMode_t) in IR port names.

Thin dispatch over ``norm.py`` for engine tests. x is [N, C, *spatial] (or [B, S, H]-style rows);
shapes follow the IR's ``stats_dims``:

* BATCH_NORM: stats and scale / bias [1, C, 1, ...]; training normalizes with batch statistics
  and, when running stats are given, updates them with ``momentum`` (EXP_AVG_FACTOR, unbiased var);
  inference uses MEAN_IN / INV_VARIANCE_IN (``mean`` / ``inv_variance``, the inverse std).
* INSTANCE_NORM: stats [N, C, 1, ...], scale / bias [1, C, 1, ...].
* LAYER_NORM / RMS_NORM: normalized over every dim but 0; stats [N, 1, ...], scale / bias
  [1, *x.shape[1:]]. RMS_NORM produces no MEAN; INV_VARIANCE is 1 / sqrt(mean(x^2) + eps).
* ADA_LAYER_NORM (adaptive layer norm): scale / bias of X's rank, dim 0 1 or N (one row per batch entry),
  every other dim 1 or X's; normalized over the axes where scale is not 1 (X [B, S, C], scale [B, 1, C]:
  each (b, s) row of C), stats X's dims with 1 on those axes ([B, S, 1]); dscale / dbias summed to
  scale's shape (over S). Bias optional (0).
Training and inference give the same Y for layer / instance / RMS norm (statistics are always
computed from x); only training returns MEAN / INV_VARIANCE.
"""
from ..types import cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM
from . import norm as N
from ._util import enum_member, f64

__all__ = ["norm_forward", "norm_backward"]


def _rows(x):
    return tuple(range(1, f64(x).ndim))


def _ada_axes(x, scale):
    x, scale = f64(x), f64(scale)
    if scale.ndim != x.ndim:
        raise ValueError(f"ADA_LAYER_NORM: scale has rank {scale.ndim}, x {x.ndim}")
    return tuple(i for i in range(1, x.ndim) if scale.shape[i] != 1)


def norm_forward(mode, x, eps, scale=None, bias=None, phase=PH.CUDNN_NORM_FWD_TRAINING, *,
                 mean=None, inv_variance=None, running_mean=None, running_var=None,
                 momentum=None):
    """-> dict with Y and, as the mode/phase produce them, MEAN, INV_VARIANCE,
    OUTPUT_RUNNING_MEAN, OUTPUT_RUNNING_VAR."""
    mode = enum_member(NM, mode, "CUDNN_")
    training = enum_member(PH, phase, "CUDNN_NORM_FWD_") == PH.CUDNN_NORM_FWD_TRAINING
    x = f64(x)
    if mode == NM.CUDNN_BATCH_NORM:
        if not training:
            return {"Y": N.batchnorm_inference(x, scale, bias, mean, None, eps,
                                               inv_variance=inv_variance)}
        y, m, inv, rm, rv = N.batchnorm_forward_training(
            x, scale, bias, eps, 0.0 if momentum is None else momentum, running_mean, running_var)
        out = {"Y": y, "MEAN": m, "INV_VARIANCE": inv}
        if rm is not None:
            out.update(OUTPUT_RUNNING_MEAN=rm, OUTPUT_RUNNING_VAR=rv)
        return out
    if mode == NM.CUDNN_INSTANCE_NORM:
        y, m, inv = N.instancenorm_forward(x, scale, bias, eps)
    elif mode == NM.CUDNN_LAYER_NORM:
        y, m, inv = N.layernorm_forward(x, scale, 0.0 if bias is None else bias, eps, _rows(x))
    elif mode == NM.CUDNN_ADA_LAYER_NORM:
        y, m, inv = N.layernorm_forward(x, scale, 0.0 if bias is None else bias, eps, _ada_axes(x, scale))
    elif mode == NM.CUDNN_RMS_NORM:
        y, inv = N.rmsnorm_forward(x, scale, eps, _rows(x), bias=bias)
        return {"Y": y, "INV_VARIANCE": inv} if training else {"Y": y}
    else:
        raise ValueError(f"{mode.name} is not a supported backend norm mode")
    return {"Y": y, "MEAN": m, "INV_VARIANCE": inv} if training else {"Y": y}


def norm_backward(mode, x, dy, scale, mean=None, inv_variance=None, *, has_bias=True):
    """-> dict DX, DSCALE, DBIAS (DBIAS None for RMS_NORM unless has_bias)."""
    mode = enum_member(NM, mode, "CUDNN_")
    x = f64(x)
    if mode == NM.CUDNN_BATCH_NORM:
        dx, ds, db = N.batchnorm_backward(x, dy, scale, mean, inv_variance)
    elif mode == NM.CUDNN_INSTANCE_NORM:
        dx, ds, db = N.instancenorm_backward(x, dy, scale, mean, inv_variance)
    elif mode == NM.CUDNN_LAYER_NORM:
        dx, ds, db = N.layernorm_backward(x, dy, scale, mean, inv_variance, _rows(x))
    elif mode == NM.CUDNN_ADA_LAYER_NORM:
        dx, ds, db = N.layernorm_backward(x, dy, scale, mean, inv_variance, _ada_axes(x, scale))
    elif mode == NM.CUDNN_RMS_NORM:
        dx, ds, db = N.rmsnorm_backward(x, dy, scale, inv_variance, _rows(x), has_bias=has_bias)
    else:
        raise ValueError(f"{mode.name} is not a supported backend norm mode")
    return {"DX": dx, "DSCALE": ds, "DBIAS": db}
