"""The forward of engine "norm_rows" (layer / RMS norm): the 16-byte row kernel's default knobs, the sub-block
kernel's KERNEL_CFG table, variants and default (:data:`FWD_SUB_DEFAULT`), the checks of a sub-block config and
the forward's Steps (row kernel, 16-byte row kernel, sub-block kernel or the pipelined kernel of rows_pipe, then
the pointwise epilogue).
"""
import math

from ...kernels.norm import row as kn
from ...kernels.norm import row_fwd_sub as ksub
from ...kernels.primitives import warp as kprim
from ...types import cudnnBackendKnobType_t, cudnnBackendNormFwdPhase_t, cudnnBackendNormMode_t
from . import rows_pipe as npipe
from ..base import Config
from ..membound.common import Arg, PointwiseBuilder, Scratch, Step, extent, kdtype, src_key, tensor_bytes, written
from .rows_knobs import (KC, KS, KW, block_size, cta_count, kernel_cfg, kprim_itemsize, load_size, packed_strides_of,
                         tile_rows)

__all__ = ["fwd_vec", "VEC_ROW_SMALL", "preferred_knobs", "FWD_PERSIST_CTAS", "FWD_SUB_KCFG", "FWD_SUB_VARIANTS",
           "FWD_SUB_DEFAULT", "sub_default", "sub_reason", "forward_steps"]

K = cudnnBackendKnobType_t
NM = cudnnBackendNormMode_t
PH = cudnnBackendNormFwdPhase_t


def fwd_vec(sub):
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
#: (the fastest on the H200: 128 threads at 1024 FP32 columns, 256 at 4096; dev/perf_notes.md, "memory-bound
#: knobs measured")
VEC_ROW_SMALL = 512


def preferred_knobs(sub):
    """(BLOCK_SIZE, TILE_ROWS, LOAD_SIZE) of the default config. Forwards that take 16-byte accesses
    with the row in registers: LOAD_SIZE 16, one row a block of 128 threads (rows of <= VEC_ROW_SMALL
    vectors) or 256 (longer); rows of fewer vectors than 128 threads run warp per row (BLOCK_SIZE 32).
    Otherwise (backward, rows that do not divide into vectors, unaligned or strided tensors, rows too
    long for registers at 256 threads): (0, 0, 0), the kernel layer's choice."""
    vec = fwd_vec(sub)
    if not vec:
        return 0, 0, 0
    nv = math.prod(sub.anchor.inputs["X"].dims[1:]) // vec
    block = 32 if nv < 128 else 128 if nv <= VEC_ROW_SMALL else 256
    if not kn.row_config(nv * vec, block, vec=vec)[2]:
        return 0, 0, 0
    return block, 0, 16


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
    v = FWD_SUB_KCFG.get(kernel_cfg(cfg), ())
    return (v[4], v[5]) if len(v) > 5 else (None, None)


def _rpt(cfg):
    """Rows a thread of a sub-block forward config (the 4th entry of its FWD_SUB_KCFG value; 1 without)."""
    v = FWD_SUB_KCFG.get(kernel_cfg(cfg), ())
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
#: whose mode (when given) matches and that :func:`sub_reason` accepts replaces :func:`preferred_knobs`' config
#: (empty: the row kernel stays the default). The pipelined kernel's default (:data:`ncudnn.engines.norm.rows_pipe.FWD_PIPE_DEFAULT`)
#: comes first where it applies (FP32 rows of 512..1024 columns, two rows a warp of its grid: faster than this one
#: and than cuDNN on the H200). Rows of 512-1024 FP32 columns, layer and RMS norm: 128 threads a row, one row a
#: block, scale / bias loaded early, x loaded with the L2 evict-first policy, y stored plain (KERNEL_CFG 13; with
#: y evict-first as well, KERNEL_CFG 16, the next kernel reading y found it gone from the L2). On the H200 it runs
#: at the speed of a torch copy of the same bytes, ties cuDNN when the two are interleaved in one process, and is
#: no slower than the defaults before it in any run. Where the policies do not apply (16-bit data, an epilogue): LN
#: the same geometry without them; RMS one warp a row, 4 rows a block. Rows of 4096 columns keep the row kernel
#: (faster there than the policies). Figures: dev/perf_notes.md, "Layer / RMS norm rows".
FWD_SUB_DEFAULT = ((256, (13, 128, 1, 1), "rms", 128), (256, (2, 32, 4, 1), "rms"), (256, (13, 128, 1, 1), "layer", 128),
                   (256, (2, 128, 1, 1), "layer", 128))


def sub_default(sub):
    """Knob -> value of the forward's default beyond the row kernel: the pipelined kernel's
    (:func:`ncudnn.engines.norm.rows_pipe.pipe_default`) where it applies, else the sub-block default from :data:`FWD_SUB_DEFAULT`
    ({}: none applies)."""
    vec = fwd_vec(sub)
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
            if sub_reason(sub, probe) is None:
                return knobs
    return {}


def _sub_rows(cfg):
    """Rows a block of the sub-block forward (TILE_ROWS; 0: 128 threads a block, at least one row)."""
    return tile_rows(cfg) or max(1, 128 // (block_size(cfg) or 128))


def sub_reason(sub, cfg):
    """Why a sub-block forward config (KERNEL_CFG 1..12) cannot run here (None: it can)."""
    if kernel_cfg(cfg) not in FWD_SUB_KCFG:
        return f"forward KERNEL_CFG {kernel_cfg(cfg)} is not 0, one of {sorted(FWD_SUB_KCFG)} (the sub-block kernel) or " \
            f"of {sorted(npipe.FWD_PIPE_KCFG)} (the pipelined kernel)"
    vec = fwd_vec(sub)
    if not load_size(cfg) or not vec:
        return "forward KERNEL_CFG > 0 (the sub-block kernel) needs LOAD_SIZE 16 and rows that divide into " \
            "16-byte vectors with X, Y, SCALE, BIAS packed, >= 16-byte aligned"
    if cta_count(cfg) or cfg.get(KS, 0) > 1:
        return "the sub-block forward (KERNEL_CFG > 0) takes CTA_COUNT 0 and STAGES 0 or 1"
    n = math.prod(sub.anchor.inputs["X"].dims[1:])
    tpr, rpb = block_size(cfg), _sub_rows(cfg)
    if _rpt(cfg) > 1 and ksub.sub_config(n, vec, tpr, rpb)[1] * vec * _rpt(cfg) > 2 * ksub.SUB_VALUES_MAX:
        return f"the sub-block forward with {_rpt(cfg)} rows a thread: more than {2 * ksub.SUB_VALUES_MAX} " \
            "values of x a thread"
    if not ksub.sub_config(n, vec, tpr, rpb)[1]:
        return f"the sub-block forward: a row of {n} elements does not fit BLOCK_SIZE {tpr} threads x " \
            f"{ksub.SUB_VALUES_MAX} values (threads a row: one of {ksub.SUB_TPR}; TILE_ROWS {rpb}: " \
            "at most 1024 threads a block)"
    if FWD_SUB_KCFG[kernel_cfg(cfg)][1] and (vec != 4 or kdtype(sub.anchor.outputs["Y"]) != "float32" or sub.epilogue):
        return "forward KERNEL_CFG 3 .. 6 (.cs stores) need a float32 Y with no epilogue"
    if FWD_SUB_KCFG[kernel_cfg(cfg)][2] and kdtype(sub.anchor.inputs["X"]) != "float32":
        return "forward KERNEL_CFG 5 to 8 (.cs loads) need a float32 X"
    xh, yh = _l2hints(cfg)
    if (xh and (vec != 4 or kdtype(sub.anchor.inputs["X"]) != "float32")) or \
            (yh and (vec != 4 or kdtype(sub.anchor.outputs["Y"]) != "float32" or sub.epilogue)):
        return f"forward KERNEL_CFG {kernel_cfg(cfg)} (L2 policies) needs float32 X / Y (no epilogue) in 16-byte vectors"
    return None


def forward_steps(sub, cfg):
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
    vec = fwd_vec(sub) if load_size(cfg) else 0
    threads, blk, vpt, rpb = kn.row_config(n, block_size(cfg), 0 if kernel_cfg(cfg) else tile_rows(cfg), vec=vec or 1)
    if kernel_cfg(cfg):
        vpt = 1                # the sub-block kernel (checked by keep)
    if vec and not vpt:        # too long for registers: the scalar looped path
        vec = 0
        threads, blk, vpt, rpb = kn.row_config(n, block_size(cfg), tile_rows(cfg))
    eps = i["EPSILON"]
    eps_dt = None if eps.is_by_value else kdtype(eps)
    args = [Arg.tensor(x), Arg.tensor(scale), Arg.tensor(bias) if bias is not None else Arg.dummy(p_dt),
            y_arg, mean_arg, inv_arg, Arg.scalar(eps) if eps_dt is None else Arg.tensor(eps), Arg.const(rows)]
    if npipe.is_pipe(cfg):
        step = npipe.pipe_step(sub, cfg, args, rms, bias is not None, write, eps_dt)
    elif vec and kernel_cfg(cfg):
        tpr, srpb = block_size(cfg), _sub_rows(cfg)
        sthreads, _ = ksub.sub_config(n, vec, tpr, srpb)
        two_pass, cs, csx = FWD_SUB_KCFG[kernel_cfg(cfg)][:3]
        rpt = _rpt(cfg)
        fargs = (n, tpr, srpb, vec, not rms, bias is not None, write, kdtype(x), p_dt, y_dt, s_dt, eps_dt,
                 two_pass, cfg.get(KS, 0) == 1, cs, csx)
        hints = _l2hints(cfg)     # trailing arguments only where they differ from the defaults (same cache keys)
        fargs += (rpt,) + hints if any(hints) else (rpt,) if rpt > 1 else ()
        step = Step("norm_rows_fwd_sub:" + src_key(fargs), lambda: ksub.row_fwd_sub_kernel(*fargs)[0],
                    math.ceil(rows / (srpb * rpt)), sthreads, args, nbytes=tensor_bytes(x, y, scale, bias))
    elif vec:
        grid = math.ceil(rows / rpb)
        persist = bool(cta_count(cfg)) and grid > kprim.sm_count() * cta_count(cfg)
        if persist:
            grid = kprim.sm_count() * cta_count(cfg)
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
