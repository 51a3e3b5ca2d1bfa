"""Layer / RMS norm forward with TPR threads a row and several rows a block ("sub-block rows").

Versions of the 16-byte forward row kernel (the default stays :func:`ncudnn.kernels.norm.row.row_fwd_vec_kernel`):

- v1 ``TPR`` threads per row (32, 64, 128, 256), ``RPB`` rows per block (block = TPR * RPB threads), each
  thread ``VPT`` vectors of ``vec`` elements (16 bytes); every load of the row is issued before the
  first reduction. TPR 32: reductions are warp shuffles only (no shared memory, no barrier).
  TPR > 32: warp shuffles, then one barrier and a read of the row's TPR / 32 warp partials.
- ``two_pass`` True: mean, then the variance of the centred registers (two reductions);
  False: one reduction of sums shifted by the row's first element (sum e, sum e^2, e = x - x[0]).
- ``preload`` True: scale / bias vectors loaded before the reductions (more bytes in flight, more
  registers); False: after them, just before the store.
- ``rpt`` > 1: a thread normalizes ``rpt`` consecutive rows one after another, scale / bias loaded once before
  them (less L2 traffic for the parameters: each block otherwise re-reads them from the L2).
- ``cs`` True: y stored with ``st.global.cs`` (evict-first; float32 y with 4-element vectors only);
  ``csx`` True: x's vectors loaded with ``ld.global.cs`` (float32 x, 4-element vectors).

Rows past ``nrows`` in the last block (rows % RPB != 0) load the last row again (every thread reaches
the barriers) and store nothing. RMS norm (``center`` False) is one reduction of sum x^2.
"""
import functools
import re

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, dtype_name, storer
from ..primitives.l2hint import ld4_l2, st4_l2
from ..primitives.cshint import ld4cs, st4cs
from ..primitives.warp import warp_sum
from ..pointwise.vector_rows import load_row_vectors

__all__ = ["sub_config", "row_fwd_sub_kernel", "SUB_TPR", "SUB_VALUES_MAX"]

#: threads per row the sub-block kernel takes
SUB_TPR = (32, 64, 128, 256)
#: values a thread keeps in registers (x; with ``preload`` scale / bias as well)
SUB_VALUES_MAX = 32


def sub_config(n, vec, tpr, rpb):
    """(threads per block, VPT vectors a thread) for rows of n elements at ``tpr`` threads a row and
    ``rpb`` rows a block; VPT 0 when the row does not fit in ``SUB_VALUES_MAX`` registers a thread
    or ``tpr`` is not one of ``SUB_TPR`` or the block exceeds 1024 threads."""
    if tpr not in SUB_TPR or rpb < 1 or tpr * rpb > 1024 or n % vec:
        return tpr * rpb, 0
    nv = n // vec
    vpt = -(-nv // tpr)
    return tpr * rpb, (vpt if vpt * vec <= SUB_VALUES_MAX else 0)


def _reduce(exprs, tpr, rpb, arrays):
    """Source lines reducing each expression over the row's ``tpr`` threads into ``red{i}``."""
    w = tpr // 32
    s = [f"    red{i} = warp_sum({e})" for i, e in enumerate(exprs)]
    if w == 1:
        return s
    s.append("    if lane == 0:")
    s += [f"        {arrays[i]}[wid] = red{i}" for i in range(len(exprs))]
    s.append("    cuda.syncthreads()")
    for i in range(len(exprs)):
        s.append(f"    red{i} = " + " + ".join(f"{arrays[i]}[w0 + {j}]" for j in range(w)))
    return s


def _source(n, tpr, rpb, vpt, vec, center, has_bias, write_stats, ct, two_pass, preload, cs, eps_array, rpt=1,
            yhint=False):
    L = po.lit
    zero, one, inv_n, nv = L(0.0, ct), L(1.0, ct), L(1.0 / n, ct), n // vec
    w = tpr // 32
    head = ["def kernel(x, scale, bias, y, s_mean, s_inv, eps_in, nrows):"]
    if w > 1:
        head += [f"    sm{i}{'' if rpt == 1 else f'_{r}'} = cuda.shared.array({rpb * w}, {ct})"
                 for r in range(rpt) for i in range(2)]
    head += ["    tid = cuda.threadIdx.x", f"    t = tid % {tpr}"]
    if w > 1:
        head += ["    lane = tid % 32", "    wid = tid // 32", f"    w0 = (tid // {tpr}) * {w}"]
    head += ["    eps = ld_eps(eps_in, 0)" if eps_array else f"    eps = {ct}(eps_in)"]
    if rpt == 1:
        s = [f"    row = cuda.blockIdx.x * {rpb} + tid // {tpr}"]
    else:       # rpt consecutive rows a thread, interleaved (scale / bias loaded once for all)
        head += [f"    row0 = (cuda.blockIdx.x * {rpb} + tid // {tpr}) * {rpt}"]
        s = ["    row = row0 + RR"]
    if w == 1 and rpt == 1:
        s += ["    if row >= nrows:", "        return", "    ok = True", "    lrow = row"]
    else:
        s += ["    ok = row < nrows", "    lrow = row if ok else nrows - 1"]
    s += [f"    base = lrow * {n}"]
    lines, els, guard = load_row_vectors(vpt, tpr, nv, vec, zero, define_q=rpt == 1)
    if rpt > 1:
        head += [f"    q{k} = t + {k * tpr}" for k in range(vpt)]
        preload = True
    s += lines
    i_loads = len(s)
    flat = [e for g in els for e in g]
    par = []

    def params(ind, k):
        out = [f"{ind}{', '.join('g' + e for e in els[k])} = ldvp(scale, q{k} * {vec})"]
        if has_bias:
            out.append(f"{ind}{', '.join('b' + e for e in els[k])} = ldvp(bias, q{k} * {vec})")
        return out

    for k in range(vpt):
        if guard[k]:
            par.append(f"    if q{k} < {nv}:")
            par += params("        ", k)
            par.append("    else:")
            par += [f"        g{e} = scale[0]" for e in els[k]] + ([f"        b{e} = scale[0]" for e in els[k]]
                                                                  if has_bias else [])
        else:
            par += params("    ", k)
    if preload and rpt == 1:
        s += par
    elif preload:
        head += par
    arrays = ("sm0", "sm1")
    if not center:
        s += _reduce([" + ".join(f"{e} * {e}" for e in flat)], tpr, rpb, arrays)
        s += [f"    mean = {zero}", f"    var = red0 * {inv_n}"] + [f"    d{e} = {e}" for e in flat]
    elif two_pass:
        s += _reduce([" + ".join(flat)], tpr, rpb, arrays[:1])
        s.append(f"    mean = red0 * {inv_n}")
        for k in range(vpt):
            for e in els[k]:
                s.append(f"    d{e} = {e} - mean" + (f" if q{k} < {nv} else {zero}" if guard[k] else ""))
        s += [ln.replace("red0", "red1") for ln in
              _reduce([" + ".join(f"d{e} * d{e}" for e in flat)], tpr, rpb, arrays[1:])]
        s.append(f"    var = red1 * {inv_n}")
    else:
        s.append("    kk = cx(x[base])")
        for k in range(vpt):
            for e in els[k]:
                s.append(f"    e{e} = {e} - kk" + (f" if q{k} < {nv} else {zero}" if guard[k] else ""))
        s += _reduce([" + ".join(f"e{e}" for e in flat), " + ".join(f"e{e} * e{e}" for e in flat)],
                     tpr, rpb, arrays)
        s += [f"    m1 = red0 * {inv_n}", "    mean = kk + m1", f"    var = red1 * {inv_n} - m1 * m1",
              f"    var = var if var > {zero} else {zero}"] + [f"    d{e} = {e} - mean" for e in flat]
    s.append(f"    inv = {one} / math.sqrt(var + eps)")
    if write_stats:
        s.append("    if t == 0 and ok:")
        if center:
            s.append("        sts(s_mean, row, mean)")
        s.append("        sts(s_inv, row, inv)")
    if not preload:
        s += par
    i_stores = len(s)
    for k in range(vpt):
        cond = ["ok"] + ([f"q{k} < {nv}"] if guard[k] else [])
        s.append(f"    if {' and '.join(cond)}:")
        vals = [f"cy(d{e} * inv * cp(g{e})" + (f" + cp(b{e}))" if has_bias else ")") for e in els[k]]
        if cs or yhint:
            s.append(f"        {'sthy' if yhint else 'st4cs'}(y, base + q{k} * {vec}, {', '.join(vals)})")
        else:
            s.append(f"        stvy(y, base + q{k} * {vec}, ({', '.join(vals)}))")
    if rpt == 1:
        return "\n".join(head + s) + "\n"
    # every row's loads, then every row's statistics, then every row's stores (more bytes in flight)
    out = list(head)
    for part in (s[:i_loads], s[i_loads:i_stores], s[i_stores:]):
        for r in range(rpt):
            out += [_ROW_NAMES.sub(lambda m: f"{m.group(0)}_{r}", ln).replace("RR", str(r)) for ln in part]
    return "\n".join(out) + "\n"


#: names of one row's registers in :func:`_source` (suffixed per row when a thread takes several rows)
_ROW_NAMES = re.compile(r"\b(?:row|ok|lrow|base|kk|red\d|m1|mean|var|inv|sm\d|[rde]?v\d+_\d+)\b(?!\()")


@functools.lru_cache(maxsize=None)
def row_fwd_sub_kernel(n, tpr, rpb, vec, center, has_bias, write_stats, x_dt, p_dt, y_dt, s_dt, eps_dt=None,
                       two_pass=True, preload=False, cs=False, csx=False, rpt=1, xhint=None, yhint=None):
    """Forward row kernel, ``tpr`` threads a row, ``rpb`` rows a block (grid: ceil(rows / rpb) blocks of
    ``tpr * rpb`` threads); ``rpt`` > 1: each thread takes ``rpt`` consecutive rows one after another with
    scale / bias loaded once (grid ceil(rows / (rpb * rpt))). Arguments ``(x, scale, bias, y, s_mean, s_inv, eps, nrows)`` as
    :func:`ncudnn.kernels.norm.row.row_fwd_kernel`. Needs n % vec == 0, every buffer aligned to one vector, and
    :func:`sub_config` VPT > 0; ``cs`` (``csx``) needs float32 y (x) and vec 4. ``xhint`` / ``yhint``: an L2
    eviction policy (:data:`ncudnn.kernels.primitives.l2hint.POLICIES`) on x's loads / y's stores (float32, vec 4; not with
    ``csx`` / ``cs``). Returns (dispatcher, source)."""
    from ..pointwise.vector_io import to_compute, to_storage, vector_load, vector_store
    _, vpt = sub_config(n, vec, tpr, rpb)
    if not vpt:
        raise ValueError(f"norm_row_fwd_sub: rows of {n} elements do not fit {tpr} threads x "
                         f"{SUB_VALUES_MAX} values at {vec} elements a vector ({rpb} rows a block)")
    if cs and (dtype_name(y_dt) != "float32" or vec != 4):
        raise ValueError("norm_row_fwd_sub: streaming stores need float32 y and 4-element vectors")
    if csx and (dtype_name(x_dt) != "float32" or vec != 4):
        raise ValueError("norm_row_fwd_sub: streaming loads need float32 x and 4-element vectors")
    if (xhint and (csx or dtype_name(x_dt) != "float32" or vec != 4)) or \
            (yhint and (cs or dtype_name(y_dt) != "float32" or vec != 4)):
        raise ValueError("norm_row_fwd_sub: L2 hints need float32 x / y, 4-element vectors and no .cs on the same access")
    ct = compute_type([x_dt, p_dt, y_dt])
    src = _source(n, tpr, rpb, vpt, vec, center, has_bias, write_stats, ct, two_pass, preload, cs,
                  eps_dt is not None, rpt, bool(yhint))
    from ..runtime.dtypes import loader
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, warp_sum=warp_sum, st4cs=st4cs,
              ldvx=ld4_l2(xhint) if xhint else ld4cs if csx else vector_load(vec), ldvp=vector_load(vec),
              stvy=vector_store(vec), sthy=st4_l2(yhint) if yhint else None,
              cx=to_compute(dtype_name(x_dt), ct), cp=to_compute(dtype_name(p_dt), ct),
              cy=to_storage(dtype_name(y_dt)), sts=storer(s_dt), ld_eps=loader(eps_dt or "float32", ct))
    exec(compile(src, "<norm row-fwd-sub>", "exec"), ns)
    return cuda.jit(ns["kernel"]), src


def sub_dispatcher(*args, **kwargs):
    """:func:`row_fwd_sub_kernel`'s dispatcher alone (for compile checks in a child process)."""
    return row_fwd_sub_kernel(*args, **kwargs)[0]
