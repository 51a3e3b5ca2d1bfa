"""Engine "norm_rows", the strided path: forward KERNEL_CFG :data:`FWD_STRIDED`, backward KERNEL_CFG
:data:`BWD_STRIDED` (:mod:`ncudnn.kernels.norm.row_strided`: every tensor addressed through its own strides).

The row kernels of the other configs need each sample of X to be one dense block at batch stride n, Y / DY / DX in
X's strides and SCALE / BIAS / DSCALE / DBIAS following X on the normalized dims (:func:`layout_reason`). Where a
graph breaks any of these (permuted or padded layouts, outputs or gradients in a layout of their own), this config
is the engine's only one: its default and its whole search space. On dense graphs it is accepted when asked for
(the autotuner, a serialized config) but never ranked. Every knob but KERNEL_CFG stays 0 (the kernel layer picks
the geometry, :func:`ncudnn.kernels.norm.row_strided.strided_config`).

Forward: one kernel (statistics two-pass from memory, y a third pass; MEAN / INV_VARIANCE at their strides), then
the pointwise epilogue over a float32 y kept in the workspace at X's strides. Backward: dx in one kernel; DSCALE /
DBIAS as per-(row chunk, column) partial sums, then the chunks added in order into each output's strides.

ADA_LAYER_NORM (adaptive layer norm) runs here only: the axes where SCALE is 1 (and the batch axis) are the row
axes, the others the normalized ones (:func:`ada_geometry`; X [B, S, C], SCALE [B, 1, C]: B * S rows of C); every
tensor is addressed through its strides on both, SCALE / BIAS at their batch entry's row (stride 0 on S), and
DSCALE / DBIAS are summed per batch entry (chunks of one entry's rows, combined per entry).
"""
import math

from ...kernels.norm import row_strided as ks
from ...kernels.runtime.dtypes import compute_type
from ...kernels.primitives import warp as kprim
from ...types import cudnnBackendNormFwdPhase_t, cudnnBackendNormMode_t
from ..membound.common import Arg, PointwiseBuilder, Scratch, Step, extent, kdtype, src_key, tensor_bytes, written
from .rows_knobs import kernel_cfg

__all__ = ["FWD_STRIDED", "BWD_STRIDED", "is_strided", "strided_kcfg", "layout_reason", "strided_steps"]

NM = cudnnBackendNormMode_t
PH = cudnnBackendNormFwdPhase_t

#: KERNEL_CFG of the strided forward (after the pipelined kernel's 20..29) and backward (after the fused 1)
FWD_STRIDED, BWD_STRIDED = 30, 2


def strided_kcfg(sub):
    return FWD_STRIDED if sub.kind == "norm_fwd" else BWD_STRIDED


def is_strided(sub, cfg):
    return kernel_cfg(cfg) == strided_kcfg(sub)


def _dense_rows(x):
    """True when each sample of ``x`` is a dense block of n elements at batch stride n."""
    n = math.prod(x.dims[1:])
    inner = sorted(((s, d) for d, s in zip(x.dims[1:], x.strides[1:]) if d > 1), reverse=True)
    acc = 1
    for s, d in reversed(inner):
        if s != acc:
            return False
        acc *= d
    return x.dims[0] == 1 or x.strides[0] == n


def _same_inner(a, x):
    return all(s == t for d, s, t in zip(a.dims[1:], a.strides[1:], x.strides[1:]) if d > 1)


def _stat_ok(t):
    return t is None or t.dims[0] == 1 or t.strides[0] == 1


def _memory_tensors(node):
    return [(p, t) for p, t in list(node.inputs.items()) + list(node.outputs.items())
            if t is not None and not t.is_by_value and not t.is_virtual]


def ada_geometry(x, scale):
    """Adaptive layer norm on X: (perm, row dims, normalized dims, groups): ``perm`` puts the row axes (0, then
    those where SCALE is 1) before the normalized ones (where SCALE is X's); ``groups`` is the number of SCALE
    rows (X's batch when SCALE has one per entry, else 1)."""
    nd = x.ndim
    outer = [0] + [i for i in range(1, nd) if scale.dims[i] == 1]
    normed = [i for i in range(1, nd) if scale.dims[i] != 1]
    groups = int(x.dims[0]) if scale.dims[0] != 1 else 1
    return (tuple(outer + normed), tuple(int(x.dims[i]) for i in outer), tuple(int(x.dims[i]) for i in normed),
            groups)


def _pst(t, perm):
    """``t``'s strides in the order ``perm``, 0 on its dims of 1 (a broadcast or a size-1 axis)."""
    return tuple(0 if t.dims[i] == 1 else int(t.strides[i]) for i in perm)


def _dense_rows_st(outer, n_inner):
    """Strides of one dense value per row (row-major over the row axes), 0 on the normalized axes."""
    st, acc = [], 1
    for d in reversed(outer):
        st.append(acc if d > 1 else 0)
        acc *= d
    return tuple(reversed(st)) + (0,) * n_inner


def _is_ada(node):
    return NM(int(node.mode)) == NM.CUDNN_ADA_LAYER_NORM


def layout_reason(node):
    """Why the dense row kernels cannot run this node's layouts (None: they can)."""
    if _is_ada(node):
        return "ADA_LAYER_NORM (per-batch SCALE / BIAS rows) runs the strided kernels only"
    x = node.inputs["X"]
    if not _dense_rows(x):
        return f"X: strides {x.strides}: each sample must be a dense block at batch stride prod(dims[1:])"
    for p, t in _memory_tensors(node):
        if p == "X":
            continue
        if p in ("Y", "DY", "DX") and tuple(t.strides) != tuple(x.strides):
            return f"{p}: strides {t.strides} differ from X's {x.strides}"
        if p in ("SCALE", "BIAS", "DSCALE", "DBIAS") and not _same_inner(t, x):
            return f"{p}: strides {t.strides} do not follow X's {x.strides} on the normalized dims"
        if p in ("MEAN", "INV_VARIANCE") and not _stat_ok(t):
            return f"{p}: statistics must be one dense value per row"
    return None


def _st(t, like):
    return tuple(int(s) for s in (t if t is not None else like).strides)


def strided_steps(sub, cfg):
    return _forward(sub) if sub.kind == "norm_fwd" else _backward(sub)


def _forward(sub):
    node = sub.anchor
    i = node.inputs
    x, scale, bias, y = i["X"], i["SCALE"], i.get("BIAS"), node.outputs["Y"]
    rms = NM(int(node.mode)) == NM.CUDNN_RMS_NORM
    rows, n, inner = x.dims[0], math.prod(x.dims[1:]), tuple(int(d) for d in x.dims[1:])
    outer = None
    if _is_ada(node):
        perm, outer, inner, _ = ada_geometry(x, scale)
        rows, n = math.prod(outer), math.prod(inner)
    training = PH(int(node.phase)) == PH.CUDNN_NORM_FWD_TRAINING
    mean = written(sub, node.outputs.get("MEAN")) if training and not rms else None
    inv = written(sub, node.outputs.get("INV_VARIANCE")) if training else None
    scratch = Scratch()
    write = mean is not None or inv is not None
    s_dt = kdtype(inv if inv is not None else mean) if write else "float32"
    # statistics written but not both kept: the other one goes to the workspace (one dense value a row)
    row_st = (1,) * x.ndim if outer is None else _dense_rows_st(outer, len(inner))
    mean_arg = Arg.tensor(mean) if mean is not None else (scratch.take(rows, s_dt) if write and not rms
                                                          else Arg.dummy(s_dt))
    inv_arg = Arg.tensor(inv) if inv is not None else (scratch.take(rows, s_dt) if write else Arg.dummy(s_dt))
    fused = bool(sub.epilogue)
    if fused:      # y in the workspace at X's strides, read by the epilogue
        y_arg, y_dt, y_st = scratch.take(extent(x.dims, x.strides), "float32"), "float32", _st(x, x)
    else:
        y_arg, y_dt, y_st = Arg.tensor(y), kdtype(y), _st(y, x)
    p_dt = kdtype(scale)
    eps = i["EPSILON"]
    eps_dt = None if eps.is_by_value else kdtype(eps)
    layout = (_st(x, x), _st(scale, x), _st(bias, x), y_st,
              _st(mean, x) if mean is not None else row_st, _st(inv, x) if inv is not None else row_st)
    if outer is not None:       # every tensor in the row-axes-first order
        P = (lambda t: _pst(t, perm))
        layout = (P(x), P(scale), P(bias if bias is not None else x), P(x) if fused else P(y),
                  P(mean) if mean is not None else row_st, P(inv) if inv is not None else row_st)
    fargs = (n, inner, layout, not rms, bias is not None, write, kdtype(x), p_dt, y_dt, s_dt, eps_dt)
    if outer is not None:
        fargs += (outer,)
    threads, _, rpb = ks.strided_config(n)
    args = [Arg.tensor(x), Arg.tensor(scale), Arg.tensor(bias) if bias is not None else Arg.dummy(p_dt),
            y_arg, mean_arg, inv_arg, Arg.scalar(eps) if eps_dt is None else Arg.tensor(eps), Arg.const(rows)]
    steps = [Step("norm_rows_fwd_strided:" + src_key(fargs), lambda: ks.strided_fwd_kernel(*fargs)[0],
                  math.ceil(rows / rpb), threads, args, nbytes=(2 if rms else 3) * tensor_bytes(x) +
                  tensor_bytes(y, scale, bias))]
    if fused:
        from .common import epilogue_output

        pw = PointwiseBuilder(x.dims)
        yr = pw.add_input(y_arg, "float32", x.strides)
        epilogue_output(pw, sub, y, ("in", yr))
        steps.append(pw.step("norm_rows_epilogue", 256))
    return steps, scratch.size


def _backward(sub):
    node = sub.nodes[0]
    i = node.inputs
    x, dy, scale, inv = i["X"], i["DY"], i["SCALE"], i["INV_VARIANCE"]
    dx = node.outputs["DX"]
    dscale, dbias = written(sub, node.outputs.get("DSCALE")), written(sub, node.outputs.get("DBIAS"))
    rms = NM(int(node.mode)) == NM.CUDNN_RMS_NORM
    mean = None if rms else i["MEAN"]
    rows, n, inner = x.dims[0], math.prod(x.dims[1:]), tuple(int(d) for d in x.dims[1:])
    s_dt = kdtype(inv)
    dts = (kdtype(x), kdtype(dy), kdtype(scale), kdtype(dx), s_dt)
    layout = (_st(x, x), _st(dy, x), _st(scale, x), _st(mean, inv), _st(inv, inv), _st(dx, x))
    outer, groups = None, 1
    if _is_ada(node):
        perm, outer, inner, groups = ada_geometry(x, scale)
        rows, n = math.prod(outer), math.prod(inner)
        P = (lambda t: _pst(t, perm))
        layout = (P(x), P(dy), P(scale), P(mean), P(inv), P(dx))
    fargs = (n, inner, layout, not rms) + dts + ((outer,) if outer is not None else ())
    threads, _, rpb = ks.strided_config(n)
    mean_arg = Arg.tensor(mean) if mean is not None else Arg.dummy(s_dt)
    steps = [Step("norm_rows_bwd_strided:" + src_key(fargs), lambda: ks.strided_bwd_kernel(*fargs)[0],
                  math.ceil(rows / rpb), threads,
                  [Arg.tensor(x), Arg.tensor(dy), Arg.tensor(scale), mean_arg, Arg.tensor(inv), Arg.tensor(dx),
                   Arg.const(rows)], nbytes=2 * tensor_bytes(x, dy) + tensor_bytes(dx, scale))]
    scratch = Scratch()
    if dscale is None and dbias is None:
        return steps, scratch.size
    ct = compute_type([kdtype(x), kdtype(dy), s_dt])
    # adaptive layer norm: chunks of one batch entry's rows each (groups of rows // groups), combined per entry
    chunks, cr = ks.dparams_chunks(rows // groups, n, max(1, kprim.sm_count() // groups))
    total = chunks * groups
    p0, p1 = scratch.take(total * n, ct), scratch.take(total * n, ct)
    pargs = (n, inner, (layout[0], layout[1], layout[3], layout[4]), not rms, kdtype(x), kdtype(dy), s_dt)
    if outer is not None:
        pargs += (outer, (chunks, rows // groups) if groups > 1 else None)
    cols = max(1, math.ceil(n / ks.TX))
    steps.append(Step("norm_rows_dparams_strided:" + src_key(pargs), lambda: ks.dparams_partial_kernel(*pargs)[0],
                      (cols, total), ks.TX,
                      [Arg.tensor(x), Arg.tensor(dy), mean_arg, Arg.tensor(inv), p0, p1, Arg.const(rows),
                       Arg.const(cr)], nbytes=tensor_bytes(x, dy)))
    cargs = (n, inner, (_st(dbias, x), _st(dscale, x)), ct, kdtype(dbias) if dbias is not None else None,
             kdtype(dscale) if dscale is not None else None, dbias is not None, dscale is not None)
    if outer is not None:
        cargs = (n, inner, (_pst(dbias if dbias is not None else scale, perm),
                            _pst(dscale if dscale is not None else scale, perm))) + cargs[3:] + (len(outer),)
    steps.append(Step("norm_rows_dparams_combine_strided:" + src_key(cargs),
                      lambda: ks.dparams_combine_kernel(*cargs)[0], cols if outer is None else (cols, groups), ks.TX,
                      [p0, p1, Arg.tensor(dbias) if dbias is not None else Arg.dummy(ct),
                       Arg.tensor(dscale) if dscale is not None else Arg.dummy(ct), Arg.const(chunks)],
                      nbytes=2 * total * n * 4))
    return steps, scratch.size
