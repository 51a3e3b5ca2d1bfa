"""Normalizations: layer / RMS norm (row kernels), batch / instance norm (stats + finalize + apply).

**Layer and RMS norm** normalize each row of a (rows, n) view (the trailing, normalized axes packed
row-major; scale / bias hold n values). One block per row; for n <= BLOCK * VPT_MAX the row lives
in registers (``VPT`` values per thread, loaded once, coalesced), mean and variance come from two
block reductions over registers (two-pass, no cancellation) and y is written once. Longer rows
take a looped path (a shifted one-pass sum / sum-of-squares, then a normalize pass). Backward
computes dx in the same row kernel (two block sums: mean(g) and mean(g * xhat)) and dscale /
dbias with a deterministic column reduction (:mod:`.reduce`).

**Batch, instance and group norm** work for any layout (NCHW, NHWC, any strides): per-group sums
(:mod:`.reduce`; a statistics group is a channel for BN, a (sample, channel) pair for IN, a
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

from . import pointwise_ops as po
from .dtypes import compute_type, loader, placeholder, storer
from .pointwise import NodeSpec, OutputSpec, PointwiseSpec, TensorSpec, run_pointwise
from .primitives import block_sum, block_sum2, launch, warp_sum
from .reduce import ReduceSpec, Term, run_reduce, workspace_elems as _reduce_ws
from ..types import cudnnPointwiseMode_t as PM

__all__ = ["row_norm_forward", "row_norm_backward", "batchnorm_forward_training",
           "batchnorm_inference", "batchnorm_backward", "instancenorm_forward",
           "instancenorm_backward", "groupnorm_forward", "groupnorm_backward", "row_config",
           "norm_workspace_elems"]

VPT_MAX = 16


def row_config(n, block=0, rows_per_block=0):
    """(threads per block, element stride, VPT, rows per block) for rows of n elements.

    ``block`` 32 is warp-per-row mode (warp shuffles only, ``rows_per_block`` warps per block,
    4 by default; chosen for n <= 256); larger blocks give one row per block (block reductions).
    VPT 0 selects the looped (long-row) path.
    """
    if not block:
        block = 32 if n <= 256 else \
            min(1024, max(64, 1 << max(0, (math.ceil(n / 8) - 1).bit_length())))
    rpb = (rows_per_block or 4) if block == 32 else 1
    vpt = math.ceil(n / block)
    return block * rpb, block, (vpt if vpt <= VPT_MAX else 0), rpb


def _frame(args, block, rpb, ct):
    """Kernel head (row, lane t) and the reduction spellings for block or warp-per-row mode."""
    head = [f"def kernel({args}, nrows):",
            f"    sm = cuda.shared.array(32, {ct})",
            f"    sm2 = cuda.shared.array(32, {ct})"]
    if block == 32:
        head += [f"    row = cuda.blockIdx.x * {rpb} + cuda.threadIdx.x // 32",
                 "    t = cuda.threadIdx.x % 32",
                 "    if row >= nrows:",
                 "        return"]
        return head, (lambda e: f"warp_sum({e})"), (lambda a, b: f"warp_sum({a}), warp_sum({b})")
    head += ["    row = cuda.blockIdx.x", "    t = cuda.threadIdx.x"]
    return head, (lambda e: f"block_sum({e}, sm)"), (lambda a, b: f"block_sum2({a}, {b}, sm, sm2)")


# --------------------------------------------------------------------------------------------
# row kernels (layer / RMS norm)

def _row_fwd_source(n, block, vpt, center, has_bias, write_stats, ct, rpb=1):
    L = po.lit
    one, zero, inv_n = L(1.0, ct), L(0.0, ct), L(1.0 / n, ct)
    s, RS, RS2 = _frame("x, scale, bias, y, s_mean, s_inv, eps_in", block, rpb, ct)
    s += [f"    eps = {ct}(eps_in)", f"    base = row * {n}"]
    if vpt:
        for k in range(vpt):
            guard = (k + 1) * block > n
            s.append(f"    c{k} = t + {k * block}")
            s.append(f"    v{k} = ldx(x, base + c{k})" + (f" if c{k} < {n} else {zero}" if guard else ""))
        if center:
            s.append(f"    mean = {RS(' + '.join(f'v{k}' for k in range(vpt)))} * {inv_n}")
            for k in range(vpt):
                guard = (k + 1) * block > n
                s.append(f"    d{k} = v{k} - mean" + (f" if c{k} < {n} else {zero}" if guard else ""))
        else:
            s.append(f"    mean = {zero}")
            s += [f"    d{k} = v{k}" for k in range(vpt)]
        s.append(f"    var = {RS(' + '.join(f'd{k} * d{k}' for k in range(vpt)))} * {inv_n}")
    else:
        s += [f"    shift = ldx(x, base)" if center else f"    shift = {zero}",
              f"    a = {zero}", f"    b = {zero}", "    c = t",
              f"    while c < {n}:",
              "        v = ldx(x, base + c) - shift",
              "        a += v", "        b += v * v", f"        c += {block}",
              f"    a, b = {RS2('a', 'b')}"]
        if center:
            s += [f"    m = a * {inv_n}", "    mean = shift + m", f"    var = b * {inv_n} - m * m",
                  f"    var = var if var > {zero} else {zero}"]
        else:
            s += [f"    mean = {zero}", f"    var = b * {inv_n}"]
    s.append(f"    inv = {one} / math.sqrt(var + eps)")
    if write_stats:
        s.append("    if t == 0:")
        if center:
            s.append("        sts(s_mean, row, mean)")
        s.append("        sts(s_inv, row, inv)")
    bias_t = " + lds(bias, {c})" if has_bias else ""
    if vpt:
        for k in range(vpt):
            guard = (k + 1) * block > n
            ind = "    "
            if guard:
                s.append(f"    if c{k} < {n}:")
                ind = "        "
            s.append(f"{ind}sty(y, base + c{k}, d{k} * inv * lds(scale, c{k})"
                     + bias_t.format(c=f"c{k}") + ")")
    else:
        s += ["    c = t", f"    while c < {n}:",
              "        sty(y, base + c, (ldx(x, base + c) - mean) * inv * lds(scale, c)"
              + bias_t.format(c="c") + ")",
              f"        c += {block}"]
    return "\n".join(s) + "\n"


def _row_bwd_source(n, block, vpt, center, ct, rpb=1):
    L = po.lit
    zero, inv_n = L(0.0, ct), L(1.0 / n, ct)
    s, RS, RS2 = _frame("x, dy, scale, s_mean, s_inv, dx", block, rpb, ct)
    s += [f"    base = row * {n}",
          "    mean = lds_stat(s_mean, row)" if center else f"    mean = {zero}",
          "    inv = lds_stat(s_inv, row)"]
    if vpt:
        for k in range(vpt):
            guard = (k + 1) * block > n
            s.append(f"    c{k} = t + {k * block}")
            if guard:
                s.append(f"    ok{k} = c{k} < {n}")
                s.append(f"    h{k} = (ldx(x, base + c{k}) - mean) * inv if ok{k} else {zero}")
                s.append(f"    g{k} = ldd(dy, base + c{k}) * lds(scale, c{k}) if ok{k} else {zero}")
            else:
                s.append(f"    h{k} = (ldx(x, base + c{k}) - mean) * inv")
                s.append(f"    g{k} = ldd(dy, base + c{k}) * lds(scale, c{k})")
        sum_g = " + ".join(f"g{k}" for k in range(vpt))
        sum_gh = " + ".join(f"g{k} * h{k}" for k in range(vpt))
        s.append(f"    a, b = {RS2(sum_g, sum_gh)}")
    else:
        s += [f"    a = {zero}", f"    b = {zero}", "    c = t", f"    while c < {n}:",
              "        h = (ldx(x, base + c) - mean) * inv",
              "        g = ldd(dy, base + c) * lds(scale, c)",
              "        a += g", "        b += g * h", f"        c += {block}",
              f"    a, b = {RS2('a', 'b')}"]
    s.append(f"    a = a * {inv_n}" if center else f"    a = {zero}")
    s.append(f"    b = b * {inv_n}")
    if vpt:
        for k in range(vpt):
            guard = (k + 1) * block > n
            ind = "    "
            if guard:
                s.append(f"    if ok{k}:")
                ind = "        "
            s.append(f"{ind}stx(dx, base + c{k}, inv * (g{k} - a - h{k} * b))")
    else:
        s += ["    c = t", f"    while c < {n}:",
              "        h = (ldx(x, base + c) - mean) * inv",
              "        g = ldd(dy, base + c) * lds(scale, c)",
              "        stx(dx, base + c, inv * (g - a - h * b))", f"        c += {block}"]
    return "\n".join(s) + "\n"


def _jit_source(source, name, **names):
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, block_sum=block_sum,
              block_sum2=block_sum2, warp_sum=warp_sum, **names)
    exec(compile(source, f"<norm {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


@functools.lru_cache(maxsize=None)
def _row_fwd_kernel(n, block, vpt, center, has_bias, write_stats, x_dt, p_dt, y_dt, s_dt, rpb=1):
    ct = compute_type([x_dt, p_dt, y_dt])
    src = _row_fwd_source(n, block, vpt, center, has_bias, write_stats, ct, rpb)
    return _jit_source(src, "row-fwd", ldx=loader(x_dt, ct), lds=loader(p_dt, ct),
                       sty=storer(y_dt), sts=storer(s_dt)), src


@functools.lru_cache(maxsize=None)
def _row_bwd_kernel(n, block, vpt, center, x_dt, dy_dt, p_dt, dx_dt, s_dt, rpb=1):
    ct = compute_type([x_dt, dy_dt, p_dt, dx_dt])
    src = _row_bwd_source(n, block, vpt, center, ct, rpb)
    return _jit_source(src, "row-bwd", ldx=loader(x_dt, ct), ldd=loader(dy_dt, ct),
                       lds=loader(p_dt, ct), lds_stat=loader(s_dt, ct), stx=storer(dx_dt)), src


def _dummy(dtype="float32"):
    return placeholder(dtype)


def row_norm_forward(x, scale, bias, y, mean, inv_std, rows, n, eps, *, rms=False,
                     x_dtype="float32", param_dtype="float32", y_dtype="float32",
                     stat_dtype="float32", block=0, stream=0):
    """Layer norm (``rms=False``) or RMS norm (``rms=True``) of each row of a (rows, n) tensor.

    x, y: device arrays with rows * n elements, row-major; scale (and bias, or None) n elements;
    mean (layer norm only) and inv_std: rows elements each, or None to skip writing statistics
    (inference). y = scale * (x - mean) * inv_std + bias; RMS: y = scale * x * inv_rms (+ bias).
    """
    threads, blk, vpt, rpb = row_config(n, block)
    write = inv_std is not None
    kern, _ = _row_fwd_kernel(n, blk, vpt, not rms, bias is not None, write, x_dtype,
                              param_dtype, y_dtype, stat_dtype, rpb)
    d = _dummy(stat_dtype)
    launch(kern, math.ceil(rows / rpb), threads, stream,
           x.reshape(x.size), scale.reshape(scale.size),
           bias.reshape(bias.size) if bias is not None else _dummy(param_dtype),
           y.reshape(y.size), mean.reshape(mean.size) if mean is not None else d,
           inv_std.reshape(inv_std.size) if write else d, float(eps), rows)


def row_norm_backward(x, dy, scale, mean, inv_std, dx, dscale, dbias, rows, n, *, rms=False,
                      x_dtype="float32", dy_dtype="float32", param_dtype="float32",
                      dx_dtype="float32", stat_dtype="float32", block=0, workspace=None,
                      stream=0):
    """Backward of :func:`row_norm_forward` from its saved statistics.

    dx (rows * n); dscale and dbias (n each; dbias may be None, e.g. RMS norm without bias):
    dscale = sum_rows dy * xhat, dbias = sum_rows dy (deterministic column reduction).
    """
    threads, blk, vpt, rpb = row_config(n, block)
    kern, _ = _row_bwd_kernel(n, blk, vpt, not rms, x_dtype, dy_dtype, param_dtype, dx_dtype,
                              stat_dtype, rpb)
    launch(kern, math.ceil(rows / rpb), threads, stream,
           x.reshape(x.size), dy.reshape(dy.size), scale.reshape(scale.size),
           mean.reshape(mean.size) if not rms else _dummy(stat_dtype),
           inv_std.reshape(inv_std.size), dx.reshape(dx.size), rows)
    shape, full, per_row = (rows, n), (n, 1), (1, 0)
    if rms:
        inputs = ((x_dtype, full), (dy_dtype, full), (stat_dtype, per_row))
        pre, arrays = "v1 * (v0 * v2)", [x, dy, inv_std]
    else:
        inputs = ((x_dtype, full), (dy_dtype, full), (stat_dtype, per_row), (stat_dtype, per_row))
        pre, arrays = "v1 * ((v0 - v2) * v3)", [x, dy, mean, inv_std]
    terms, outs = [Term(pre, "sum")], [dscale]
    if dbias is not None:
        terms.append(Term("v1", "sum"))
        outs.append(dbias)
    spec = ReduceSpec(shape, inputs, (1, n), tuple(terms),
                      tuple((param_dtype, (0, 1)) for _ in terms))
    run_reduce(spec, arrays, outs, workspace, stream)


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


def _register_compile_cases():
    try:
        from .compile_check import register_compile_case
    except ImportError:
        return
    from .dtypes import array_sig as a
    for n, dt in ((4096, "bfloat16"), (768, "float16"), (8192, "float32"), (32768, "float32"),
                  (128, "bfloat16")):
        threads, blk, vpt, rpb = row_config(n)
        budget = min(255, 65536 // threads)
        for rms in (False, True):
            tag = f"{'rms' if rms else 'layer'}norm_{n}_{dt}"
            k, _ = _row_fwd_kernel(n, blk, vpt, not rms, True, True, dt, "float32", dt, "float32",
                                   rpb)
            register_compile_case(f"{tag}_fwd", k, f"void({a(dt)}, {a('float32')}, {a('float32')}, "
                                  f"{a(dt)}, {a('float32')}, {a('float32')}, float64, int64)",
                                  max_registers=budget)
            k, _ = _row_bwd_kernel(n, blk, vpt, not rms, dt, dt, "float32", dt, "float32", rpb)
            register_compile_case(f"{tag}_bwd", k, f"void({a(dt)}, {a(dt)}, {a('float32')}, "
                                  f"{a('float32')}, {a('float32')}, {a(dt)}, int64)",
                                  max_registers=budget)
    f = a("float32")
    register_compile_case("bn_finalize_fwd", _finalize_fwd_kernel("float32", "float32", "float32",
                                                                  True, True),
                          f"void({', '.join([f] * 10)}, int64, int64, int64, int64, int64, float64, "
                          "float64)",
                          max_registers=128)
    register_compile_case("bn_finalize_bwd", _finalize_bwd_kernel("float32", "float32", "float32"),
                          f"void({', '.join([f] * 10)}, int64, int64, int64, int64, int64)",
                          max_registers=128)
    register_compile_case("bn_channel_sum", _channel_sum_kernel("float32", "float32"),
                          f"void({f}, {f}, int64, int64)", max_registers=128)
    register_compile_case("bn_inference_coeff", _inference_coeff_kernel("float32", "float32"),
                          f"void({', '.join([f] * 6)}, int64, float64)", max_registers=128)


_register_compile_cases()
