"""Reference for normalizations: GENSTATS, BN_FINALIZE, batch / layer / instance / group / RMS norm.

All in float64. Common definitions, over a set of "normalized" axes A with M = number of elements:

    mean = sum_A x / M,  var = sum_A (x - mean)^2 / M  (biased),  inv_std = 1 / sqrt(var + eps)
    xhat = (x - mean) * inv_std,  y = scale * xhat + bias

Statistics keep x's rank with extent 1 on the normalized axes (cuDNN's [N,1,1,1] / [1,C,1,1]).
Backward (exact gradient of that forward through the batch statistics), with g = dy * scale:

    dx = inv_std * (g - mean_A(g) - xhat * mean_A(g * xhat));  dscale = sum dy * xhat;  dbias = sum dy

where dscale / dbias are summed over every axis on which scale / bias is broadcast.

* Batch norm: A = every axis except ``channel_axis``; scale / bias / stats are per channel and
  accept any shape holding C values (returned shaped [1, C, 1, ...]); per_activation=True is
  cuDNN's PER_ACTIVATION mode: A = the batch axis only, stats [1, C, H, W]. Training updates running
  stats with ``momentum`` (cuDNN's exponential average factor):
  running_mean' = (1 - momentum) * running_mean + momentum * mean,
  running_var'  = (1 - momentum) * running_var + momentum * var * M / (M - 1)  (unbiased, as cuDNN).
* Layer norm: A = ``norm_axes``; scale / bias broadcast numpy-style against x (e.g. [1, C, H, W];
  a per-sample [N, 1, ...] scale gives cuDNN's adaptive layer norm).
* Instance norm: A = the spatial axes (all but 0 and ``channel_axis``), per-channel scale / bias,
  stats [N, C, 1, ...].
* Group norm: channels split into ``groups`` contiguous groups; A = (channels of the group, spatial);
  per-channel scale / bias; stats [N, G, 1, ...] (one value per sample and group).
* RMS norm: no mean subtraction: inv_rms = 1 / sqrt(mean_A(x^2) + eps), y = scale * x * inv_rms
  (+ bias if given); backward dx = inv_rms * (g - xhat * mean_A(g * xhat)), xhat = x * inv_rms.
"""
import numpy as np

from ._util import f64

__all__ = [
    "genstats", "bn_finalize", "batchnorm_forward_training", "batchnorm_inference",
    "batchnorm_backward", "bn_bwd_weights", "layernorm_forward", "layernorm_backward", "rmsnorm_forward",
    "rmsnorm_backward", "instancenorm_forward", "instancenorm_backward", "groupnorm_forward",
    "groupnorm_backward",
]


# ---------------------------------------------------------------- shared core
def _axes(ndim, axes):
    return tuple(sorted({int(a) % ndim for a in np.atleast_1d(axes)}))


def _chan(a, ndim, channel_axis, C):
    """Per-channel array-like (any shape with C values) as [1, .., C, .., 1]."""
    a = f64(a)
    if a.size != C:
        raise ValueError(f"per-channel tensor has {a.size} values, expected {C}")
    shape = [1] * ndim
    shape[channel_axis % ndim] = C
    return a.reshape(shape)


def _reduce_to(g, shape):
    """Sum g over the axes on which an array of ``shape`` was broadcast to g's shape."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(i for i, (s, n) in enumerate(zip(shape, g.shape)) if s == 1 and n != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def _fwd(x, axes, eps, center=True):
    mean = x.mean(axis=axes, keepdims=True) if center else np.zeros([1] * x.ndim)
    d = x - mean
    inv = 1.0 / np.sqrt((d * d).mean(axis=axes, keepdims=True) + eps)
    return d * inv, mean, inv


def _bwd(x, g, mean, inv, axes, center=True):
    xhat = (x - mean) * inv if center else x * inv
    t = g - xhat * (g * xhat).mean(axis=axes, keepdims=True)
    if center:
        t = t - g.mean(axis=axes, keepdims=True)
    return inv * t, xhat


# ---------------------------------------------------------------- batch norm
def genstats(x, channel_axis=1):
    """GENSTATS (SUM_SQSUM): per-channel (sum x, sum x^2) over all other axes, each [1, C, 1, ...]."""
    x = f64(x)
    axes = tuple(i for i in range(x.ndim) if i != channel_axis % x.ndim)
    return x.sum(axis=axes, keepdims=True), (x * x).sum(axis=axes, keepdims=True)


def bn_finalize(sum, sqsum, scale, bias, count, eps, momentum, running_mean=None,
                running_var=None, training=True):
    """BN_FINALIZE_STATISTICS: per-channel equivalent scale / bias from (sum, sqsum) over ``count``.

    training=True:  mean = sum / count, var = sqsum / count - mean^2 (biased),
    inv_std = 1 / sqrt(var + eps); eq_scale = scale * inv_std, eq_bias = bias - mean * eq_scale
    (so y = eq_scale * x + eq_bias is the normalized output); saved_mean = mean,
    saved_inv_std = inv_std; running stats (when given) updated as in the module docstring with
    the unbiased var * count / (count - 1).
    training=False (INFERENCE): eq_scale = scale / sqrt(running_var + eps),
    eq_bias = bias - running_mean * eq_scale; saved_* are None, running stats returned unchanged.
    Every array comes back shaped like ``sum``; absent running stats come back as None.
    """
    s = f64(sum)
    q = f64(sqsum).reshape(s.shape)
    scale, bias = f64(scale).reshape(s.shape), f64(bias).reshape(s.shape)
    rm = None if running_mean is None else f64(running_mean).reshape(s.shape)
    rv = None if running_var is None else f64(running_var).reshape(s.shape)
    count = float(count)
    if not training:
        if rm is None or rv is None:
            raise ValueError("inference finalize needs running_mean and running_var")
        eq_scale = scale / np.sqrt(rv + eps)
        return dict(eq_scale=eq_scale, eq_bias=bias - rm * eq_scale, saved_mean=None,
                    saved_inv_std=None, running_mean=rm, running_var=rv)
    mean = s / count
    var = q / count - mean * mean
    inv = 1.0 / np.sqrt(var + eps)
    eq_scale = scale * inv
    new_rm = None if rm is None else (1.0 - momentum) * rm + momentum * mean
    new_rv = None if rv is None else (1.0 - momentum) * rv + momentum * var * count / (count - 1)
    return dict(eq_scale=eq_scale, eq_bias=bias - mean * eq_scale, saved_mean=mean,
                saved_inv_std=inv, running_mean=new_rm, running_var=new_rv)


def _bn_geom(shape, channel_axis, per_activation):
    """(reduced axes, statistics shape) for SPATIAL (per channel) or PER_ACTIVATION batch norm."""
    nd = len(shape)
    if per_activation:  # cuDNN's CUDNN_BATCHNORM_PER_ACTIVATION: stats [1, C, H, W] over N
        return (0,), (1,) + tuple(shape[1:])
    ca = channel_axis % nd
    st = [1] * nd
    st[ca] = shape[ca]
    return tuple(i for i in range(nd) if i != ca), tuple(st)


def _stat(a, shape):
    a = f64(a)
    if a.size != int(np.prod(shape)):
        raise ValueError(f"statistics tensor has {a.size} values, expected shape {shape}")
    return a.reshape(shape)


def batchnorm_forward_training(x, scale, bias, eps, momentum=0.1, running_mean=None,
                               running_var=None, channel_axis=1, *, per_activation=False):
    """Training batch norm -> (y, saved_mean, saved_inv_std, new_running_mean, new_running_var).

    Stats are [1, C, 1, ...] (per_activation=True: [1, C, H, W], normalized over N only, cuDNN's
    CUDNN_BATCHNORM_PER_ACTIVATION); the running outputs are None when the inputs are None.
    """
    x = f64(x)
    axes, st = _bn_geom(x.shape, channel_axis, per_activation)
    xhat, mean, inv = _fwd(x, axes, eps)
    y = _stat(scale, st) * xhat + _stat(bias, st)
    M = x.size // int(np.prod(st))
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    new_rm = new_rv = None
    if running_mean is not None:
        new_rm = (1.0 - momentum) * _stat(running_mean, st) + momentum * mean
    if running_var is not None:
        new_rv = (1.0 - momentum) * _stat(running_var, st) + momentum * var * M / (M - 1)
    return y, mean, inv, new_rm, new_rv


def batchnorm_inference(x, scale, bias, mean, var, eps, channel_axis=1, *, inv_variance=None,
                        per_activation=False):
    """Inference batch norm: y = scale * (x - mean) / sqrt(var + eps) + bias, per channel
    (per activation with per_activation=True).

    The backend NORM_FORWARD inference takes the inverse std instead: pass ``var=None`` and
    ``inv_variance`` (= 1 / sqrt(var + eps)); then y = scale * (x - mean) * inv_variance + bias.
    """
    x = f64(x)
    _, st = _bn_geom(x.shape, channel_axis, per_activation)
    s, b, m = (_stat(a, st) for a in (scale, bias, mean))
    inv = _stat(inv_variance, st) if var is None else 1.0 / np.sqrt(_stat(var, st) + eps)
    return s * (x - m) * inv + b


def batchnorm_backward(x, dy, scale, saved_mean, saved_inv_std, channel_axis=1, *,
                       per_activation=False):
    """Training batch norm backward -> (dx, dscale, dbias); dscale / dbias have the stats shape."""
    x, dy = f64(x), f64(dy)
    axes, st = _bn_geom(x.shape, channel_axis, per_activation)
    mean, inv = _stat(saved_mean, st), _stat(saved_inv_std, st)
    dx, xhat = _bwd(x, dy * _stat(scale, st), mean, inv, axes)
    return dx, (dy * xhat).sum(axis=axes, keepdims=True), dy.sum(axis=axes, keepdims=True)


def bn_bwd_weights(x, saved_mean, saved_inv_std, scale, dy_sum, dy_x_sum, channel_axis=1):
    """DBN weights: dscale, dbias and the per-channel coefficients of the dx formula.

    From per-channel sums dy_sum = sum dy and dy_x_sum = sum dy*x over the M = x.size / C elements
    of a channel (only x's shape is used):
        dbias = dy_sum,  dscale = inv_std * (dy_x_sum - mean * dy_sum)
        dx = eq_dy_scale * dy + eq_x_scale * x + eq_bias  with
        eq_dy_scale = scale * inv_std,  eq_x_scale = -scale * inv_std^2 * dscale / M,
        eq_bias = scale * inv_std * (inv_std * mean * dscale - dbias) / M
    which equals batchnorm_backward's dx. Returns a dict of [1, C, 1, ...] arrays keyed
    dscale, dbias, eq_dy_scale, eq_x_scale, eq_bias.
    """
    shape = np.shape(x)
    ndim, ca = len(shape), channel_axis % len(shape)
    C = shape[ca]
    M = int(np.prod(shape)) // C
    mean, inv, s, dys, dyxs = (_chan(a, ndim, ca, C) for a in (saved_mean, saved_inv_std, scale,
                                                                dy_sum, dy_x_sum))
    dscale = inv * (dyxs - mean * dys)
    return dict(dscale=dscale, dbias=dys, eq_dy_scale=s * inv,
                eq_x_scale=-s * inv * inv * dscale / M,
                eq_bias=s * inv * (inv * mean * dscale - dys) / M)


# ---------------------------------------------------------------- layer / RMS norm
def layernorm_forward(x, scale, bias, eps, norm_axes):
    """Layer norm over ``norm_axes`` -> (y, mean, inv_std); stats have extent 1 on norm_axes."""
    x = f64(x)
    xhat, mean, inv = _fwd(x, _axes(x.ndim, norm_axes), eps)
    return f64(scale) * xhat + f64(bias), mean, inv


def layernorm_backward(x, dy, scale, mean, inv_std, norm_axes):
    """Layer norm backward -> (dx, dscale, dbias); dscale and dbias have scale's shape."""
    x, dy, scale = f64(x), f64(dy), f64(scale)
    dx, xhat = _bwd(x, dy * scale, f64(mean), f64(inv_std), _axes(x.ndim, norm_axes))
    return dx, _reduce_to(dy * xhat, scale.shape), _reduce_to(dy, scale.shape)


def rmsnorm_forward(x, scale, eps, norm_axes, bias=None):
    """RMS norm over ``norm_axes`` -> (y, inv_rms); y = scale * x * inv_rms (+ bias)."""
    x = f64(x)
    xhat, _, inv = _fwd(x, _axes(x.ndim, norm_axes), eps, center=False)
    y = f64(scale) * xhat
    return (y if bias is None else y + f64(bias)), inv


def rmsnorm_backward(x, dy, scale, inv_rms, norm_axes, has_bias=False):
    """RMS norm backward -> (dx, dscale, dbias); dbias (scale's shape) is None unless has_bias."""
    x, dy, scale = f64(x), f64(dy), f64(scale)
    dx, xhat = _bwd(x, dy * scale, 0.0, f64(inv_rms), _axes(x.ndim, norm_axes), center=False)
    return dx, _reduce_to(dy * xhat, scale.shape), (_reduce_to(dy, scale.shape) if has_bias
                                                     else None)


# ---------------------------------------------------------------- instance / group norm
def _spatial(ndim, ca):
    return tuple(i for i in range(ndim) if i not in (0, ca))


def instancenorm_forward(x, scale, bias, eps, channel_axis=1):
    """Instance norm -> (y, mean, inv_std); stats [N, C, 1, ...], per-channel scale / bias."""
    x = f64(x)
    ca = channel_axis % x.ndim
    C = x.shape[ca]
    xhat, mean, inv = _fwd(x, _spatial(x.ndim, ca), eps)
    return _chan(scale, x.ndim, ca, C) * xhat + _chan(bias, x.ndim, ca, C), mean, inv


def instancenorm_backward(x, dy, scale, mean, inv_std, channel_axis=1):
    """Instance norm backward -> (dx, dscale, dbias); dscale / dbias [1, C, 1, ...]."""
    x, dy = f64(x), f64(dy)
    ca = channel_axis % x.ndim
    C = x.shape[ca]
    dx, xhat = _bwd(x, dy * _chan(scale, x.ndim, ca, C), f64(mean), f64(inv_std),
                    _spatial(x.ndim, ca))
    red = tuple(i for i in range(x.ndim) if i != ca)
    return dx, (dy * xhat).sum(axis=red, keepdims=True), dy.sum(axis=red, keepdims=True)


def _grouped(x, groups):
    N, C = x.shape[:2]
    if C % groups:
        raise ValueError(f"C={C} not divisible by groups={groups}")
    return x.reshape((N, groups, C // groups) + x.shape[2:])


def groupnorm_forward(x, scale, bias, eps, groups):
    """Group norm (NC... layout) -> (y, mean, inv_std); stats [N, G, 1, ...] (x's rank)."""
    x = f64(x)
    xg = _grouped(x, groups)
    xhat, mean, inv = _fwd(xg, tuple(range(2, xg.ndim)), eps)
    C = x.shape[1]
    y = _chan(scale, x.ndim, 1, C) * xhat.reshape(x.shape) + _chan(bias, x.ndim, 1, C)
    return y, mean.reshape(mean.shape[:2] + (1,) * (x.ndim - 2)), inv.reshape(mean.shape[:2] + (
        1,) * (x.ndim - 2))


def groupnorm_backward(x, dy, scale, mean, inv_std, groups):
    """Group norm backward -> (dx, dscale, dbias); dscale / dbias [1, C, 1, ...]."""
    x, dy = f64(x), f64(dy)
    C = x.shape[1]
    xg, gg = _grouped(x, groups), _grouped(dy * _chan(scale, x.ndim, 1, C), groups)
    st = (x.shape[0], groups) + (1,) * (xg.ndim - 2)
    dx, xhat = _bwd(xg, gg, f64(mean).reshape(st), f64(inv_std).reshape(st),
                    tuple(range(2, xg.ndim)))
    red = tuple(i for i in range(x.ndim) if i != 1)
    xhat = xhat.reshape(x.shape)
    return dx.reshape(x.shape), (dy * xhat).sum(axis=red, keepdims=True), dy.sum(axis=red,
                                                                                 keepdims=True)
