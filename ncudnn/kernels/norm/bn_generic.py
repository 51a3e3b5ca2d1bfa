"""Normalizations: batch / instance / group norm launchers (stats + finalize + apply); the layer /
RMS row kernels live in :mod:`ncudnn.kernels.norm.row` (re-exported here), the dedicated NHWC / NCHW batch-norm
kernels of the engines in :mod:`ncudnn.kernels.norm.bn_cols` / :mod:`ncudnn.kernels.norm.bn_planes`.

**Batch, instance and group norm** work for any layout (NCHW, NHWC, any strides): per-group sums
(:mod:`ncudnn.kernels.reduce.strided`; a statistics group is a channel for BN, a (sample, channel) pair for IN, a
(sample, channel group) for GN) -> a tiny finalize kernel (mean, inv_std, running stats, the
equivalent per-(sample, channel) scale / bias) -> one fused pointwise pass
``y = x * eq_scale + eq_bias``. Backward: per-(sample, channel) sums of dy and dy*x -> finalize per
group (dscale, dbias and dx = a*dy + b*x + c coefficients) -> one pointwise pass. Variance is
E[x^2] - mean^2 accumulated in float32 (cuDNN's GENSTATS formulation).

All math in float32 registers (float64 when every tensor is float64); eps and momentum are run-time
values. Statistic tensors (mean / inv_std) are float32 unless ``stat_dtype`` says otherwise.
"""
import functools
import math

import numpy as np
from numba import cuda

from ..runtime.dtypes import compute_type, loader, placeholder, storer
from .row import VPT_MAX, row_bwd_kernel, row_config, row_fwd_kernel, row_norm_backward, row_norm_forward  # noqa: F401
from ..pointwise.fused import NodeSpec, OutputSpec, PointwiseSpec, TensorSpec, run_pointwise
from ..primitives.warp import launch
from ..reduce.strided import ReduceSpec, Term, run_reduce, workspace_elems as _reduce_ws
from ...types import cudnnPointwiseMode_t as PM

__all__ = ["row_norm_forward", "row_norm_backward", "batchnorm_forward_training",
           "batchnorm_inference", "batchnorm_backward", "instancenorm_forward",
           "instancenorm_backward", "groupnorm_forward", "groupnorm_backward", "row_config",
           "norm_workspace_elems", "row_fwd_kernel", "row_bwd_kernel"]

# the engines' pre-split spellings
_row_fwd_kernel, _row_bwd_kernel = row_fwd_kernel, row_bwd_kernel


def _dummy(dtype="float32"):
    return placeholder(dtype)


# --------------------------------------------------------------------------------------------
# per-group finalize kernels (batch / instance norm)

@functools.lru_cache(maxsize=None)
def _finalize_fwd_kernel(p_dt, s_dt, ct, update_running, write_stats):
    """Thread per coefficient k = (sample, channel): stats of its group -> eq_scale / eq_bias."""
    ldp, lds = loader(p_dt, ct), loader(s_dt, ct)
    stp, sts, stw = storer(p_dt), storer(s_dt), storer(ct)
    conv = np.float64 if ct == "float64" else np.float32
    one, zero = conv(1.0), conv(0.0)

    @cuda.jit
    def kernel(ssum, ssq, scale, bias, rm, rv, mean_out, inv_out, eq_scale, eq_bias, ncoef,
               channels, gpc, cpg, count, eps, momentum):
        k = cuda.grid(1)
        if k < ncoef:
            c = k % channels
            g = (k // channels) * gpc + c // cpg          # the statistics group of k
            m_inv = one / conv(count)
            mean = lds(ssum, g) * m_inv
            var = lds(ssq, g) * m_inv - mean * mean
            var = var if var > zero else zero
            inv = one / math.sqrt(var + conv(eps))
            es = ldp(scale, c) * inv
            stw(eq_scale, k, es)
            stw(eq_bias, k, ldp(bias, c) - mean * es)
            if write_stats and c % cpg == 0:
                sts(mean_out, g, mean)
                sts(inv_out, g, inv)
            if update_running:
                mom = conv(momentum)
                unbiased = var * conv(count) / conv(count - 1) if count > 1 else var
                stp(rm, c, (one - mom) * ldp(rm, c) + mom * mean)
                stp(rv, c, (one - mom) * ldp(rv, c) + mom * unbiased)
    return kernel


@functools.lru_cache(maxsize=None)
def _finalize_bwd_kernel(p_dt, s_dt, ct):
    """Thread per statistics group: dx = eq_dy*dy + eq_x*x + eq_b coefficients of its channels.

    With g = dy*scale: A = sum g, B = sum g*x over the group (from the per-(sample, channel)
    sums), a = A/M, b = inv*(B - mean*A)/M, dx = inv*(g - a - xhat*b).
    """
    ldp, lds, ldw = loader(p_dt, ct), loader(s_dt, ct), loader(ct, ct)
    stw = storer(ct)
    conv = np.float64 if ct == "float64" else np.float32

    @cuda.jit
    def kernel(dy_sum, dyx_sum, scale, mean_in, inv_in, k_dscale, k_dbias, eq_dy, eq_x, eq_b,
               ngroups, channels, gpc, cpg, count):
        g = cuda.grid(1)
        if g < ngroups:
            mean, inv = lds(mean_in, g), lds(inv_in, g)
            k0 = (g // gpc) * channels + (g % gpc) * cpg
            A = conv(0.0)
            B = conv(0.0)
            for j in range(cpg):
                s = ldp(scale, (k0 + j) % channels)
                A += s * ldw(dy_sum, k0 + j)
                B += s * ldw(dyx_sum, k0 + j)
            m_inv = conv(1.0) / conv(count)
            a = A * m_inv
            b = inv * (B - mean * A) * m_inv
            for j in range(cpg):
                k = k0 + j
                dys = ldw(dy_sum, k)
                stw(k_dscale, k, inv * (ldw(dyx_sum, k) - mean * dys))
                stw(k_dbias, k, dys)
                stw(eq_dy, k, inv * ldp(scale, k % channels))
                stw(eq_x, k, -inv * inv * b)
                stw(eq_b, k, inv * (mean * inv * b - a))
    return kernel


@functools.lru_cache(maxsize=None)
def _channel_sum_kernel(ct, out_dt):
    ldw, st = loader(ct, ct), storer(out_dt)

    @cuda.jit
    def kernel(per_coef, out, samples, channels):
        c = cuda.grid(1)
        if c < channels:
            acc = ldw(per_coef, c)
            for i in range(1, samples):
                acc += ldw(per_coef, i * channels + c)
            st(out, c, acc)
    return kernel


# --------------------------------------------------------------------------------------------
# batch / instance / group norm launchers

def _group_layout(shape, channel_axis, kind, groups=1):
    """Geometry of a per-group normalization ("batch", "instance" or "group").

    Returns (stats out_shape, coefficient out_shape, coefficient strides over x's shape,
    samples S, groups per sample GS, channels per group cpg, channels C). Coefficients are dense
    [S, C]; statistics dense [S, GS].
    """
    nd = len(shape)
    ca = channel_axis % nd
    C = shape[ca]
    per_sample = kind != "batch"
    S = shape[0] if per_sample else 1
    GS = groups if kind == "group" else C
    if C % GS:
        raise ValueError(f"C={C} not divisible by groups={GS}")
    coef_shape = tuple(n if d == ca or (per_sample and d == 0) else 1 for d, n in enumerate(shape))
    stat_shape = tuple(GS if d == ca else n for d, n in enumerate(coef_shape))
    strides = [0] * nd
    strides[ca] = 1
    if per_sample:
        strides[0] = C
    return stat_shape, coef_shape, tuple(strides), S, GS, C // GS, C


def _apply(shape, x_strides, x_dt, y_dt, g_strides, ct, x, es, eb, y, stream):
    spec = PointwiseSpec(tuple(shape), (TensorSpec(x_dt, tuple(x_strides)), TensorSpec(ct, g_strides),
                                        TensorSpec(ct, g_strides)),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (0, 1)),
                          NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (3, 2))),
                         (OutputSpec(4, y_dt, tuple(x_strides)),))
    run_pointwise(spec, x, es, eb, y, stream=stream)


def _carve(workspace, ct, sizes, stream):
    """Slices of ``workspace`` (compute-type elements; allocated when None) of the given sizes."""
    total = sum(sizes)
    if workspace is None:
        workspace = cuda.device_array(max(total, 1), dtype=np.dtype(ct), stream=stream)
    elif workspace.size < total or workspace.dtype != np.dtype(ct):
        raise ValueError(f"workspace needs {total} {ct} elements")
    flat, out, at = workspace.reshape(workspace.size), [], 0
    for n in sizes:
        out.append(flat[at:at + n] if n else None)
        at += n
    return out


def _fwd_plan(shape, x_strides, channel_axis, kind, groups, x_dtype, param_dtype):
    ct = compute_type([x_dtype, param_dtype])
    stat_shape, _, c_strides, S, GS, cpg, C = _group_layout(shape, channel_axis, kind, groups)
    dense = tuple(1 if d == channel_axis % len(shape) else (GS if c_strides[d] else 0)
                  for d in range(len(shape)))   # statistics: dense [S, GS]
    spec = ReduceSpec(tuple(shape), ((x_dtype, tuple(x_strides)),), stat_shape,
                      (Term("v0", "sum"), Term("v0 * v0", "sum")), ((ct, dense), (ct, dense)))
    return ct, c_strides, (S, GS, cpg, C), spec, [S * GS] * 2 + [S * C] * 2 + [_reduce_ws(spec)]


def _bwd_plan(shape, x_strides, dy_strides, channel_axis, kind, groups, x_dtype, dy_dtype,
              param_dtype):
    ct = compute_type([x_dtype, dy_dtype, param_dtype])
    _, coef_shape, c_strides, S, GS, cpg, C = _group_layout(shape, channel_axis, kind, groups)
    spec = ReduceSpec(tuple(shape), ((x_dtype, tuple(x_strides)), (dy_dtype, tuple(dy_strides))),
                      coef_shape, (Term("v1", "sum"), Term("v1 * v0", "sum")),
                      ((ct, c_strides), (ct, c_strides)))
    return ct, c_strides, (S, GS, cpg, C), spec, [S * C] * 7 + [_reduce_ws(spec)]


def norm_workspace_elems(kind, shape, x_strides, channel_axis=1, x_dtype="float32",
                         param_dtype="float32", dy_strides=None, dy_dtype="float32", groups=1):
    """Workspace (compute-type elements: float32, or float64 for all-fp64) a launcher needs.

    ``kind``: "batchnorm_forward", "instancenorm_forward", "groupnorm_forward" (and the same
    with "_backward"), or "batchnorm_inference". Pass a device array of that many elements as
    ``workspace=`` to run without allocating.
    """
    family = kind.split("norm_")[0]
    if kind == "batchnorm_inference":
        return 2 * shape[channel_axis % len(shape)]
    if kind.endswith("_forward"):
        return sum(_fwd_plan(shape, x_strides, channel_axis, family, groups, x_dtype,
                             param_dtype)[-1])
    if kind.endswith("_backward"):
        return sum(_bwd_plan(shape, x_strides, dy_strides or x_strides, channel_axis, family,
                             groups, x_dtype, dy_dtype, param_dtype)[-1])
    raise ValueError(f"unknown norm kind {kind!r}")


def _norm_forward(x, scale, bias, y, mean_out, inv_out, running_mean, running_var, shape,
                  x_strides, eps, momentum, channel_axis, kind, groups, x_dtype, param_dtype,
                  stat_dtype, workspace, stream):
    ct, c_strides, (S, GS, cpg, C), spec, sizes = _fwd_plan(shape, x_strides, channel_axis, kind,
                                                            groups, x_dtype, param_dtype)
    ssum, ssq, es, eb, rws = _carve(workspace, ct, sizes, stream)
    run_reduce(spec, [x], [ssum, ssq], rws, stream)
    count = int(np.prod(shape)) // (S * GS)
    update = running_mean is not None
    write = inv_out is not None
    fin = _finalize_fwd_kernel(param_dtype, stat_dtype, ct, update, write)
    d = _dummy(stat_dtype)
    launch(fin, math.ceil(S * C / 128), 128, stream,
        ssum, ssq, scale.reshape(scale.size), bias.reshape(bias.size),
        running_mean.reshape(C) if update else _dummy(param_dtype),
        running_var.reshape(C) if update else _dummy(param_dtype),
        mean_out.reshape(S * GS) if write else d, inv_out.reshape(S * GS) if write else d,
        es, eb, S * C, C, GS, cpg, count, float(eps), float(momentum))
    _apply(shape, x_strides, x_dtype, x_dtype, c_strides, ct, x, es, eb, y, stream)


def batchnorm_forward_training(x, scale, bias, y, saved_mean, saved_inv_std, running_mean,
                               running_var, shape, x_strides, eps, momentum, channel_axis=1,
                               x_dtype="float32", param_dtype="float32", stat_dtype="float32",
                               workspace=None, stream=0):
    """Training BN over every axis but ``channel_axis``; any layout via ``x_strides`` (elements).

    y has x's dtype and strides. saved_mean / saved_inv_std: C values (or both None);
    running_mean / running_var: C values updated in place with ``momentum`` (unbiased variance),
    or both None. scale, bias, running stats in ``param_dtype``. ``workspace``: see
    :func:`norm_workspace_elems` ("batchnorm_forward"); allocated when None.
    """
    _norm_forward(x, scale, bias, y, saved_mean, saved_inv_std, running_mean, running_var, shape,
                  x_strides, eps, momentum, channel_axis, "batch", 1, x_dtype, param_dtype,
                  stat_dtype, workspace, stream)


def instancenorm_forward(x, scale, bias, y, mean, inv_std, shape, x_strides, eps, channel_axis=1,
                         x_dtype="float32", param_dtype="float32", stat_dtype="float32",
                         workspace=None, stream=0):
    """Instance norm (stats per sample and channel over the spatial axes; N*C values each)."""
    _norm_forward(x, scale, bias, y, mean, inv_std, None, None, shape, x_strides, eps, 0.0,
                  channel_axis, "instance", 1, x_dtype, param_dtype, stat_dtype, workspace, stream)


def groupnorm_forward(x, scale, bias, y, mean, inv_std, shape, x_strides, eps, groups,
                      channel_axis=1, x_dtype="float32", param_dtype="float32",
                      stat_dtype="float32", workspace=None, stream=0):
    """Group norm: ``groups`` contiguous channel groups per sample; stats N*groups values each."""
    _norm_forward(x, scale, bias, y, mean, inv_std, None, None, shape, x_strides, eps, 0.0,
                  channel_axis, "group", groups, x_dtype, param_dtype, stat_dtype, workspace,
                  stream)


@functools.lru_cache(maxsize=None)
def _inference_coeff_kernel(p_dt, ct):
    ldp, stw = loader(p_dt, ct), storer(ct)
    conv = np.float64 if ct == "float64" else np.float32

    @cuda.jit
    def kernel(scale, bias, mean, var, es, eb, channels, eps):
        c = cuda.grid(1)
        if c < channels:
            s = ldp(scale, c) / math.sqrt(ldp(var, c) + conv(eps))
            stw(es, c, s)
            stw(eb, c, ldp(bias, c) - ldp(mean, c) * s)
    return kernel


def batchnorm_inference(x, scale, bias, mean, var, y, shape, x_strides, eps, channel_axis=1,
                        x_dtype="float32", param_dtype="float32", workspace=None, stream=0):
    """y = scale * (x - mean) / sqrt(var + eps) + bias per channel (all per-channel in param dtype)."""
    ct = compute_type([x_dtype, param_dtype])
    _, _, c_strides, _, _, _, C = _group_layout(shape, channel_axis, "batch")
    es, eb = _carve(workspace, ct, [C, C], stream)
    launch(_inference_coeff_kernel(param_dtype, ct), math.ceil(C / 128), 128, stream,
           
        scale.reshape(C), bias.reshape(C), mean.reshape(C), var.reshape(C), es, eb, C, float(eps))
    _apply(shape, x_strides, x_dtype, x_dtype, c_strides, ct, x, es, eb, y, stream)


def _norm_backward(x, dy, scale, mean, inv_std, dx, dscale, dbias, shape, x_strides, dy_strides,
                   channel_axis, kind, groups, x_dtype, dy_dtype, param_dtype, stat_dtype,
                   workspace, stream):
    ct, c_strides, (S, GS, cpg, C), spec, sizes = _bwd_plan(
        shape, x_strides, dy_strides, channel_axis, kind, groups, x_dtype, dy_dtype, param_dtype)
    dys, dyxs, kds, kdb, eq_dy, eq_x, eq_b, rws = _carve(workspace, ct, sizes, stream)
    run_reduce(spec, [x, dy], [dys, dyxs], rws, stream)
    count = int(np.prod(shape)) // (S * GS)
    launch(_finalize_bwd_kernel(param_dtype, stat_dtype, ct), math.ceil(S * GS / 128), 128,
           stream, 
        dys, dyxs, scale.reshape(C), mean.reshape(S * GS), inv_std.reshape(S * GS), kds, kdb,
        eq_dy, eq_x, eq_b, S * GS, C, GS, cpg, count)
    csum = _channel_sum_kernel(ct, param_dtype)
    launch(csum, math.ceil(C / 128), 128, stream, kds, dscale.reshape(C), S, C)
    launch(csum, math.ceil(C / 128), 128, stream, kdb, dbias.reshape(C), S, C)
    spec = PointwiseSpec(tuple(shape), (TensorSpec(dy_dtype, tuple(dy_strides)),
                                        TensorSpec(x_dtype, tuple(x_strides)),
                                        TensorSpec(ct, c_strides), TensorSpec(ct, c_strides),
                                        TensorSpec(ct, c_strides)),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (0, 2)),    # 5: eq_dy * dy
                          NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (1, 3)),    # 6: eq_x * x
                          NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (5, 6)),
                          NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (7, 4))),
                         (OutputSpec(8, x_dtype, tuple(x_strides)),))
    run_pointwise(spec, dy, x, eq_dy, eq_x, eq_b, dx, stream=stream)


def batchnorm_backward(x, dy, scale, saved_mean, saved_inv_std, dx, dscale, dbias, shape,
                       x_strides, dy_strides=None, channel_axis=1, x_dtype="float32",
                       dy_dtype="float32", param_dtype="float32", stat_dtype="float32",
                       workspace=None, stream=0):
    """Training BN backward from the saved statistics: dx (x's dtype / strides), dscale, dbias (C)."""
    _norm_backward(x, dy, scale, saved_mean, saved_inv_std, dx, dscale, dbias, shape, x_strides,
                   dy_strides or x_strides, channel_axis, "batch", 1, x_dtype, dy_dtype,
                   param_dtype, stat_dtype, workspace, stream)


def instancenorm_backward(x, dy, scale, mean, inv_std, dx, dscale, dbias, shape, x_strides,
                          dy_strides=None, channel_axis=1, x_dtype="float32", dy_dtype="float32",
                          param_dtype="float32", stat_dtype="float32", workspace=None, stream=0):
    """Instance norm backward: dx, and dscale / dbias summed over samples (C values each)."""
    _norm_backward(x, dy, scale, mean, inv_std, dx, dscale, dbias, shape, x_strides,
                   dy_strides or x_strides, channel_axis, "instance", 1, x_dtype, dy_dtype,
                   param_dtype, stat_dtype, workspace, stream)


def groupnorm_backward(x, dy, scale, mean, inv_std, dx, dscale, dbias, shape, x_strides, groups,
                       dy_strides=None, channel_axis=1, x_dtype="float32", dy_dtype="float32",
                       param_dtype="float32", stat_dtype="float32", workspace=None, stream=0):
    """Group norm backward from the saved (N*groups) statistics: dx, dscale, dbias (C values)."""
    _norm_backward(x, dy, scale, mean, inv_std, dx, dscale, dbias, shape, x_strides,
                   dy_strides or x_strides, channel_axis, "group", groups, x_dtype, dy_dtype,
                   param_dtype, stat_dtype, workspace, stream)
