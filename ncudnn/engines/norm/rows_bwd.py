"""The backward of engine "norm_rows" (layer / RMS norm): the two-pass path (dx in one row kernel, then dscale /
dbias as ordered column sums) and the fused one (one persistent kernel: dx and per-block dscale / dbias partials,
then their ordered combine), the fused geometries the heuristics rank and the backward's default knobs.
"""
import math

from ...kernels.norm import bn_cols as kcols
from ...kernels.norm import row as kn
from ...kernels.norm import row_bwd as kf
from ...kernels.norm import row_dparams as kd
from ...kernels.runtime.dtypes import compute_type
from ...kernels.primitives import warp as kprim
from ...types import cudnnBackendKnobType_t, cudnnBackendNormMode_t
from ..membound.common import Arg, Scratch, Step, kdtype, src_key, tensor_bytes, written
from .rows_knobs import KC, block_size, cta_count, kernel_cfg, kprim_itemsize, load_size, stages, tile_rows

__all__ = ["BWD_TWO_PASS", "BWD_FUSED", "bwd_dparams", "bwd_vec", "fused_geometry", "BWD_FUSED_VARIANTS",
           "preferred_bwd_knobs", "backward_steps"]

K = cudnnBackendKnobType_t
NM = cudnnBackendNormMode_t

#: backward KERNEL_CFG values: dx, then dscale / dbias column sums (two passes) / all in one pass
BWD_TWO_PASS, BWD_FUSED = 0, 1


def bwd_dparams(sub):
    """True when the backward node writes DSCALE or DBIAS (what the fused kernel is for)."""
    if sub.kind != "norm_bwd":
        return False
    o = sub.nodes[0].outputs
    return any(o.get(p) is not None and written(sub, o.get(p)) is not None for p in ("DSCALE", "DBIAS"))


def bwd_vec(sub):
    """Elements per 16-byte access of the fused backward (1: element accesses: the row does not divide
    into vectors, or X, DY, DX, SCALE are not all aligned to 16 bytes). Remembered on the subgraph."""
    memo = sub.__dict__.setdefault("_norm_rows_bwd", {})
    if "vec" not in memo:
        memo["vec"] = _bwd_vec_of(sub)
    return memo["vec"]


def _bwd_vec_of(sub):
    node = sub.nodes[0]
    ts = [node.inputs["X"], node.inputs["DY"], node.inputs["SCALE"], node.outputs["DX"]]
    if any(t.alignment < 16 for t in ts if not t.is_virtual):
        return 1
    return kf.fused_vec(math.prod(ts[0].dims[1:]), [kprim_itemsize(kdtype(t)) for t in ts])


def fused_geometry(sub, cfg):
    """:class:`ncudnn.kernels.norm.row_bwd.FusedConfig` of a fused backward config (None: the row is too
    long for registers at that BLOCK_SIZE)."""
    x = sub.nodes[0].inputs["X"]
    vec = bwd_vec(sub) if load_size(cfg) else 1
    return kf.fused_config(math.prod(x.dims[1:]), x.dims[0], kprim.sm_count(), vec, block_size(cfg), tile_rows(cfg),
                           cta_count(cfg), stages(cfg))


#: fused backward geometries the heuristics rank and the autotuner tries: (BLOCK_SIZE, TILE_ROWS, CTA_COUNT),
#: 0 = the kernel layer's choice (:func:`ncudnn.kernels.norm.row_bwd.fused_config`)
BWD_FUSED_VARIANTS = ((0, 0, 0), (128, 2, 0), (128, 4, 0), (256, 1, 0), (256, 2, 0), (256, 4, 0), (512, 1, 0),
                      (512, 2, 0), (0, 0, 1), (0, 0, 2), (0, 0, 4), (0, 2, 0), (0, 1, 0))


def preferred_bwd_knobs(sub):
    """Knob -> value of the backward's default config: the fused kernel (16-byte accesses where they
    apply, the kernel layer's geometry) when the node writes DSCALE / DBIAS and a row fits in registers;
    else the two-pass path (every knob 0)."""
    if not bwd_dparams(sub):
        return {}
    vec = bwd_vec(sub)
    x = sub.nodes[0].inputs["X"]
    if kf.fused_config(math.prod(x.dims[1:]), x.dims[0], 1, vec) is None:
        return {}
    return {KC: BWD_FUSED, K.CUDNN_KNOB_TYPE_LOAD_SIZE: 16 if vec > 1 else 0}


def backward_steps(sub, cfg):
    if kernel_cfg(cfg) == BWD_FUSED:
        return _backward_fused(sub, cfg)
    node = sub.nodes[0]
    i = node.inputs
    x, dy, scale = i["X"], i["DY"], i["SCALE"]
    dx = node.outputs["DX"]
    dscale, dbias = written(sub, node.outputs.get("DSCALE")), written(sub, node.outputs.get("DBIAS"))
    rms = NM(int(node.mode)) == NM.CUDNN_RMS_NORM
    rows, n = x.dims[0], math.prod(x.dims[1:])
    inv = i["INV_VARIANCE"]
    mean = None if rms else i["MEAN"]
    s_dt = kdtype(inv)
    threads, blk, vpt, rpb = kn.row_config(n, block_size(cfg), vpt_max=kn.BWD_VPT_MAX)
    fargs = (n, blk, vpt, not rms, kdtype(x), kdtype(dy), kdtype(scale), kdtype(dx), s_dt, rpb)
    args = [Arg.tensor(x), Arg.tensor(dy), Arg.tensor(scale), Arg.tensor(mean) if mean is not None else Arg.dummy(s_dt),
            Arg.tensor(inv), Arg.tensor(dx), Arg.const(rows)]
    steps = [Step("norm_rows_bwd:" + src_key(fargs), lambda: kn.row_bwd_kernel(*fargs)[0], math.ceil(rows / rpb),
                  threads, args, nbytes=tensor_bytes(x, dy, dx, scale))]
    scratch = Scratch()
    if dscale is not None or dbias is not None:
        steps += _dparams_steps(scratch, x, dy, mean, inv, dscale, dbias, rows, n, rms)
    return steps, scratch.size


def _backward_fused(sub, cfg):
    """One persistent kernel (dx and per-block dscale / dbias partials,
    :mod:`ncudnn.kernels.norm.row_bwd`), then the ordered combine of the partials."""
    node = sub.nodes[0]
    i = node.inputs
    x, dy, scale, inv = i["X"], i["DY"], i["SCALE"], i["INV_VARIANCE"]
    dx = node.outputs["DX"]
    dscale, dbias = written(sub, node.outputs.get("DSCALE")), written(sub, node.outputs.get("DBIAS"))
    rms = NM(int(node.mode)) == NM.CUDNN_RMS_NORM
    mean = None if rms else i["MEAN"]
    rows, n = x.dims[0], math.prod(x.dims[1:])
    s_dt = kdtype(inv)
    fc = fused_geometry(sub, cfg)
    dts = (kdtype(x), kdtype(dy), kdtype(scale), kdtype(dx), s_dt)
    ct = compute_type(list(dts))
    scratch = Scratch()
    p0, p1 = scratch.take(fc.grid * n, ct), scratch.take(fc.grid * n, ct)
    fargs = (n, fc.block, fc.vpt, fc.vec, fc.rows, not rms) + dts + (fc.stages, kf.reg_cap(fc))
    pbytes = 2 * fc.grid * n * kprim_itemsize(ct)
    main = Step("norm_rows_bwd_fused:" + src_key(fargs), lambda: kf.fused_bwd_kernel(*fargs)[0], fc.grid, fc.block,
                [Arg.tensor(x), Arg.tensor(dy), Arg.tensor(scale),
                 Arg.tensor(mean) if mean is not None else Arg.dummy(s_dt), Arg.tensor(inv), Arg.tensor(dx),
                 p0, p1, Arg.const(rows)], nbytes=tensor_bytes(x, dy, dx, scale) + pbytes)
    cargs = (ct, kdtype(dbias) if dbias is not None else None, kdtype(dscale) if dscale is not None else None,
             dbias is not None, dscale is not None, kcols.combine_ty(fc.grid))
    out0 = Arg.tensor(dbias) if dbias is not None else Arg.dummy(ct)
    out1 = Arg.tensor(dscale) if dscale is not None else Arg.dummy(ct)
    comb = Step("norm_rows_dparams_combine:" + src_key(cargs), lambda: kcols.combine_kernel(*cargs),
                max(1, -(-n // kcols.TX)), (kcols.TX, cargs[-1]),
                [p0, p1, out0, out1, Arg.const(fc.grid), Arg.const(n)],
                nbytes=pbytes)
    return [main, comb], scratch.size


def _dparams_steps(scratch, x, dy, mean, inv, dscale, dbias, rows, n, rms):
    """dscale / dbias as ordered column sums (:mod:`ncudnn.kernels.norm.row_dparams`), then the combine."""
    s_dt = kdtype(inv)
    ct = compute_type([kdtype(x), kdtype(dy), s_dt])
    cfg = kcols.cols_config(rows, n, kprim.sm_count(), blocks_per_sm=kd.BLOCKS_PER_SM, unroll=kd.UNROLL)
    p0, p1 = scratch.take(cfg.chunks * n, ct), scratch.take(cfg.chunks * n, ct)
    fargs = (n, kdtype(x), kdtype(dy), s_dt, not rms)
    main = Step("norm_rows_dparams:" + src_key(fargs), lambda: kd.dparams_partial_kernel(*fargs)[0],
                (cfg.tiles, cfg.chunks), (cfg.tx, cfg.ty),
                [Arg.tensor(x), Arg.tensor(dy), Arg.tensor(mean) if mean is not None else Arg.dummy(s_dt),
                 Arg.tensor(inv), p0, p1, Arg.const(rows), Arg.const(cfg.chunk_rows)], nbytes=tensor_bytes(x, dy))
    cargs = (ct, kdtype(dbias) if dbias is not None else None, kdtype(dscale) if dscale is not None else None,
             dbias is not None, dscale is not None, kcols.combine_ty(cfg.chunks))
    out0 = Arg.tensor(dbias) if dbias is not None else Arg.dummy(ct)
    out1 = Arg.tensor(dscale) if dscale is not None else Arg.dummy(ct)
    comb = Step("norm_rows_dparams_combine:" + src_key(cargs), lambda: kcols.combine_kernel(*cargs),
                max(1, -(-n // kcols.TX)), (kcols.TX, cargs[-1]), [p0, p1, out0, out1, Arg.const(cfg.chunks), Arg.const(n)],
                nbytes=cfg.chunks * n * 8)
    return [main, comb]
