"""Source generation of the strided reductions: the Python text of the row, column and vector row kernels
(``kernel(x0.., y0.., ws)``) and of the split combine passes (``combine(ws, y0..)``) for a
:class:`~ncudnn.kernels.reduce.spec.ReduceSpec` and its launch shape. The text calls ``ld{i}`` / ``st{j}``
(scalar loads / stores), ``ldv{i}`` / ``cin{i}`` (vector loads, widening), ``shfl_xor`` and the op
literals of :mod:`ncudnn.kernels.pointwise.ops`; :class:`~ncudnn.kernels.reduce.strided.ReduceKernel`
binds those names.
"""
import math

from ..pointwise import ops as po
from .spec import COMBINE, INIT, bcombine_threads, layout, numel, two_level

__all__ = ["row_source", "col_source", "combine_source", "vrow_source", "bcombine_source"]


# --------------------------------------------------------------------------------------------
# source generation

def _decompose(dims, flat, prefix, which):
    """Lines: coordinates of flat index over ``dims`` and the offset of each tensor."""
    lines = [f"{prefix}r = {flat}"]
    coords = []
    for k in range(len(dims) - 1, 0, -1):
        lines.append(f"{prefix}c{k} = {prefix}r % {dims[k][0]}")
        lines.append(f"{prefix}r = {prefix}r // {dims[k][0]}")
        coords.append((k, f"{prefix}c{k}"))
    if dims:
        coords.append((0, f"{prefix}r"))
    offs = []
    for t in range(len(dims[0][which]) if dims else 0):
        terms = [f"{c} * {dims[k][which][t]}" for k, c in coords if dims[k][which][t] != 0]
        offs.append(" + ".join(terms) if terms else "0")
    return lines, offs


def _load_block(spec, kx, rdims, ridx, u, ctype):
    """Lines loading element ``ridx`` of every input and applying every term's pre-expression."""
    dec, roffs = _decompose(rdims, ridx, f"q{u}_", 1) if rdims else ([], ["0"] * len(spec.inputs))
    lines = list(dec)
    for i in range(len(spec.inputs)):
        lines.append(f"v{i}_{u} = ld{i}(x{i}, {kx[i]} + {roffs[i]})")
    pres = []
    for j, t in enumerate(spec.terms):
        pre = t.pre
        for i in reversed(range(len(spec.inputs))):
            pre = pre.replace(f"v{i}", f"v{i}_{u}")
        pres.append(f"p{j}_{u} = {ctype}({pre})")
    return lines, pres


def _combine(t, a, b):
    return COMBINE[t.combine].format(a=a, b=b)


def _final_lines(spec, ctype, n_red, store_to, indent):
    lines = []
    for j, t in enumerate(spec.terms):
        f = t.final.replace("cnt", po.lit(n_red, ctype)).replace("acc", f"a{j}")
        lines.append(store_to(j, f"{ctype}({f})"))
    return [" " * indent + ln for ln in lines]


def row_source(spec, kept, red, block, split, ctype, unroll=4):
    n_out, n_red = numel(kept), numel(red)
    nt, ni = len(spec.terms), len(spec.inputs)
    chunk = math.ceil(n_red / split)
    L = [f"def kernel({', '.join(f'x{i}' for i in range(ni))}, "
         f"{', '.join(f'y{j}' for j in range(nt))}, ws):",
         f"    sm = cuda.shared.array(({nt}, 32), {ctype})",
         "    o = cuda.blockIdx.x",
         "    s = cuda.blockIdx.y",
         "    tid = cuda.threadIdx.x"]
    dec, koffs = _decompose(kept, "o", "k_", 1) if kept else ([], ["0"] * ni)
    _, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
    L += ["    " + ln for ln in dec]
    L += [f"    kx{i} = {koffs[i]}" for i in range(ni)]
    L += [f"    a{j} = {po.lit(t.init_value(), ctype)}" for j, t in enumerate(spec.terms)]
    if two_level(red, block):
        # outer reduced dims walked one by one (their index math once per inner row), threads
        # over the innermost reduced dim: no per-element division (e.g. GENSTATS over N and HW)
        inner, outer = red[-1:], red[:-1]
        n_q = n_red // inner[0][0]
        chunk_q = math.ceil(n_q / split)
        L += [f"    qi = s * {chunk_q}", f"    qhi = min(qi + {chunk_q}, {n_q})", "    while qi < qhi:"]
        dec, qoffs = _decompose(outer, "qi", "qq_", 1)
        L += ["        " + ln for ln in dec]
        L += [f"        bx{i} = kx{i} + {qoffs[i]}" for i in range(ni)]
        L += ["        r = tid"]
        L += ["    " + ln for ln in _row_loops(spec, [f"bx{i}" for i in range(ni)], inner, block,
                                                 str(inner[0][0]), ctype, unroll)]
        L.append("        qi += 1")
    else:
        L += [f"    lo = s * {chunk}", f"    hi = min(lo + {chunk}, {n_red})", "    r = lo + tid"]
        L += _row_loops(spec, [f"kx{i}" for i in range(ni)], red, block, "hi", ctype, unroll)
    # warp butterfly then warps through shared memory, fixed order
    for j, t in enumerate(spec.terms):
        for m in (16, 8, 4, 2, 1):   # the shuffle once per lane, outside any short circuit
            L.append(f"    h{j} = shfl_xor(a{j}, {m})")
            L.append(f"    a{j} = {_combine(t, f'a{j}', f'h{j}')}")
    L.append("    if tid % 32 == 0:")
    L += [f"        sm[{j}, tid // 32] = a{j}" for j in range(nt)]
    L.append("    cuda.syncthreads()")
    L.append("    if tid == 0:")
    L += [f"        a{j} = sm[{j}, 0]" for j in range(nt)]
    if block > 32:
        L.append(f"        for w in range(1, {block // 32}):")
        L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w]')}"
              for j, t in enumerate(spec.terms)]
    if split == 1:
        L += ["        " + ln for ln in _decompose(kept, "o", "ko_", 2)[0]] if kept else []
        L += _final_lines(spec, ctype, n_red, lambda j, v: f"st{j}(y{j}, {ooffs[j]}, {v})", 8)
    else:
        L += [f"        ws[({j} * {split} + s) * {n_out} + o] = a{j}" for j in range(nt)]
    return "\n".join(L) + "\n"


def _row_loops(spec, kx, red, block, hi, ctype, unroll):
    """Lines (indent 4) of the row kernel's strided loop over ``r`` up to ``hi``: UNROLL loads in
    flight, then the combines in a fixed order, then a plain tail loop."""
    L = [f"    while r + {(unroll - 1) * block} < {hi}:"]
    loads, pres = [], []
    for u in range(unroll):
        ld, pr = _load_block(spec, kx, red, f"r + {u * block}" if u else "r", u, ctype)
        loads += ld
        pres += pr
    L += ["        " + ln for ln in loads + pres]
    for u in range(unroll):
        L += [f"        a{j} = {_combine(t, f'a{j}', f'p{j}_{u}')}" for j, t in enumerate(spec.terms)]
    L.append(f"        r += {unroll * block}")
    L.append(f"    while r < {hi}:")
    ld, pr = _load_block(spec, kx, red, "r", 0, ctype)
    L += ["        " + ln for ln in ld + pr]
    L += [f"        a{j} = {_combine(t, f'a{j}', f'p{j}_0')}" for j, t in enumerate(spec.terms)]
    L.append(f"        r += {block}")
    return L


def col_source(spec, kept, red, by, split, ctype, unroll=4):
    n_out, n_red = numel(kept), numel(red)
    nt, ni = len(spec.terms), len(spec.inputs)
    chunk = math.ceil(n_red / split)
    L = [f"def kernel({', '.join(f'x{i}' for i in range(ni))}, "
         f"{', '.join(f'y{j}' for j in range(nt))}, ws):",
         f"    sm = cuda.shared.array(({nt}, {by}, 33), {ctype})",
         "    tx = cuda.threadIdx.x",
         "    ty = cuda.threadIdx.y",
         "    o = cuda.blockIdx.x * 32 + tx",
         "    s = cuda.blockIdx.y"]
    L += [f"    a{j} = {po.lit(t.init_value(), ctype)}" for j, t in enumerate(spec.terms)]
    L.append(f"    if o < {n_out}:")
    dec, koffs = _decompose(kept, "o", "k_", 1)
    L += ["        " + ln for ln in dec]
    L += [f"        kx{i} = {koffs[i]}" for i in range(ni)]
    L += [f"        r = s * {chunk} + ty", f"        hi = min(s * {chunk} + {chunk}, {n_red})"]
    # UNROLL loads in flight per thread, combined in the order of the plain loop (same bits)
    kx = [f"kx{i}" for i in range(ni)]
    L.append(f"        while r + {(unroll - 1) * by} < hi:")
    loads, pres = [], []
    for u in range(unroll):
        ld, pr = _load_block(spec, kx, red, f"r + {u * by}" if u else "r", u, ctype)
        loads += ld
        pres += pr
    L += ["            " + ln for ln in loads + pres]
    for u in range(unroll):
        L += [f"            a{j} = {_combine(t, f'a{j}', f'p{j}_{u}')}" for j, t in enumerate(spec.terms)]
    L.append(f"            r += {unroll * by}")
    L.append("        while r < hi:")
    ld, pr = _load_block(spec, kx, red, "r", 0, ctype)
    L += ["            " + ln for ln in ld + pr]
    L += [f"            a{j} = {_combine(t, f'a{j}', f'p{j}_0')}" for j, t in enumerate(spec.terms)]
    L.append(f"            r += {by}")
    L += [f"    sm[{j}, ty, tx] = a{j}" for j in range(nt)]
    L.append("    cuda.syncthreads()")
    L.append(f"    if ty == 0 and o < {n_out}:")
    L.append(f"        for w in range(1, {by}):")
    L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w, tx]')}" for j, t in enumerate(spec.terms)]
    if split == 1:
        d2, ooffs = _decompose(kept, "o", "ko_", 2)
        L += ["        " + ln for ln in d2]
        L += _final_lines(spec, ctype, n_red, lambda j, v: f"st{j}(y{j}, {ooffs[j]}, {v})", 8)
    else:
        L += [f"        ws[({j} * {split} + s) * {n_out} + o] = a{j}" for j in range(nt)]
    return "\n".join(L) + "\n"


def combine_source(spec, kept, split, ctype):
    """Second pass: combine the split partials of each output in split order, finalize, store."""
    n_out, n_red = numel(kept), numel(layout(spec)[1])
    nt = len(spec.terms)
    L = [f"def combine(ws, {', '.join(f'y{j}' for j in range(nt))}):",
         "    o = cuda.grid(1)",
         f"    if o < {n_out}:"]
    for j, t in enumerate(spec.terms):
        L.append(f"        a{j} = ws[{j * split} * {n_out} + o]")
        L.append(f"        for s in range(1, {split}):")
        L.append(f"            a{j} = {_combine(t, f'a{j}', f'ws[({j * split} + s) * {n_out} + o]')}")
    d2, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
    L += ["        " + ln for ln in d2]
    L += _final_lines(spec, ctype, n_red, lambda j, v: f"st{j}(y{j}, {ooffs[j]}, {v})", 8)
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------------------------
# vector row kernel: the reduced elements of an output are one contiguous run (stride 1), read as
# 16-byte vectors (V elements); GS threads per output (GS = 32: a warp per row, ``rows`` rows a
# block; GS = block: a block per row), UNROLL vectors in flight per thread per trip; the range of
# an output may be split over grid.y (contiguous chunks, partials combined in split order)

def vrow_source(spec, kept, red, v, block, rows, split, unroll, ctype):
    n_out, nv = numel(kept), numel(red) // v
    nt, ni = len(spec.terms), len(spec.inputs)
    gs = block // rows
    chunk = math.ceil(nv / split)
    L = [f"def kernel({', '.join(f'x{i}' for i in range(ni))}, "
         f"{', '.join(f'y{j}' for j in range(nt))}, ws):"]
    if gs > 32:
        L.append(f"    sm = cuda.shared.array(({nt}, {gs // 32}), {ctype})")
    L += ["    tid = cuda.threadIdx.x", "    s = cuda.blockIdx.y"]
    if gs == 32:
        L += ["    lane = tid & 31", f"    o = cuda.blockIdx.x * {rows} + (tid >> 5)"]
    else:
        L += ["    lane = tid", "    o = cuda.blockIdx.x"]
    L += [f"    a{j} = {po.lit(t.init_value(), ctype)}" for j, t in enumerate(spec.terms)]
    L.append(f"    if o < {n_out}:")
    dec, koffs = _decompose(kept, "o", "k_", 1) if kept else ([], ["0"] * ni)
    L += ["        " + ln for ln in dec]
    L += [f"        kx{i} = {koffs[i]}" for i in range(ni)]
    if split == 1:
        L += ["        r = lane", f"        hi = {nv}"]
    else:
        L += [f"        r = s * {chunk} + lane", f"        hi = min(s * {chunk} + {chunk}, {nv})"]

    def trip(n_u, indent):
        lines, pres = [], []
        for u in range(n_u):
            for i in range(ni):
                raw = ", ".join(f"w{i}_{u}_{e}" for e in range(v))
                idx = f"(r + {u * gs}) * {v}" if u else f"r * {v}"
                lines.append(f"{raw} = ldv{i}(x{i}, kx{i} + {idx})" if v > 1
                             else f"w{i}_{u}_0 = x{i}[kx{i} + {idx}]")
            for e in range(v):
                for j, t in enumerate(spec.terms):
                    pre = t.pre
                    for i in reversed(range(ni)):
                        pre = pre.replace(f"v{i}", f"cin{i}(w{i}_{u}_{e})")
                    pres.append(f"p{j}_{u}_{e} = {ctype}({pre})")
        combs = [f"a{j} = {_combine(t, f'a{j}', f'p{j}_{u}_{e}')}"
                 for u in range(n_u) for e in range(v) for j, t in enumerate(spec.terms)]
        return [" " * indent + ln for ln in lines + pres + combs]

    L.append(f"        while r + {(unroll - 1) * gs} < hi:")
    L += trip(unroll, 12)
    L.append(f"            r += {unroll * gs}")
    L.append("        while r < hi:")
    L += trip(1, 12)
    L.append(f"            r += {gs}")
    for j, t in enumerate(spec.terms):
        for m in (16, 8, 4, 2, 1):
            L.append(f"    h{j} = shfl_xor(a{j}, {m})")
            L.append(f"    a{j} = {_combine(t, f'a{j}', f'h{j}')}")
    if gs > 32:
        L.append("    if lane % 32 == 0:")
        L += [f"        sm[{j}, lane // 32] = a{j}" for j in range(nt)]
        L.append("    cuda.syncthreads()")
        L.append("    if lane == 0:")
        L += [f"        a{j} = sm[{j}, 0]" for j in range(nt)]
        L.append(f"        for w in range(1, {gs // 32}):")
        L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w]')}"
              for j, t in enumerate(spec.terms)]
    L.append(f"    if lane == 0 and o < {n_out}:")
    if split == 1:
        d2, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
        L += ["        " + ln for ln in d2]
        L += _final_lines(spec, ctype, numel(red), lambda j, x: f"st{j}(y{j}, {ooffs[j]}, {x})", 8)
    else:
        L += [f"        ws[({j} * {split} + s) * {n_out} + o] = a{j}" for j in range(nt)]
    return "\n".join(L) + "\n"


def bcombine_source(spec, kept, split, ctype):
    """Combine for few outputs: a block per output, thread t takes partials t, t + T, ... in order,
    then a fixed butterfly and warp order (deterministic)."""
    n_out, n_red = numel(kept), numel(layout(spec)[1])
    nt, th = len(spec.terms), bcombine_threads(split)
    L = [f"def combine(ws, {', '.join(f'y{j}' for j in range(nt))}):",
         f"    sm = cuda.shared.array(({nt}, 32), {ctype})",
         "    o = cuda.blockIdx.x",
         "    tid = cuda.threadIdx.x"]
    L += [f"    a{j} = {po.lit(INIT[t.combine], ctype)}" for j, t in enumerate(spec.terms)]
    L += ["    s = tid", f"    while s < {split}:"]
    L += [f"        a{j} = {_combine(t, f'a{j}', f'ws[({j * split} + s) * {n_out} + o]')}"
          for j, t in enumerate(spec.terms)]
    L.append(f"        s += {th}")
    for j, t in enumerate(spec.terms):
        for m in (16, 8, 4, 2, 1):
            L.append(f"    h{j} = shfl_xor(a{j}, {m})")
            L.append(f"    a{j} = {_combine(t, f'a{j}', f'h{j}')}")
    if th > 32:
        L.append("    if tid % 32 == 0:")
        L += [f"        sm[{j}, tid // 32] = a{j}" for j in range(nt)]
        L.append("    cuda.syncthreads()")
    L.append("    if tid == 0:")
    if th > 32:
        L += [f"        a{j} = sm[{j}, 0]" for j in range(nt)]
        L.append(f"        for w in range(1, {th // 32}):")
        L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w]')}"
              for j, t in enumerate(spec.terms)]
    d2, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
    L += ["        " + ln for ln in d2]
    L += _final_lines(spec, ctype, n_red, lambda j, x: f"st{j}(y{j}, {ooffs[j]}, {x})", 8)
    return "\n".join(L) + "\n"
