"""Source generation of the fused pointwise kernel: the Python text of one ``kernel(a0.., o0.., n)`` for a
:class:`~ncudnn.kernels.pointwise.spec.PointwiseSpec`, in the code shape its layout allows (dense, general
or the vector path; see :mod:`ncudnn.kernels.pointwise.spec`). The text calls ``ld{k}`` / ``st{m}``
(scalar loads / stores), ``ldv{k}`` / ``stv{m}`` / ``cin{k}`` / ``cout{m}`` (vector path) and the op
expressions of :mod:`ncudnn.kernels.pointwise.ops`; the builder (:mod:`ncudnn.kernels.pointwise.fused`)
binds those names.
"""
import math

from . import ops as po
from .spec import collapse, is_dense, is_scalar, uses_vec_path, vec_layout, vec_unroll
from ..runtime.dtypes import compute_type
from ...types import cudnnPointwiseMode_t as PM

__all__ = ["generate_source"]

# --------------------------------------------------------------------------------------------
# source generation

def _node_exprs(spec, ctype, regs, suffix, coord_names):
    """Lines computing every node for one element; ``regs`` maps ref -> (register name, kind)."""
    lines = []
    n_in = len(spec.inputs)
    for j, node in enumerate(spec.nodes):
        mode = PM(node.mode)
        params = dict(node.params)
        if mode == PM.CUDNN_POINTWISE_GEN_INDEX:
            axis = po.gen_index_axis(params, len(spec.shape))
            args = [coord_names.get(axis, "0")]
        else:
            args = []
            for r, want in zip(node.operands, po.operand_kinds(mode)):
                name, kind = regs[r]
                args.append(f"{ctype}({name})" if want == "float" and kind != "float" else name)
        name = f"t{j}{suffix}"
        lines.append(f"{name} = {po.expr(mode, args, params, ctype)}")
        regs[n_in + j] = (name, po.result_kind(mode))
    return lines


def _element(spec, ctype, suffix, offsets, coord_names, scalar_regs):
    """(load lines, compute lines, store lines) for one element."""
    loads, regs = [], dict(scalar_regs)
    for k, t in enumerate(spec.inputs):
        if k in scalar_regs:
            continue
        loads.append(f"x{k}{suffix} = ld{k}(a{k}, {offsets[k]})")
        regs[k] = (f"x{k}{suffix}", "float")
    compute = _node_exprs(spec, ctype, regs, suffix, coord_names)
    stores = []
    for m, o in enumerate(spec.outputs):
        stores.append(f"st{m}(o{m}, {offsets[len(spec.inputs) + m]}, {regs[o.ref][0]})")
    return loads, compute, stores


def _element_packed(spec, ctype, suffix, word, scalar_regs):
    """(load, compute, store) lines for the element pair held by 32-bit word ``word``."""
    loads, comp, halves = [], [], []
    for half in ("a", "b"):
        regs = dict(scalar_regs)
        for k in range(len(spec.inputs)):
            if k not in scalar_regs:
                regs[k] = (f"x{k}{suffix}{half}", "float")
        comp += _node_exprs(spec, ctype, regs, f"{suffix}{half}", {})
        halves.append(regs)
    for k in range(len(spec.inputs)):
        if k not in scalar_regs:
            loads.append(f"x{k}{suffix}a, x{k}{suffix}b = ld{k}(a{k}, {word})")
    stores = [f"st{m}(o{m}, {word}, {halves[0][o.ref][0]}, {halves[1][o.ref][0]})"
              for m, o in enumerate(spec.outputs)]
    return loads, comp, stores


def _indent(lines, n):
    return [" " * n + ln for ln in lines]


def _offset_expr(strides, coords):
    terms = []
    for s, c in zip(strides, coords):
        if s == 0:
            continue
        terms.append(c if s == 1 else f"{c} * {s}")
    return " + ".join(terms) if terms else "0"


def _decompose(shape, suffix, flat):
    """Lines turning flat row-major index ``flat`` into coordinates c{d}{suffix}."""
    nd = len(shape)
    if nd == 0:
        return [], []
    lines, names = [f"r{suffix} = {flat}"], [f"c{d}{suffix}" for d in range(nd)]
    for d in range(nd - 1, 0, -1):
        lines.append(f"c{d}{suffix} = r{suffix} % {shape[d]}")
        lines.append(f"r{suffix} = r{suffix} // {shape[d]}")
    lines.append(f"c0{suffix} = r{suffix}")
    return lines, names


def generate_source(spec):
    """Python source of the kernel for ``spec`` (function name ``kernel``)."""
    if uses_vec_path(spec):
        return _vec_source(spec)
    ctype = compute_type([t.dtype for t in spec.inputs + spec.outputs])
    n_in, n_out = len(spec.inputs), len(spec.outputs)
    dense = is_dense(spec)
    block, unroll = spec.block, spec.unroll
    args = [f"a{k}" for k in range(n_in)] + [f"o{m}" for m in range(n_out)] + ["n"]
    body = []
    scalar_regs = {}
    for k, t in enumerate(spec.inputs):
        if is_scalar(t):
            body.append(f"x{k} = ld{k}(a{k}, 0)")
            scalar_regs[k] = (f"x{k}", "float")
    chunk = block * unroll
    body += [f"base = cuda.blockIdx.x * {chunk} + cuda.threadIdx.x",
             f"step = cuda.gridDim.x * {chunk}",
             "while base < n:"]
    if spec.pack == 2:   # n counts 32-bit words (element pairs)
        per = []
        for u in range(unroll):
            e = f"base + {u * block}" if u else "base"
            per.append(([f"e{u} = {e}"], _element_packed(spec, ctype, f"_{u}", f"e{u}",
                                                         scalar_regs)))
    elif dense:
        per = []
        for u in range(unroll):
            e = f"base + {u * block}" if u else "base"
            per.append(([f"e{u} = {e}"], _element(spec, ctype, f"_{u}", [f"e{u}"] * (n_in + n_out),
                                                  {}, scalar_regs)))
    else:
        shape, strides, axis_map = collapse(spec)
        per = []
        for u in range(unroll):
            e = f"base + {u * block}" if u else "base"
            dec, coords = _decompose(shape, f"_{u}", f"e{u}")
            offsets = [_offset_expr(s, coords) for s in strides]
            coord_names = {d: coords[k] for d, k in axis_map.items()}
            per.append(([f"e{u} = {e}"] + dec,
                        _element(spec, ctype, f"_{u}", offsets, coord_names, scalar_regs)))
    # full chunk: every load, then every op, then every store (memory-level parallelism)
    body.append(f"    if base + {(unroll - 1) * block} < n:")
    full = []
    for idx, _ in per:
        full += idx
    for _, (ld, _c, _s) in per:
        full += ld
    for _, (_l, comp, _s) in per:
        full += comp
    for _, (_l, _c, st) in per:
        full += st
    body += _indent(full, 8)
    body.append("    else:")
    for idx, (ld, comp, st) in per:
        body += _indent(idx[:1], 8)
        body.append(f"        if {idx[0].split(' = ')[0]} < n:")
        body += _indent(idx[1:] + ld + comp + st, 12)
    body.append("    base += step")
    return "def kernel(" + ", ".join(args) + "):\n" + "\n".join(_indent(body, 4)) + "\n"


def _pow2(v):
    return v > 0 and v & (v - 1) == 0


def _off(e, inner, mid, total):
    """Source text of ``(e // inner) % mid`` for an int64 ``e >= 0``."""
    if mid == 1:
        return "0"
    if inner == 1:
        q = e
    elif _pow2(inner):
        q = f"({e} >> {inner.bit_length() - 1})"
    else:
        q = f"({e} // {inner})"
    if inner * mid == total:
        return q
    return f"({q} & {mid - 1})" if _pow2(mid) else f"({q} % {mid})"


def _vec_source(spec):
    """Kernel source of the vector path (see the section comment)."""
    shape, ops = vec_layout(spec)
    total = math.prod(shape)
    ctype = compute_type([t.dtype for t in spec.inputs + spec.outputs])
    V, U, block = spec.vec, vec_unroll(spec), spec.block
    n_in, n_out = len(spec.inputs), len(spec.outputs)
    args = [f"a{k}" for k in range(n_in)] + [f"o{m}" for m in range(n_out)] + ["n"]
    body, scalar_regs = [], {}
    for k, op in enumerate(ops):
        if op is None:
            body.append(f"x{k} = ld{k}(a{k}, 0)")
            scalar_regs[k] = (f"x{k}", "float")
    chunk = block * U
    body += [f"nv = n // {V}" if V > 1 else "nv = n",
             f"base = cuda.blockIdx.x * {chunk} + cuda.threadIdx.x",
             f"step = cuda.gridDim.x * {chunk}",
             "while base < nv:"]
    per = []
    for u in range(U):
        e = f"e{u}"
        idx = [f"v{u} = base + {u * block}" if u else f"v{u} = base",
               f"{e} = v{u} * {V}" if V > 1 else f"{e} = v{u}"]
        loads, compute = [], []
        lanes = [dict(scalar_regs) for _ in range(V)]
        for k, op in enumerate(ops):
            if op is None:
                continue
            inner, mid = op
            full = inner == 1 and mid == total
            if full or (inner == 1 and mid % V == 0):
                raw = [f"x{k}_{u}_{j}" for j in range(V)]
                off = e if full else _off(e, inner, mid, total)
                loads.append(f"{', '.join(raw)} = ldv{k}(a{k}, {off})" if V > 1
                             else f"{raw[0]} = a{k}[{off}]")
                names = [f"y{k}_{u}_{j}" for j in range(V)]
                compute += [f"{y} = cin{k}({x})" for y, x in zip(names, raw)]
            elif inner % V == 0:
                loads.append(f"x{k}_{u} = a{k}[{_off(e, inner, mid, total)}]")
                compute.append(f"y{k}_{u} = cin{k}(x{k}_{u})")
                names = [f"y{k}_{u}"] * V
            else:
                names = [f"y{k}_{u}_{j}" for j in range(V)]
                for j in range(V):
                    loads.append(f"x{k}_{u}_{j} = a{k}[{_off(f'({e} + {j})', inner, mid, total)}]")
                    compute.append(f"y{k}_{u}_{j} = cin{k}(x{k}_{u}_{j})")
            for j in range(V):
                lanes[j][k] = (names[j], "float")
        for j in range(V):
            compute += _node_exprs(spec, ctype, lanes[j], f"_{u}_{j}", {})
        stores = []
        for m, o in enumerate(spec.outputs):
            vals = [f"cout{m}({lanes[j][o.ref][0]})" for j in range(V)]
            stores.append(f"stv{m}(o{m}, {e}, ({', '.join(vals)}))" if V > 1
                          else f"o{m}[{e}] = {vals[0]}")
        per.append((idx, loads, compute, stores))
    body.append(f"    if base + {(U - 1) * block} < nv:")
    full_trip = [ln for p in per for ln in p[0]] + [ln for p in per for ln in p[1]] + \
        [ln for p in per for ln in p[2]] + [ln for p in per for ln in p[3]]
    body += _indent(full_trip, 8)
    body.append("    else:")
    for idx, ld, comp, st in per:
        body += _indent(idx[:1], 8)
        body.append(f"        if {idx[0].split(' = ')[0]} < nv:")
        body += _indent(idx[1:] + ld + comp + st, 12)
    body.append("    base += step")
    return "def kernel(" + ", ".join(args) + "):\n" + "\n".join(_indent(body, 4)) + "\n"
