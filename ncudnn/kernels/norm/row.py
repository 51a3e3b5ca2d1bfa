"""Layer and RMS norm as row kernels over a (rows, n) view (the trailing, normalized axes packed
row-major; scale / bias hold n values).

Geometry (:func:`row_config`): rows of up to 1024 elements run a warp per row (warp shuffles only,
several rows per block); longer rows one block per row. Up to ``VPT_MAX`` values per thread the row
lives in registers (loaded once, coalesced: element ``t + k * BLOCK``), longer rows take a looped
path (a shifted one-pass sum / sum-of-squares, then a normalize pass).

Forward statistics from registers: warp mode is two-pass (mean, then the centred variance, both warp
shuffles); block mode is ONE block reduction of shifted sums ``sum (x - K)``, ``sum (x - K)^2`` with
K = the row's first element (no cancellation when |mean| >> std), so a block synchronizes twice, not
four times. y is written once. Backward computes dx in the same row kernel (two sums in one
reduction: mean(g) and mean(g * xhat)) and dscale / dbias with a deterministic column reduction
(:mod:`ncudnn.kernels.reduce.strided`). All math in float32 registers (float64 when every tensor is float64); eps is a
run-time value. The kernel factories :func:`row_fwd_kernel` / :func:`row_bwd_kernel` are public
(the engines build steps from them).
"""
import functools
import math

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, dtype_name, loader, placeholder, storer
from ..primitives.warp import block_sum, block_sum2, launch, warp_sum
from ..reduce.strided import ReduceSpec, Term, run_reduce
from ..pointwise.vector_rows import load_row_vectors, vec_ok

__all__ = ["row_config", "vec_ok", "row_fwd_kernel", "row_fwd_vec_kernel", "row_bwd_kernel", "row_norm_forward",
           "row_norm_backward",
           "VPT_MAX", "BWD_VPT_MAX"]

VPT_MAX = 32
#: the backward keeps two values per element (g and xhat): half as many per thread
BWD_VPT_MAX = 16


def row_config(n, block=0, rows_per_block=0, vpt_max=VPT_MAX, vec=1):
    """(threads per block, element stride, VPT, rows per block) for rows of n elements.

    ``block`` 32 is warp-per-row mode (warp shuffles only, ``rows_per_block`` warps per block,
    4 by default; chosen for n <= 1024); larger blocks give one row per block (block reductions),
    chosen with about ``VPT_MAX`` values per thread (4096: 128 threads; few warps per block keep
    the reduction short and many blocks resident; 1024-thread blocks keep at most 16 values, within
    64 registers). VPT 0 selects the looped (long-row) path. ``vec`` > 1 (elements per 16-byte access, see
    :func:`vec_ok`): VPT counts vectors, each thread owns vectors ``t + k * BLOCK`` of the row.
    """
    if not block:
        block = 32 if n <= 32 * vpt_max else \
            min(1024, max(64, 1 << max(0, (math.ceil(n / vpt_max) - 1).bit_length())))
    rpb = (rows_per_block or 4) if block == 32 else 1
    vpt = math.ceil(n / block)
    if block * rpb >= 1024:    # 64 registers a thread at most: 16 values stay in registers
        vpt_max = min(vpt_max, 16)
    if vec > 1:                # registers hold vpt * vec values: the same budget, counted in vectors
        nv = math.ceil(n / (block * vec))
        return block * rpb, block, (nv if nv * vec <= vpt_max else 0), rpb
    return block * rpb, block, (vpt if vpt <= vpt_max else 0), rpb


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

def _row_fwd_source(n, block, vpt, center, has_bias, write_stats, ct, rpb=1, eps_array=False):
    L = po.lit
    one, zero, inv_n = L(1.0, ct), L(0.0, ct), L(1.0 / n, ct)
    s, RS, RS2 = _frame("x, scale, bias, y, s_mean, s_inv, eps_in", block, rpb, ct)
    s += ["    eps = ld_eps(eps_in, 0)" if eps_array else f"    eps = {ct}(eps_in)", f"    base = row * {n}"]
    if vpt:
        for k in range(vpt):
            guard = (k + 1) * block > n
            s.append(f"    c{k} = t + {k * block}")
            s.append(f"    v{k} = ldx(x, base + c{k})" + (f" if c{k} < {n} else {zero}" if guard else ""))
        if center and block == 32:   # warp: two-pass (shuffles are cheap)
            s.append(f"    mean = {RS(' + '.join(f'v{k}' for k in range(vpt)))} * {inv_n}")
            for k in range(vpt):
                guard = (k + 1) * block > n
                s.append(f"    d{k} = v{k} - mean" + (f" if c{k} < {n} else {zero}" if guard else ""))
            s.append(f"    var = {RS(' + '.join(f'd{k} * d{k}' for k in range(vpt)))} * {inv_n}")
        elif center:                 # block: one reduction of sums shifted by the row's first element
            s.append("    kk = ldx(x, base)")
            for k in range(vpt):
                guard = (k + 1) * block > n
                s.append(f"    e{k} = v{k} - kk" + (f" if c{k} < {n} else {zero}" if guard else ""))
            s.append(f"    sa, sb = {RS2(' + '.join(f'e{k}' for k in range(vpt)), ' + '.join(f'e{k} * e{k}' for k in range(vpt)))}")
            s += [f"    m1 = sa * {inv_n}", "    mean = kk + m1", f"    var = sb * {inv_n} - m1 * m1",
                  f"    var = var if var > {zero} else {zero}"]
            s += [f"    d{k} = v{k} - mean" for k in range(vpt)]
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


def _persistent(lines, block, rpb):
    """A row kernel's source lines made persistent: its body runs in a loop over rows ``row, row + G,
    ...`` (G = the grid's rows: gridDim.x times the block's rows) instead of once for the block's row.
    The body must not return; block reductions end with a barrier (their shared memory is reusable)."""
    head = lines[:5]
    body = lines[5:]
    if block == 32:              # the warp-per-row head's early exit becomes the loop test
        assert body[:2] == ["    if row >= nrows:", "        return"], body[:2]
        body = body[2:]
    step = f"cuda.gridDim.x * {rpb}" if block == 32 else "cuda.gridDim.x"
    return head + ["    while row < nrows:"] + ["    " + ln for ln in body] + [f"        row += {step}"]


def _row_fwd_vec_source(n, block, vpt, vec, center, has_bias, write_stats, ct, rpb=1, eps_array=False,
                        persist=False):
    """Register path with ``vec`` elements per access: thread t owns vectors ``q = t + k * block``
    (elements ``q * vec ..``), loaded / stored with one 16-byte access each; statistics as the scalar
    path (warp: two-pass; block: one reduction of sums shifted by the row's first element).
    ``persist``: the block loops over rows (:func:`_persistent`), the grid any size; 2: the next row's
    loads issued before this row's statistics (:func:`_prefetched`)."""
    L = po.lit
    zero, one, inv_n, nv = L(0.0, ct), L(1.0, ct), L(1.0 / n, ct), n // vec
    s, RS, RS2 = _frame("x, scale, bias, y, s_mean, s_inv, eps_in", block, rpb, ct)
    s += ["    eps = ld_eps(eps_in, 0)" if eps_array else f"    eps = {ct}(eps_in)", f"    base = row * {n}"]
    lines, els, guard = load_row_vectors(vpt, block, nv, vec, zero)
    s += lines
    flat = [e for g in els for e in g]
    if center and block == 32:
        s.append(f"    mean = {RS(' + '.join(flat))} * {inv_n}")
        for k in range(vpt):
            for e in els[k]:
                s.append(f"    d{e} = {e} - mean" + (f" if q{k} < {nv} else {zero}" if guard[k] else ""))
        s.append(f"    var = {RS(' + '.join(f'd{e} * d{e}' for e in flat))} * {inv_n}")
    elif center:
        s.append("    kk = cx(x[base])")
        for k in range(vpt):
            for e in els[k]:
                s.append(f"    e{e} = {e} - kk" + (f" if q{k} < {nv} else {zero}" if guard[k] else ""))
        s.append(f"    sa, sb = {RS2(' + '.join(f'e{e}' for e in flat), ' + '.join(f'e{e} * e{e}' for e in flat))}")
        s += [f"    m1 = sa * {inv_n}", "    mean = kk + m1", f"    var = sb * {inv_n} - m1 * m1",
              f"    var = var if var > {zero} else {zero}"]
        s += [f"    d{e} = {e} - mean" for e in flat]
    else:
        s.append(f"    mean = {zero}")
        s += [f"    d{e} = {e}" for e in flat]
        s.append(f"    var = {RS(' + '.join(f'd{e} * d{e}' for e in flat))} * {inv_n}")
    s.append(f"    inv = {one} / math.sqrt(var + eps)")
    if write_stats:
        s.append("    if t == 0:")
        if center:
            s.append("        sts(s_mean, row, mean)")
        s.append("        sts(s_inv, row, inv)")
    for k in range(vpt):
        ind = "    "
        if guard[k]:
            s.append(f"    if q{k} < {nv}:")
            ind = "        "
        s.append(f"{ind}{', '.join('g' + e for e in els[k])} = ldvp(scale, q{k} * {vec})")
        if has_bias:
            s.append(f"{ind}{', '.join('b' + e for e in els[k])} = ldvp(bias, q{k} * {vec})")
        vals = [f"cy(d{e} * inv * cp(g{e})" + (f" + cp(b{e}))" if has_bias else ")") for e in els[k]]
        s.append(f"{ind}stvy(y, base + q{k} * {vec}, ({', '.join(vals)}))")
    if persist == 2:
        s = _prefetched(s, lines, els, block, rpb, n, zero)
    elif persist:
        s = _persistent(s, block, rpb)
    return "\n".join(s) + "\n"


def _prefetched(lines, loads, els, block, rpb, n, zero):
    """:func:`_persistent` with the next row's vector loads issued before this row's statistics: the
    row's registers ``v*`` come from the previous iteration's ``nv*`` (``loads``: the load lines of
    ``lines``; the first row's loads before the loop)."""
    import re
    head = lines[:5]
    i0 = lines.index(loads[0])
    pre = [ln for ln in lines[5:i0] if ln not in ("    if row >= nrows:", "        return")]
    rest = lines[i0 + len(loads):]
    qdefs = [ln for ln in loads if re.match(r"    q\d+ = ", ln)]
    body = [ln for ln in loads if ln not in qdefs]
    flat = [e for g in els for e in g]
    ren = lambda ln: re.sub(r"\b(r?v\d+_\d+)\b", r"n\1", ln).replace("base + ", "nbase + ")  # noqa: E731
    step = f"cuda.gridDim.x * {rpb}" if block == 32 else "cuda.gridDim.x"
    out = head + qdefs + pre
    out += ["    if row < nrows:"] + ["    " + ln for ln in body]
    out += ["    else:"] + [f"        {e} = {zero}" for e in flat]
    out += ["    while row < nrows:", f"        nrow = row + {step}", f"        nbase = nrow * {n}",
            "        if nrow < nrows:"] + ["        " + ren(ln) for ln in body]
    out += ["        else:"] + [f"            n{e} = {zero}" for e in flat]
    out += ["    " + ln for ln in rest]
    out += [f"        {e} = n{e}" for e in flat] + ["        row = nrow", "        base = nbase"]
    return out


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
def row_fwd_kernel(n, block, vpt, center, has_bias, write_stats, x_dt, p_dt, y_dt, s_dt, rpb=1, eps_dt=None):
    """Forward row kernel (see :func:`row_config` for block / vpt / rpb); ``center`` False is RMS norm.
    Arguments ``(x, scale, bias, y, s_mean, s_inv, eps, nrows)``; ``eps`` a float64 by value, or a
    one-element ``eps_dt`` device array when ``eps_dt`` is given. Returns (dispatcher, source)."""
    ct = compute_type([x_dt, p_dt, y_dt])
    src = _row_fwd_source(n, block, vpt, center, has_bias, write_stats, ct, rpb, eps_dt is not None)
    return _jit_source(src, "row-fwd", ldx=loader(x_dt, ct), lds=loader(p_dt, ct),
                       sty=storer(y_dt), sts=storer(s_dt), ld_eps=loader(eps_dt or "float32", ct)), src


@functools.lru_cache(maxsize=None)
def row_fwd_vec_kernel(n, block, vpt, vec, center, has_bias, write_stats, x_dt, p_dt, y_dt, s_dt, rpb=1,
                       eps_dt=None, persist=False):
    """Forward row kernel reading / writing ``vec`` elements per access (``vpt`` vectors a thread from
    ``row_config(..., vec=vec)``, n % vec == 0, every buffer aligned to one vector). Same arguments
    as :func:`row_fwd_kernel`; ``persist``: each block loops over rows (grid of any size). Returns
    (dispatcher, source)."""
    from ..pointwise.vector_io import to_compute, to_storage, vector_load, vector_store
    ct = compute_type([x_dt, p_dt, y_dt])
    src = _row_fwd_vec_source(n, block, vpt, vec, center, has_bias, write_stats, ct, rpb, eps_dt is not None, persist)
    return _jit_source(src, "row-fwd-vec", ldvx=vector_load(vec), ldvp=vector_load(vec), stvy=vector_store(vec),
                       cx=to_compute(dtype_name(x_dt), ct), cp=to_compute(dtype_name(p_dt), ct),
                       cy=to_storage(dtype_name(y_dt)), sts=storer(s_dt),
                       ld_eps=loader(eps_dt or "float32", ct)), src


@functools.lru_cache(maxsize=None)
def row_bwd_kernel(n, block, vpt, center, x_dt, dy_dt, p_dt, dx_dt, s_dt, rpb=1):
    """Backward row kernel (dx only). Arguments ``(x, dy, scale, s_mean, s_inv, dx, nrows)``."""
    ct = compute_type([x_dt, dy_dt, p_dt, dx_dt])
    src = _row_bwd_source(n, block, vpt, center, ct, rpb)
    return _jit_source(src, "row-bwd", ldx=loader(x_dt, ct), ldd=loader(dy_dt, ct),
                       lds=loader(p_dt, ct), lds_stat=loader(s_dt, ct), stx=storer(dx_dt)), src


def _dummy(dtype="float32"):
    return placeholder(dtype)


def row_norm_forward(x, scale, bias, y, mean, inv_std, rows, n, eps, *, rms=False,
                     x_dtype="float32", param_dtype="float32", y_dtype="float32",
                     stat_dtype="float32", block=0, vpt_max=VPT_MAX, rows_per_block=0, vec=1, stream=0):
    """Layer norm (``rms=False``) or RMS norm (``rms=True``) of each row of a (rows, n) tensor.

    x, y: device arrays with rows * n elements, row-major; scale (and bias, or None) n elements;
    mean (layer norm only) and inv_std: rows elements each, or None to skip writing statistics
    (inference). ``block`` / ``vpt_max`` / ``rows_per_block`` / ``vec``: see :func:`row_config`
    (``vec`` > 1 needs :func:`vec_ok` and buffers aligned to one vector; rows too long for registers
    take the scalar looped path). y = scale * (x - mean) * inv_std + bias; RMS: y = scale * x * inv_rms (+ bias).
    """
    threads, blk, vpt, rpb = row_config(n, block, rows_per_block, vpt_max=vpt_max, vec=vec)
    write = inv_std is not None
    if write and not rms and mean is None:
        raise ValueError("layer norm writes mean and inv_std together: pass a mean buffer (rows elements)")
    if vec > 1 and vpt:
        kern, _ = row_fwd_vec_kernel(n, blk, vpt, vec, not rms, bias is not None, write, x_dtype,
                                     param_dtype, y_dtype, stat_dtype, rpb)
    else:
        threads, blk, vpt, rpb = row_config(n, block, rows_per_block, vpt_max=vpt_max)
        kern, _ = row_fwd_kernel(n, blk, vpt, not rms, bias is not None, write, x_dtype,
                                 param_dtype, y_dtype, stat_dtype, rpb)
    d = _dummy(stat_dtype)
    launch(kern, math.ceil(rows / rpb), threads, stream,
           x.reshape(x.size), scale.reshape(scale.size),
           bias.reshape(bias.size) if bias is not None else _dummy(param_dtype),
           y.reshape(y.size), mean.reshape(mean.size) if mean is not None else d,
           inv_std.reshape(inv_std.size) if write else d, float(eps), rows)


def row_norm_backward(x, dy, scale, mean, inv_std, dx, dscale, dbias, rows, n, *, rms=False,
                      x_dtype="float32", dy_dtype="float32", param_dtype="float32",
                      dx_dtype="float32", stat_dtype="float32", block=0, vpt_max=BWD_VPT_MAX, workspace=None,
                      stream=0):
    """Backward of :func:`row_norm_forward` from its saved statistics.

    dx (rows * n); dscale and dbias (n each; dbias may be None, e.g. RMS norm without bias):
    dscale = sum_rows dy * xhat, dbias = sum_rows dy (deterministic column reduction).
    """
    threads, blk, vpt, rpb = row_config(n, block, vpt_max=vpt_max)
    kern, _ = row_bwd_kernel(n, blk, vpt, not rms, x_dtype, dy_dtype, param_dtype, dx_dtype,
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
