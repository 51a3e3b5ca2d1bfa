"""Engine "norm_rows": NORM_FORWARD / NORM_BACKWARD for LAYER_NORM and RMS_NORM as row kernels
(:mod:`ncudnn.kernels.norm.row`): each sample's normalized elements form one row of n = prod(dims[1:]).

Forward: one kernel, a block (or a warp, for rows <= 256) per row; rows up to BLOCK * 16 elements
stay in registers (two-pass mean / variance, one read of x, one write of y), longer rows loop
(shifted one-pass sums). Training writes MEAN (layer norm) and INV_VARIANCE. A pointwise epilogue
runs as a second pass over y kept in the workspace (float32).
Backward writing DSCALE / DBIAS (default, KERNEL_CFG 1): one persistent row kernel
(:mod:`ncudnn.kernels.norm.row_bwd`: dx, and per block the partial column sums of dscale / dbias in
registers; x and dy read once) then the ordered combine of the blocks' partial rows (deterministic).
KERNEL_CFG 0 (and the default without DSCALE / DBIAS): dx in one row kernel; dscale (and dbias) as
ordered column sums over the rows (:mod:`ncudnn.kernels.norm.row_dparams`: coalesced one-wave partials,
re-reading x and dy, then an ordered combine).

Layouts: each sample's block must be dense (any order of the non-batch dims: NCHW, NHWC, ...) with
the batch stride equal to n; Y / DY / DX share X's strides; SCALE / BIAS / DSCALE / DBIAS have X's
strides on the normalized dims (elements line up in memory order); statistics are one value per row.
Knobs: BLOCK_SIZE (0: the kernel layer's choice; 32 = warp per row); TILE_ROWS (forward, warp per row:
rows a block, 0 = the kernel layer's 4); LOAD_SIZE (forward: 0 = an element per access, 16 = 16-byte
vector accesses when n divides into vectors and X, Y, SCALE, BIAS declare >= 16-byte alignment);
CTA_COUNT (forward, 16-byte kernel: 0 = a block per row group, c = a persistent grid of SMs x c blocks
looping over the rows; STAGES 2 then loads the next row before this row's statistics); forward KERNEL_CFG
1..12: the sub-block kernel (:mod:`ncudnn.kernels.norm.row_fwd_sub`: BLOCK_SIZE threads a row, TILE_ROWS rows a
block, STAGES 1 scale / bias loaded before the reductions; see FWD_SUB_KCFG; made the default by
FWD_SUB_DEFAULT); forward KERNEL_CFG 20..29: the persistent cp.async-pipelined kernel (:mod:`ncudnn.engines.norm.rows_pipe`,
the default for FP32 rows of 512..1024 columns and enough rows). Fused backward
(KERNEL_CFG 1): BLOCK_SIZE threads, TILE_ROWS rows a loop step, CTA_COUNT blocks per SM, STAGES 2 (the
next row group's loads issued before this group's reductions) or 1 (0 each: the kernel layer's choice,
:func:`ncudnn.kernels.norm.row_bwd.fused_config`), LOAD_SIZE 16 for 16-byte accesses (rows dividing
into vectors, X / DY / DX / SCALE 16-byte aligned).
The default config (:func:`preferred_knobs`, :func:`preferred_bwd_knobs`) is the 16-byte / fused
kernel wherever it applies; the cost model ranks every other config 5% behind its path's bytes.
EPSILON by value or as a one-element device tensor (read in the kernel).
"""
import math


from ...kernels.norm import bn_cols as kcols
from ...kernels.norm import row as kn
from ...kernels.norm import row_bwd as kf
from ...kernels.norm import row_dparams as kd
from ...kernels.norm import row_fwd_sub as ksub
from ...kernels.runtime.dtypes import compute_type
from ...kernels.primitives import warp as kprim
from ...types import cudnnBackendKnobType_t, cudnnBackendNormFwdPhase_t, cudnnBackendNormMode_t, cudnnStatus_t
from . import rows_pipe as npipe
from ..base import OK, Config, Engine, KnobSpec
from ..membound.common import (Arg, MemPlan, PointwiseBuilder, Scratch, Step, extent, kdtype, src_key, steps_time,
                              tensor_bytes, written)
from .common import check_norm_node
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NM = cudnnBackendNormMode_t
PH = cudnnBackendNormFwdPhase_t
MODES = (NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM)
BLOCKS = (0, 32, 128, 256, 512, 1024)
ROWS = (0, 1, 2, 4, 8)
KC, KW, KS = K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_CTA_COUNT, K.CUDNN_KNOB_TYPE_STAGES
#: backward KERNEL_CFG values: dx, then dscale / dbias column sums (two passes) / all in one pass
BWD_TWO_PASS, BWD_FUSED = 0, 1


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


def _layout_reason(node):
    x = node.inputs["X"]
    if not _dense_rows(x):
        return f"X: strides {x.strides}: each sample must be a dense block at batch stride prod(dims[1:])"
    for p, t in list(node.inputs.items()) + list(node.outputs.items()):
        if t.is_by_value or t.is_virtual or p == "X":
            continue
        if p in ("Y", "DY", "DX") and tuple(t.strides) != tuple(x.strides):
            return f"{p}: strides {t.strides} differ from X's {x.strides}"
        if p in ("SCALE", "BIAS", "DSCALE", "DBIAS") and not _same_inner(t, x):
            return f"{p}: strides {t.strides} do not follow X's {x.strides} on the normalized dims"
        if p in ("MEAN", "INV_VARIANCE") and not _stat_ok(t):
            return f"{p}: statistics must be one dense value per row"
    return None


def _block(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0)


def _rows(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_TILE_ROWS, 0)


def _load(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 0)


def _kcfg(cfg):
    return cfg.get(KC, 0)


def _ctas(cfg):
    return cfg.get(KW, 0)


def _stages(cfg):
    """Row groups a fused backward block keeps in registers (STAGES 0: the kernel layer's choice)."""
    return cfg.get(KS, 0)


def _bwd_dparams(sub):
    """True when the backward node writes DSCALE or DBIAS (what the fused kernel is for)."""
    if sub.kind != "norm_bwd":
        return False
    o = sub.nodes[0].outputs
    return any(o.get(p) is not None and written(sub, o.get(p)) is not None for p in ("DSCALE", "DBIAS"))


def _bwd_vec(sub):
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


def _fused_geometry(sub, cfg):
    """:class:`ncudnn.kernels.norm.row_bwd.FusedConfig` of a fused backward config (None: the row is too
    long for registers at that BLOCK_SIZE)."""
    x = sub.nodes[0].inputs["X"]
    vec = _bwd_vec(sub) if _load(cfg) else 1
    return kf.fused_config(math.prod(x.dims[1:]), x.dims[0], kprim.sm_count(), vec, _block(cfg), _rows(cfg),
                           _ctas(cfg), _stages(cfg))


def _fwd_vec(sub):
    """Elements per 16-byte access of the forward (0: the layout or alignment does not allow it)."""
    if sub.kind != "norm_fwd":
        return 0
    node = sub.anchor
    x = node.inputs["X"]
    ts = [t for t in (x, node.inputs["SCALE"], node.inputs.get("BIAS"), node.outputs["Y"]) if t is not None]
    mem = [t for t in ts if not t.is_virtual]
    if tuple(x.strides[1:]) != tuple(packed_strides_of(x.dims)[1:]) or any(t.alignment < 16 for t in mem):
        return 0
    if any(tuple(t.strides[1:]) != tuple(packed_strides_of(t.dims)[1:]) for t in ts if t is not x and not t.is_virtual):
        return 0
    sizes = [kprim_itemsize(kdtype(t)) for t in mem] + ([4] if sub.epilogue else [])
    vec = 16 // max(sizes)
    return vec if kn.vec_ok(math.prod(x.dims[1:]), sizes, vec) else 0


#: rows of up to this many 16-byte vectors take 128-thread blocks in the default, longer rows 256
#: (H200: LayerNorm / RMSNorm FP32 at 1024 columns 128 threads, at 4096 columns 256 threads fastest)
VEC_ROW_SMALL = 512


def preferred_knobs(sub):
    """(BLOCK_SIZE, TILE_ROWS, LOAD_SIZE) of the default config. Forwards that take 16-byte accesses
    with the row in registers: LOAD_SIZE 16, one row a block of 128 threads (rows of <= VEC_ROW_SMALL
    vectors) or 256 (longer); rows of fewer vectors than 128 threads run warp per row (BLOCK_SIZE 32).
    Otherwise (backward, rows that do not divide into vectors, unaligned or strided tensors, rows too
    long for registers at 256 threads): (0, 0, 0), the kernel layer's choice."""
    vec = _fwd_vec(sub)
    if not vec:
        return 0, 0, 0
    nv = math.prod(sub.anchor.inputs["X"].dims[1:]) // vec
    block = 32 if nv < 128 else 128 if nv <= VEC_ROW_SMALL else 256
    if not kn.row_config(nv * vec, block, vec=vec)[2]:
        return 0, 0, 0
    return block, 0, 16


#: fused backward geometries the heuristics rank and the autotuner tries: (BLOCK_SIZE, TILE_ROWS, CTA_COUNT),
#: 0 = the kernel layer's choice (:func:`ncudnn.kernels.norm.row_bwd.fused_config`)
BWD_FUSED_VARIANTS = ((0, 0, 0), (128, 2, 0), (128, 4, 0), (256, 1, 0), (256, 2, 0), (256, 4, 0), (512, 1, 0),
                      (512, 2, 0), (0, 0, 1), (0, 0, 2), (0, 0, 4), (0, 2, 0), (0, 1, 0))


#: forward CTA_COUNT values (persistent grids of SMs x CTA_COUNT blocks) ranked after the default
FWD_PERSIST_CTAS = (4, 8, 16)

#: forward KERNEL_CFG values: 0 the row kernel of :mod:`ncudnn.kernels.norm.row`; 1..12 the sub-block
#: kernel (:mod:`ncudnn.kernels.norm.row_fwd_sub`, BLOCK_SIZE threads a row, TILE_ROWS rows a block,
#: STAGES 1 = scale / bias loaded before the reductions), as (two-pass statistics, .cs stores, .cs loads of X
#: [, rows a thread: several consecutive rows interleaved, scale / bias loaded once for them
#: [, L2 policy of X's loads, of Y's stores (:mod:`ncudnn.kernels.primitives.l2hint`; None: none)]])
FWD_SUB_KCFG = {1: (True, False, False), 2: (False, False, False), 3: (True, True, False), 4: (False, True, False),
                5: (True, True, True), 6: (False, True, True), 7: (True, False, True), 8: (False, False, True),
                9: (True, False, False, 2), 10: (False, False, False, 2), 11: (True, False, False, 4),
                12: (False, False, False, 4),
                13: (False, False, False, 1, "evict_first", None), 14: (False, False, False, 1, "evict_first", "evict_last"),
                15: (False, False, False, 1, None, "evict_last"), 16: (False, False, False, 1, "evict_first", "evict_first")}


def _l2hints(cfg):
    """(X load, Y store) L2 policies of a sub-block forward config (the 5th / 6th entries of its FWD_SUB_KCFG value)."""
    v = FWD_SUB_KCFG.get(_kcfg(cfg), ())
    return (v[4], v[5]) if len(v) > 5 else (None, None)


def _rpt(cfg):
    """Rows a thread of a sub-block forward config (the 4th entry of its FWD_SUB_KCFG value; 1 without)."""
    v = FWD_SUB_KCFG.get(_kcfg(cfg), ())
    return v[3] if len(v) > 3 else 1

#: sub-block forward variants the heuristics rank right after the default: (KERNEL_CFG, BLOCK_SIZE, TILE_ROWS,
#: STAGES); those a row does not fit (more than 32 values a thread) are pruned by keep()
FWD_SUB_VARIANTS = ((1, 32, 4, 0), (2, 32, 4, 0), (1, 32, 4, 1), (3, 32, 4, 0), (1, 32, 8, 0), (1, 32, 2, 0),
                    (1, 64, 2, 0), (2, 64, 2, 0), (1, 64, 2, 1), (2, 64, 2, 1), (3, 64, 2, 0), (4, 64, 2, 0),
                    (2, 64, 1, 0),
                    (2, 64, 4, 0), (2, 128, 1, 0), (4, 128, 1, 0), (2, 128, 2, 0), (1, 128, 1, 0),
                    (2, 128, 1, 1), (2, 256, 1, 0), (4, 256, 1, 0), (1, 256, 1, 0), (5, 32, 4, 0), (6, 64, 2, 0),
                    (6, 128, 1, 0), (6, 256, 1, 0), (10, 32, 4, 1), (10, 128, 1, 1), (8, 128, 1, 1))


#: the sub-block forward as the default config: entries ((max vectors a row, (KERNEL_CFG, BLOCK_SIZE, TILE_ROWS,
#: STAGES)[, "layer" | "rms"[, min vectors a row]]), ...); the first entry whose bounds hold the row's 16-byte vector count,
#: whose mode (when given) matches and that :func:`_sub_reason` accepts replaces :func:`preferred_knobs`' config
#: (empty: the row kernel stays the default). The pipelined kernel's default (:data:`ncudnn.engines.norm.rows_pipe.FWD_PIPE_DEFAULT`)
#: comes first where it applies (FP32 rows of 512..1024 columns, two rows a warp of its grid; session 8: faster
#: than this one and than cuDNN at 8192x1024 and 8192x512). Rows of 512-1024 FP32 columns, layer and RMS norm:
#: 128 threads a row, one row a block, scale / bias loaded early, x loaded with the L2 evict-first policy, y stored
#: plain (KERNEL_CFG 13; until session 8 KERNEL_CFG 16, y evict-first as well, which on the H200 left y out of the L2 for the next kernel:
#: LN 8192x1024 then a torch.sum of y 0.0395 ms against 0.0361 with y plain).
#: On the H200 at 8192x1024, 2026-12-01 (session 7): in one process of tools/probe_norm_rows.py (l2_ln l2_rms, twice)
#: LN 0.0211 / 0.0212 ms against 0.0218 / 0.0220 without the policies and 0.0218 / 0.0221 for cudnn-frontend, RMS
#: 0.0206 / 0.0205 against 0.0214 / 0.0213 for the warp-a-row default before it; that gain did not reproduce in the
#: benchmark's processes, where LN / RMS ran at 0.0215-0.0221 / 0.0216-0.0219 against cudnn-frontend's 0.0216-0.0222
#: / 0.0213-0.0218 (0.98x-1.02x; tools/probe_interleave.py: 0.997x / 0.986x over 6 alternating rounds), all at the
#: speed of a torch copy of the same bytes (0.0212-0.0215). It is kept as no slower than the old defaults in any run.
#: Where the policies do not apply (16-bit data, an epilogue): LN the same geometry without them; RMS one warp a row,
#: 4 rows a block. Rows of 4096 columns keep the row kernel (with the policies: 0.0721-0.0746 ms against 0.0708).
FWD_SUB_DEFAULT = ((256, (13, 128, 1, 1), "rms", 128), (256, (2, 32, 4, 1), "rms"), (256, (13, 128, 1, 1), "layer", 128),
                   (256, (2, 128, 1, 1), "layer", 128))


def _sub_default(sub):
    """Knob -> value of the forward's default beyond the row kernel: the pipelined kernel's
    (:func:`ncudnn.engines.norm.rows_pipe.pipe_default`) where it applies, else the sub-block default from :data:`FWD_SUB_DEFAULT`
    ({}: none applies)."""
    vec = _fwd_vec(sub)
    pipe = npipe.pipe_default(sub, vec) if vec else 0
    if pipe:
        return {KC: pipe, K.CUDNN_KNOB_TYPE_BLOCK_SIZE: 0, K.CUDNN_KNOB_TYPE_TILE_ROWS: 0, KS: 0,
                K.CUDNN_KNOB_TYPE_LOAD_SIZE: 16, KW: 0}
    if not vec or not FWD_SUB_DEFAULT:
        return {}
    nv = math.prod(sub.anchor.inputs["X"].dims[1:]) // vec
    mode = "rms" if NM(int(sub.anchor.mode)) == NM.CUDNN_RMS_NORM else "layer"
    for bound, (kc, b, r, st), *only in FWD_SUB_DEFAULT:
        low = only[1] if len(only) > 1 else 0
        if low <= nv <= bound and (not only or only[0] == mode):
            knobs = {KC: kc, K.CUDNN_KNOB_TYPE_BLOCK_SIZE: b, K.CUDNN_KNOB_TYPE_TILE_ROWS: r, KS: st,
                     K.CUDNN_KNOB_TYPE_LOAD_SIZE: 16, KW: 0}
            probe = Config("norm_rows", tuple(sorted((int(k), v) for k, v in knobs.items())))
            if _sub_reason(sub, probe) is None:
                return knobs
    return {}


def _sub_rows(cfg):
    """Rows a block of the sub-block forward (TILE_ROWS; 0: 128 threads a block, at least one row)."""
    return _rows(cfg) or max(1, 128 // (_block(cfg) or 128))


def _sub_reason(sub, cfg):
    """Why a sub-block forward config (KERNEL_CFG 1..12) cannot run here (None: it can)."""
    if _kcfg(cfg) not in FWD_SUB_KCFG:
        return f"forward KERNEL_CFG {_kcfg(cfg)} is not 0, one of {sorted(FWD_SUB_KCFG)} (the sub-block kernel) or " \
            f"of {sorted(npipe.FWD_PIPE_KCFG)} (the pipelined kernel)"
    vec = _fwd_vec(sub)
    if not _load(cfg) or not vec:
        return "forward KERNEL_CFG > 0 (the sub-block kernel) needs LOAD_SIZE 16 and rows that divide into " \
            "16-byte vectors with X, Y, SCALE, BIAS packed, >= 16-byte aligned"
    if _ctas(cfg) or cfg.get(KS, 0) > 1:
        return "the sub-block forward (KERNEL_CFG > 0) takes CTA_COUNT 0 and STAGES 0 or 1"
    n = math.prod(sub.anchor.inputs["X"].dims[1:])
    tpr, rpb = _block(cfg), _sub_rows(cfg)
    if _rpt(cfg) > 1 and ksub.sub_config(n, vec, tpr, rpb)[1] * vec * _rpt(cfg) > 2 * ksub.SUB_VALUES_MAX:
        return f"the sub-block forward with {_rpt(cfg)} rows a thread: more than {2 * ksub.SUB_VALUES_MAX} " \
            "values of x a thread"
    if not ksub.sub_config(n, vec, tpr, rpb)[1]:
        return f"the sub-block forward: a row of {n} elements does not fit BLOCK_SIZE {tpr} threads x " \
            f"{ksub.SUB_VALUES_MAX} values (threads a row: one of {ksub.SUB_TPR}; TILE_ROWS {rpb}: " \
            "at most 1024 threads a block)"
    if FWD_SUB_KCFG[_kcfg(cfg)][1] and (vec != 4 or kdtype(sub.anchor.outputs["Y"]) != "float32" or sub.epilogue):
        return "forward KERNEL_CFG 3 .. 6 (.cs stores) need a float32 Y with no epilogue"
    if FWD_SUB_KCFG[_kcfg(cfg)][2] and kdtype(sub.anchor.inputs["X"]) != "float32":
        return "forward KERNEL_CFG 5 to 8 (.cs loads) need a float32 X"
    xh, yh = _l2hints(cfg)
    if (xh and (vec != 4 or kdtype(sub.anchor.inputs["X"]) != "float32")) or \
            (yh and (vec != 4 or kdtype(sub.anchor.outputs["Y"]) != "float32" or sub.epilogue)):
        return f"forward KERNEL_CFG {_kcfg(cfg)} (L2 policies) needs float32 X / Y (no epilogue) in 16-byte vectors"
    return None


def preferred_bwd_knobs(sub):
    """Knob -> value of the backward's default config: the fused kernel (16-byte accesses where they
    apply, the kernel layer's geometry) when the node writes DSCALE / DBIAS and a row fits in registers;
    else the two-pass path (every knob 0)."""
    if not _bwd_dparams(sub):
        return {}
    vec = _bwd_vec(sub)
    x = sub.nodes[0].inputs["X"]
    if kf.fused_config(math.prod(x.dims[1:]), x.dims[0], 1, vec) is None:
        return {}
    return {KC: BWD_FUSED, K.CUDNN_KNOB_TYPE_LOAD_SIZE: 16 if vec > 1 else 0}


def packed_strides_of(dims):
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def kprim_itemsize(dt):
    from ...kernels.runtime.dtypes import storage_dtype
    return storage_dtype(dt).itemsize


def _forward(sub, cfg):
    node = sub.anchor
    i = node.inputs
    x, scale, bias = i["X"], i["SCALE"], i.get("BIAS")
    rms = NM(int(node.mode)) == NM.CUDNN_RMS_NORM
    rows, n = x.dims[0], math.prod(x.dims[1:])
    training = PH(int(node.phase)) == PH.CUDNN_NORM_FWD_TRAINING
    mean = written(sub, node.outputs.get("MEAN")) if training and not rms else None
    inv = written(sub, node.outputs.get("INV_VARIANCE")) if training else None
    scratch = Scratch()
    write = mean is not None or inv is not None
    s_dt = kdtype(inv if inv is not None else mean) if write else "float32"
    mean_arg = Arg.tensor(mean) if mean is not None else (scratch.take(rows, s_dt) if write and not rms
                                                          else Arg.dummy(s_dt))
    inv_arg = Arg.tensor(inv) if inv is not None else (scratch.take(rows, s_dt) if write else Arg.dummy(s_dt))
    y = node.outputs["Y"]
    fused = bool(sub.epilogue)
    if fused:
        y_arg, y_dt = scratch.take(extent(x.dims, x.strides), "float32"), "float32"
    else:
        y_arg, y_dt = Arg.tensor(y), kdtype(y)
    p_dt = kdtype(scale)
    vec = _fwd_vec(sub) if _load(cfg) else 0
    threads, blk, vpt, rpb = kn.row_config(n, _block(cfg), 0 if _kcfg(cfg) else _rows(cfg), vec=vec or 1)
    if _kcfg(cfg):
        vpt = 1                # the sub-block kernel (checked by keep)
    if vec and not vpt:        # too long for registers: the scalar looped path
        vec = 0
        threads, blk, vpt, rpb = kn.row_config(n, _block(cfg), _rows(cfg))
    eps = i["EPSILON"]
    eps_dt = None if eps.is_by_value else kdtype(eps)
    args = [Arg.tensor(x), Arg.tensor(scale), Arg.tensor(bias) if bias is not None else Arg.dummy(p_dt),
            y_arg, mean_arg, inv_arg, Arg.scalar(eps) if eps_dt is None else Arg.tensor(eps), Arg.const(rows)]
    if npipe.is_pipe(cfg):
        step = npipe.pipe_step(sub, cfg, args, rms, bias is not None, write, eps_dt)
    elif vec and _kcfg(cfg):
        tpr, srpb = _block(cfg), _sub_rows(cfg)
        sthreads, _ = ksub.sub_config(n, vec, tpr, srpb)
        two_pass, cs, csx = FWD_SUB_KCFG[_kcfg(cfg)][:3]
        rpt = _rpt(cfg)
        fargs = (n, tpr, srpb, vec, not rms, bias is not None, write, kdtype(x), p_dt, y_dt, s_dt, eps_dt,
                 two_pass, cfg.get(KS, 0) == 1, cs, csx)
        hints = _l2hints(cfg)     # trailing arguments only where they differ from the defaults (same cache keys)
        fargs += (rpt,) + hints if any(hints) else (rpt,) if rpt > 1 else ()
        step = Step("norm_rows_fwd_sub:" + src_key(fargs), lambda: ksub.row_fwd_sub_kernel(*fargs)[0],
                    math.ceil(rows / (srpb * rpt)), sthreads, args, nbytes=tensor_bytes(x, y, scale, bias))
    elif vec:
        grid = math.ceil(rows / rpb)
        persist = bool(_ctas(cfg)) and grid > kprim.sm_count() * _ctas(cfg)
        if persist:
            grid = kprim.sm_count() * _ctas(cfg)
        persist = (2 if cfg.get(KS, 0) == 2 else 1) if persist else 0
        fargs = (n, blk, vpt, vec, not rms, bias is not None, write, kdtype(x), p_dt, y_dt, s_dt, rpb, eps_dt, persist)
        step = Step("norm_rows_fwd_vec:" + src_key(fargs), lambda: kn.row_fwd_vec_kernel(*fargs)[0],
                    grid, threads, args, nbytes=tensor_bytes(x, y, scale, bias))
    else:
        fargs = (n, blk, vpt, not rms, bias is not None, write, kdtype(x), p_dt, y_dt, s_dt, rpb, eps_dt)
        step = Step("norm_rows_fwd:" + src_key(fargs), lambda: kn.row_fwd_kernel(*fargs)[0],
                    math.ceil(rows / rpb), threads, args, nbytes=tensor_bytes(x, y, scale, bias))
    steps = [step]
    if fused:
        from .common import epilogue_output

        pw = PointwiseBuilder(x.dims)
        yr = pw.add_input(y_arg, "float32", x.strides)
        epilogue_output(pw, sub, y, ("in", yr))
        steps.append(pw.step("norm_rows_epilogue", 256))
    return steps, scratch.size


def _backward(sub, cfg):
    if _kcfg(cfg) == BWD_FUSED:
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
    threads, blk, vpt, rpb = kn.row_config(n, _block(cfg), vpt_max=kn.BWD_VPT_MAX)
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
    fc = _fused_geometry(sub, cfg)
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


@register
class NormRowsEngine(Engine):
    name = "norm_rows"
    kinds = ("norm_fwd", "norm_bwd")
    fallback = True

    def check_support(self, sub, ctx):
        st, why = check_norm_node(self, sub, MODES)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.anchor if sub.anchor is not None else sub.nodes[0]
        if node.inputs["X"].ndim < 2:
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"node '{node.name}': X: needs a batch dim and row dims"
        why = _layout_reason(node)
        if why:
            return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"node '{node.name}': {why}"
        if node.OP == "norm_fwd":
            m, v = node.outputs.get("MEAN"), node.outputs.get("INV_VARIANCE")
            if m is not None and v is not None and m.dtype != v.dtype:
                return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': MEAN and INV_VARIANCE dtypes differ"
            b = node.inputs.get("BIAS")
            if b is not None and b.dtype != node.inputs["SCALE"].dtype:
                return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': BIAS dtype differs from SCALE's"
        else:
            m = node.inputs.get("MEAN")
            if m is not None and m.dtype != node.inputs["INV_VARIANCE"].dtype:
                return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': MEAN and INV_VARIANCE dtypes differ"
        return OK

    def knobs(self, sub):
        base = (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0, 1024, 32, 0),
                KnobSpec(K.CUDNN_KNOB_TYPE_TILE_ROWS, 0, 8, 1, 0),
                KnobSpec(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 0, 16, 16, 0))
        if sub is not None and getattr(sub, "kind", None) == "norm_bwd":
            return base + (KnobSpec(KC, 0, 1, 1, 0), KnobSpec(KW, 0, 16, 1, 0), KnobSpec(KS, 0, 2, 1, 0))
        return base + (KnobSpec(KW, 0, 16, 1, 0), KnobSpec(KS, 0, 2, 1, 0),
                       KnobSpec(KC, 0, max(npipe.FWD_PIPE_KCFG), 1, 0))

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if sub.kind == "norm_fwd" and _kcfg(cfg):
            why = npipe.pipe_reason(sub, cfg, _fwd_vec(sub)) if npipe.is_pipe(cfg) else _sub_reason(sub, cfg)
            return (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}") if why else OK
        if _block(cfg) not in BLOCKS:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE {_block(cfg)} is not one of {BLOCKS}"
        if _rows(cfg) not in ROWS:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS {_rows(cfg)} is not one of {ROWS}"
        if sub.kind == "norm_bwd":
            return self._keep_bwd(sub, cfg)
        if _rows(cfg) and sub.kind == "norm_fwd":
            n = math.prod(sub.anchor.inputs["X"].dims[1:])
            if kn.row_config(n, _block(cfg))[1] != 32:
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS {_rows(cfg)} needs warp-per-row mode " \
                    f"(BLOCK_SIZE 32, or 0 with rows of <= {32 * kn.VPT_MAX} elements)"
        elif _rows(cfg):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS is a forward knob"
        if _load(cfg) and not _fwd_vec(sub):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: LOAD_SIZE 16 needs a forward whose rows divide " \
                "into 16-byte vectors and X, Y, SCALE, BIAS packed with >= 16-byte alignment"
        if _ctas(cfg) and not _load(cfg):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: CTA_COUNT (a persistent grid) is a knob of the " \
                "16-byte forward kernel (LOAD_SIZE 16)"
        if cfg.get(KS, 0) == 2 and not _ctas(cfg):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: forward STAGES 2 (the next row's loads early) " \
                "needs a persistent grid (CTA_COUNT > 0)"
        return OK

    def _keep_bwd(self, sub, cfg):
        if _kcfg(cfg) == BWD_TWO_PASS:
            if _rows(cfg) or _load(cfg) or _ctas(cfg) or cfg.get(KS, 0):
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS, LOAD_SIZE, CTA_COUNT and STAGES are " \
                    "knobs of the fused backward (KERNEL_CFG 1)"
            return OK
        if not _bwd_dparams(sub):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: KERNEL_CFG 1 fuses DSCALE / DBIAS into the dx " \
                f"pass; node '{sub.nodes[0].name}' writes neither"
        if _load(cfg) and _bwd_vec(sub) == 1:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: LOAD_SIZE 16 needs rows that divide into 16-byte " \
                "vectors and X, DY, DX, SCALE with >= 16-byte alignment"
        if _fused_geometry(sub, cfg) is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: fused backward: a row of " \
                f"{math.prod(sub.nodes[0].inputs['X'].dims[1:])} elements needs more than {kf.EPT_MAX} values a " \
                f"thread at BLOCK_SIZE {_block(cfg) or 1024}"
        return OK

    def configs(self, sub, ctx):
        """The backward's search space: the two-pass path and a list of fused geometries (the full
        knob product is thousands of configs); the forward's: every knob combination :meth:`keep` allows."""
        if sub is None or sub.kind != "norm_bwd":
            out = [Config(self.name, tuple(sorted(((int(KW), 0), (int(KS), 0), (int(KC), 0)))))]
            for spec in self.knobs(sub)[:3]:
                out = [c.with_knob(spec.type, v) for c in out for v in spec.values()]
            if sub is not None and _load(self.default_config(sub)):   # persistent grids first (64 are ranked)
                d = self._row_default(sub)
                z = d.with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0).with_knob(K.CUDNN_KNOB_TYPE_TILE_ROWS, 0)
                out = [z.with_knob(KC, kc) for kc in npipe.FWD_PIPE_KCFG] + \
                    [d.with_knob(KC, kc).with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b)
                     .with_knob(K.CUDNN_KNOB_TYPE_TILE_ROWS, r).with_knob(KS, st)
                     for kc, b, r, st in FWD_SUB_VARIANTS] + \
                    [d.with_knob(KW, w).with_knob(KS, st) for st in (0, 2) for w in FWD_PERSIST_CTAS] + out
            return [c for c in dict.fromkeys(out) if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
        base = super().default_config(sub)
        out = [base.with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b) for b in BLOCKS]
        load = 16 if _bwd_vec(sub) > 1 else 0
        for st in (0, 1):
            for b, r, w in BWD_FUSED_VARIANTS:
                out.append(base.with_knob(KC, BWD_FUSED).with_knob(K.CUDNN_KNOB_TYPE_LOAD_SIZE, load)
                           .with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b).with_knob(K.CUDNN_KNOB_TYPE_TILE_ROWS, r)
                           .with_knob(KW, w).with_knob(KS, st))
        return [c for c in dict.fromkeys(out) if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]

    def default_config(self, sub):
        """The heuristic's first config: :func:`preferred_knobs` (the 16-byte kernel where it applies),
        else the kernel layer's choice (every knob 0); a backward writing DSCALE / DBIAS:
        :func:`preferred_bwd_knobs` (the fused kernel where a row fits in registers)."""
        if sub is None:                         # the knob space alone: every knob 0
            return super().default_config(sub)
        memo = sub.__dict__.setdefault("_norm_rows_default", {})
        if "cfg" not in memo and sub.kind == "norm_bwd":
            cfg = super().default_config(sub)
            for k, v in preferred_bwd_knobs(sub).items():
                cfg = cfg.with_knob(k, v)
            memo["cfg"] = cfg
        if "cfg" not in memo:
            memo["cfg"] = self._row_default(sub)
            for k, v in _sub_default(sub).items():
                memo["cfg"] = memo["cfg"].with_knob(k, v)
        return memo["cfg"]

    def _row_default(self, sub):
        """The forward's row-kernel config from :func:`preferred_knobs` (the default unless
        :data:`FWD_SUB_DEFAULT` applies)."""
        b, r, l = preferred_knobs(sub)
        return super().default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b) \
            .with_knob(K.CUDNN_KNOB_TYPE_TILE_ROWS, r).with_knob(K.CUDNN_KNOB_TYPE_LOAD_SIZE, l)

    def candidates_key(self, sub):
        if sub.kind != "norm_fwd":
            x = sub.nodes[0].inputs["X"]
            return ("bwd", _bwd_dparams(sub), _bwd_vec(sub), math.prod(x.dims[1:]),
                    tuple(preferred_bwd_knobs(sub).items()))
        node = sub.anchor
        n = math.prod(node.inputs["X"].dims[1:])
        # every dtype keep() reads (the .cs loads: X; the pipelined kernel: all of them, statistics included)
        dts = tuple(kdtype(t) if t is not None else None for t in npipe.fwd_tensors(node))
        return ("fwd", n, _fwd_vec(sub), preferred_knobs(sub), dts, bool(sub.epilogue),
                tuple(_sub_default(sub).items()))

    def _steps(self, sub, cfg):
        memo = sub.__dict__.setdefault("_norm_rows_steps", {})
        if cfg not in memo:
            memo[cfg] = _forward(sub, cfg) if sub.kind == "norm_fwd" else _backward(sub, cfg)
        return memo[cfg]

    def workspace_size(self, sub, cfg):
        return self._steps(sub, cfg)[1]

    def cost(self, sub, cfg, device):
        """Bytes over bandwidth and 5% more for any config other than :meth:`default_config`, so the
        measured-best default ranks first and the variants follow.

        Forward: the launch steps' bytes and count do not depend on the knobs, so the steps are built
        once per subgraph and device, not once per config (a cold ranking costs one step build instead
        of ~30). Backward: the two-pass path (dx; dscale / dbias re-reading x and dy) and the fused one
        (x, dy read once, plus one partial row a block) move different bytes: one step build per path;
        every fused geometry is costed as the default's (bytes cannot rank geometries: on the H200 a
        grid of fewer partial rows ran 3x slower)."""
        memo = sub.__dict__.setdefault("_norm_rows_time", {})
        default = self.default_config(sub)
        costed = cfg
        if sub.kind == "norm_fwd":
            key = device
        elif _kcfg(cfg) == BWD_FUSED:     # every geometry costed as the default's (the measured best first)
            key = (device, BWD_FUSED)
            costed = default if _kcfg(default) == BWD_FUSED else cfg
        else:
            key = (device, BWD_TWO_PASS)
        t = memo.get(key)
        if t is None:
            t = memo[key] = steps_time(device, self._steps(sub, costed)[0])
        return t * (1.0 if cfg.knobs == default.knobs else 1.05)

    def build(self, sub, cfg, ctx):
        steps, ws = self._steps(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
