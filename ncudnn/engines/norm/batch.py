"""Engine "norm_batch": NORM_FORWARD / NORM_BACKWARD for BATCH_NORM and INSTANCE_NORM, any layout
(NCHW, NHWC, any strides), with the following pointwise epilogue fused into the apply pass.

Forward, training (and instance norm in either phase: its statistics always come from x):
  1. one deterministic reduction pass over x: per-group sum and sum of squares (a group is a channel
     for BN, a (sample, channel) pair for IN) into workspace (:mod:`ncudnn.kernels.reduce.strided`);
  2. a thread-per-group finalize (:mod:`ncudnn.kernels.norm.bn_finalize`): MEAN, INV_VARIANCE, running
     statistics (INPUT_RUNNING_* -> OUTPUT_RUNNING_*, unbiased variance), equivalent scale / bias;
  3. one fused pointwise pass ``y = x * eq_scale + eq_bias`` followed by the epilogue nodes.
Forward, BN inference: ONE pointwise pass ``(x - MEAN_IN) * INV_VARIANCE_IN * scale + bias`` (+ epilogue).
Backward: per-group sums of dy and dy*x in one pass over (x, dy) -> dscale, dbias and the dx
coefficients (thread per group; instance norm sums dscale / dbias over samples with a second small
reduction) -> one pointwise pass ``dx = a*dy + b*x + c``.

Statistics are sums of shifted data (x - K, K = the group's first element: no cancellation
when |mean| >> std, one pass), float64 on the dedicated NHWC / NCHW kernels (no overflow of (x - K)^2); backward sums dy * (x - MEAN). Deterministic (no atomics). EPSILON and
EXP_AVG_FACTOR by value or as one-element device tensors (read inside the finalize kernel).
Batch norm on packed NHWC / NCHW runs dedicated kernels (:mod:`ncudnn.kernels.norm.bn_cols`,
:mod:`ncudnn.kernels.norm.bn_planes`: one-wave partial sums, an ordered combine, the finalize and a
register-coefficient apply pass); other layouts and instance norm take the generic reduce / pointwise path.
Packed NHWC with float32 and C % 4 == 0 runs :mod:`ncudnn.kernels.norm.bn_colsv` by default (16-byte
loads, one geometry for both passes, the apply pass walking each chunk backwards from the rows still in
the L2, streaming hints) with the chunk combine and the coefficients fused (:mod:`ncudnn.kernels.norm.bn_fin`):
three launches. The backward there defaults to ONE cooperative kernel (:mod:`ncudnn.kernels.norm.bn_persist`,
KERNEL_CFG ``persist_*``: one block an SM keeping rows of x and dy on chip between the sums and dx, two grid
barriers: :func:`ncudnn.kernels.primitives.grid_sync.grid_barrier` on the device's counter) where its grid fills every SM
with one block (C up to 256 always; wider C where its 256-channel tiles divide the SM count); other shapes and
misaligned buffers take the three-launch path, and as a cooperative kernel it is no plain CUDA-graph node
(``populate``: NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API; choose a colsv KERNEL_CFG for graphs).
Knobs: BLOCK_SIZE of the pointwise pass; KERNEL_CFG (:data:`~ncudnn.engines.norm.bn_steps.COLS_LABELS` on packed
NHWC, :data:`~ncudnn.engines.norm.bn_steps.PLANES_LABELS` on packed NCHW), OCCUPANCY (blocks per SM of the colsv geometry, 0: the kernels'
register budget) and ARRAY_SIZE_PER_THREAD (colsv unroll). Workspace: the partial and group sums and
coefficients (float32).
"""
from numba.cuda import types

from ...kernels.norm import bn_colsv as kcolsv
from ...kernels.reduce import strided as kr
from ...kernels.runtime.dtypes import compute_type
from ...types import (cudnnBackendKnobType_t, cudnnBackendNormFwdPhase_t, cudnnBackendNormMode_t,
                     cudnnPointwiseMode_t, cudnnStatus_t)
from ..base import OK, Engine, KnobSpec
from ..membound.common import (Arg, MemPlan, PointwiseBuilder, Scratch, bcast_strides, kdtype, reduce_steps, steps_time,
                               written)
from .bn_finalize import bwd_weights_step, finalize_step, scalar_arg
from .bn_steps import (COLS_LABELS, COLS_VARIANTS, PERSIST_VARIANTS, PLANES_LABELS, bn_apply_step, bn_layout,
                       bn_stats_steps, fin_step, l2_reuse_bytes, persist_geometry, persist_step, var_cpb, var_persist)
from .common import check_norm_node, epilogue_output
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NM = cudnnBackendNormMode_t
PH = cudnnBackendNormFwdPhase_t
PM = cudnnPointwiseMode_t
MODES = (NM.CUDNN_BATCH_NORM, NM.CUDNN_INSTANCE_NORM)


def _group_geometry(x, per_sample):
    """(group out_shape over x, dense group strides, groups, C)."""
    nd, C = x.ndim, x.dims[1]
    out_shape = tuple(n if d == 1 or (per_sample and d == 0) else 1 for d, n in enumerate(x.dims))
    strides = [0] * nd
    strides[1] = 1
    if per_sample:
        strides[0] = C
    groups = C * (x.dims[0] if per_sample else 1)
    return out_shape, tuple(strides), groups, C


#: the default: C/8 blocks of tree combine with aligned chunks, the fastest of the variants on the H200 forward
#: and backward (experiments/probe_bn.py --set tree; dev/perf_notes.md, "Batch norm")
DEFAULT_COLS_VARIANT = 12
#: the backward's own default (packed NHWC): the one-kernel backward with 10 shared rows a thread and the inline
#: grid barrier, faster on the H200 than the three-launch colsv default and than cudnn-frontend
#: (experiments/probe_bn.py --set persist; dev/perf_notes.md, "Batch norm"); DEFAULT_COLS_VARIANT where its grid
#: cannot be co-resident
DEFAULT_COLS_VARIANT_BWD = len(COLS_VARIANTS) - len(PERSIST_VARIANTS)
DEFAULT_PLANES_VARIANT = 0


def _fast(sub, x, ct, *others):
    """bn_layout(x) when the dedicated kernels apply: batch norm, every listed tensor at X's strides,
    the compute type fixed by X (and DY) alone."""
    lay = bn_layout(x)
    if lay is None or any(t is not None and tuple(t.strides) != tuple(x.strides) for t in others):
        return None
    if compute_type([kdtype(t) for t in (x,) + others if t is not None]) != ct:
        return None
    return lay


def _default_cols(sub):
    if sub.kind == "norm_bwd":
        info = fast_info(sub)
        var = COLS_VARIANTS[DEFAULT_COLS_VARIANT_BWD]
        if var_persist(var) is None or (info is not None and info[0][0] == "cols"
                                        and persist_geometry(info[0], var)[0] is not None):
            return DEFAULT_COLS_VARIANT_BWD
    return DEFAULT_COLS_VARIANT


def _block(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 256)


def _cols_knobs(cfg, lay=("cols",)):
    """(variant, blocks per SM (0: the kernel's own), unroll) of a config: the variant is a
    :data:`COLS_VARIANTS` entry for the "cols" layout, True / False (reverse apply order) for "planes"."""
    k = cfg.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0)
    var = COLS_VARIANTS[k] if lay is None or lay[0] == "cols" else k == 1
    return var, cfg.get(K.CUDNN_KNOB_TYPE_OCCUPANCY, 0), cfg.get(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, 4)


def cols_info(sub):
    """(layout, vec4 ok) when the subgraph runs the dedicated packed-NHWC batch-norm kernels, else None."""
    info = fast_info(sub)
    return info if info is not None and info[0][0] == "cols" else None


def fast_info(sub):
    """(layout, vec4 ok) when the subgraph runs the dedicated packed NHWC ("cols") or NCHW ("planes")
    statistics and apply kernels, else None."""
    memo = sub.__dict__.setdefault("_norm_batch_cols", [])
    if memo:
        return memo[0]
    node = sub.anchor if sub.anchor is not None else sub.nodes[0]
    i = node.inputs
    out = None
    if NM(int(node.mode)) == NM.CUDNN_BATCH_NORM and "X" in i and "SCALE" in i and len(i["X"].dims) >= 3:
        x = i["X"]
        if node.OP == "norm_fwd" and PH(int(node.phase)) == PH.CUDNN_NORM_FWD_TRAINING:
            y = node.outputs.get("Y")
            ct = compute_type([kdtype(x), kdtype(i["SCALE"])])
            ok = (y is not None and not sub.epilogue and written(sub, y) is not None and _fast(sub, x, ct, y))
            others = (x, y)
        elif node.OP == "norm_bwd" and "DY" in i and "DX" in node.outputs:
            dy, dx = i["DY"], node.outputs["DX"]
            ct = compute_type([kdtype(x), kdtype(dy), kdtype(i["SCALE"])])
            ok = _fast(sub, x, ct, dy, dx)
            others = (x, dy, dx)
        else:
            ok = None
        if ok:
            out = (ok, ok[0] == "cols" and kcolsv.vec_ok(ok[2], [kdtype(t) for t in others]))
    memo.append(out)
    return out


def _forward_steps(sub, cfg):
    node = sub.anchor
    i = node.inputs
    o = {p: written(sub, t) for p, t in node.outputs.items()}
    o["Y"] = node.outputs["Y"]
    x, y = i["X"], o["Y"]
    per_sample = NM(int(node.mode)) == NM.CUDNN_INSTANCE_NORM
    scratch = Scratch()
    pw = PointwiseBuilder(x.dims)
    xr = pw.add_tensor(x)
    training = PH(int(node.phase)) == PH.CUDNN_NORM_FWD_TRAINING
    if not per_sample and not training:
        m, inv, sc = pw.add_tensor(i["MEAN_IN"]), pw.add_tensor(i["INV_VARIANCE_IN"]), pw.add_tensor(i["SCALE"])
        a = pw.node(PM.CUDNN_POINTWISE_SUB, ("in", xr), ("in", m))
        a = pw.node(PM.CUDNN_POINTWISE_MUL, ("node", a), ("in", inv))
        a = pw.node(PM.CUDNN_POINTWISE_MUL, ("node", a), ("in", sc))
        if "BIAS" in i:
            a = pw.node(PM.CUDNN_POINTWISE_ADD, ("node", a), ("in", pw.add_tensor(i["BIAS"])))
        epilogue_output(pw, sub, y, a)
        return [pw.step("norm_batch_apply", _block(cfg))], 0
    ct = compute_type([kdtype(x), kdtype(i["SCALE"])])
    out_shape, g_strides, groups, C = _group_geometry(x, per_sample)
    lay = None if per_sample else _fast(sub, x, ct)
    # the statistics are summed in float64 on every path (no overflow of (x - K)^2, no loss in the variance)
    sdt = "float64"
    ssum, ssq = scratch.take(groups, sdt), scratch.take(groups, sdt)
    es, eb = scratch.take(groups, ct), scratch.take(groups, ct)
    # shifted-data sums: K = the group's first element (no cancellation when |mean| >> std)
    k_strides = tuple(st if m != 1 or n == 1 else 0 for st, m, n in zip(x.strides, out_shape, x.dims))
    spec = kr.ReduceSpec(tuple(x.dims), ((kdtype(x), tuple(x.strides)), (kdtype(x), k_strides)), out_shape,
                         (kr.Term("v0 - v1", "sum"), kr.Term("(v0 - v1) * (v0 - v1)", "sum")),
                         ((sdt, g_strides), (sdt, g_strides)), acc=sdt)
    var, occ, unr = _cols_knobs(cfg, lay)
    if lay is not None:
        steps = bn_stats_steps(lay, scratch, x, ssum, ssq, ct, var=var, occupancy=occ, unroll=unr)
    else:
        steps = reduce_steps(spec, scratch, [Arg.tensor(x), Arg.tensor(x)], [ssum, ssq], name="norm_batch_stats")
    bias = i.get("BIAS")
    tensors = {"sum": ("scratch", ssum, sdt), "sqsum": ("scratch", ssq, sdt), "scale": i["SCALE"],
               "bias": bias, "eq_scale": ("scratch", es, ct), "eq_bias": ("scratch", eb, ct),
               "prev_mean": i.get("INPUT_RUNNING_MEAN"), "prev_var": i.get("INPUT_RUNNING_VAR"),
               "next_mean": o.get("OUTPUT_RUNNING_MEAN"), "next_var": o.get("OUTPUT_RUNNING_VAR"),
               "saved_mean": o.get("MEAN") if training else None,
               "saved_inv": o.get("INV_VARIANCE") if training else None}
    if bias is None:
        return None, "BIAS"
    mom = scalar_arg(i["EXP_AVG_FACTOR"]) if "EXP_AVG_FACTOR" in i else Arg.const(0.0, types.float64)
    count = x.numel // groups
    direct = lay is not None and not sub.epilogue and written(sub, y) is not None and _fast(sub, x, ct, y) is not None
    if direct and lay[0] == "cols" and var is not None and var[3]:
        kb = scratch.take(groups, ct)      # K per channel: the apply pass reads it there (y may alias x)
        steps[-1] = fin_step(steps[-1], tensors, C, float(count), scalar_arg(i["EPSILON"]), mom, shift=x, kout=kb,
                             cpb=var_cpb(var))
        steps.append(bn_apply_step(lay, x, y, (es, eb, kb), ct, var=var, occupancy=occ, unroll=unr))
        return steps, scratch.size
    steps.append(finalize_step(tensors, groups, C, Arg.const(float(count), types.float64),
                               scalar_arg(i["EPSILON"]), mom, True, per_sample, shift=x, bias_shifted=direct))
    if direct:
        steps.append(bn_apply_step(lay, x, y, (es, eb), ct, var=var, occupancy=occ, unroll=unr))
        return steps, scratch.size
    a = pw.node(PM.CUDNN_POINTWISE_MUL, ("in", xr), ("in", pw.add_input(es, ct, g_strides)))
    a = pw.node(PM.CUDNN_POINTWISE_ADD, ("node", a), ("in", pw.add_input(eb, ct, g_strides)))
    epilogue_output(pw, sub, y, a)
    steps.append(pw.step("norm_batch_apply", _block(cfg)))
    return steps, scratch.size


def _backward_steps(sub, cfg):
    node = sub.nodes[0]
    i = node.inputs
    o = {p: written(sub, t) for p, t in node.outputs.items()}
    o = {p: t for p, t in o.items() if t is not None}
    x, dy, dx = i["X"], i["DY"], node.outputs["DX"]
    per_sample = NM(int(node.mode)) == NM.CUDNN_INSTANCE_NORM
    ct = compute_type([kdtype(x), kdtype(dy), kdtype(i["SCALE"])])
    out_shape, g_strides, groups, C = _group_geometry(x, per_sample)
    scratch = Scratch()
    dys, dyxs = scratch.take(groups, ct), scratch.take(groups, ct)
    mean = i["MEAN"]  # sum dy * (x - mean): no cancellation when |mean| >> std
    spec = kr.ReduceSpec(tuple(x.dims), ((kdtype(x), tuple(x.strides)), (kdtype(dy), tuple(dy.strides)),
                                         (kdtype(mean), bcast_strides(mean, x.dims))), out_shape,
                         (kr.Term("v1", "sum"), kr.Term("v1 * (v0 - v2)", "sum")), ((ct, g_strides), (ct, g_strides)))
    lay = None if per_sample else _fast(sub, x, ct, dy, dx)
    var, occ, unr = _cols_knobs(cfg, lay)
    if lay is not None:
        steps = bn_stats_steps(lay, scratch, x, dys, dyxs, ct, dy=dy, mean=mean, var=var, occupancy=occ, unroll=unr)
    else:
        steps = reduce_steps(spec, scratch, [Arg.tensor(x), Arg.tensor(dy), Arg.tensor(mean)], [dys, dyxs],
                             name="norm_batch_bwd_sums")
    eq = [scratch.take(groups, ct) for _ in range(3)]
    tensors = {"dy_sum": ("scratch", dys, ct), "dyx_sum": ("scratch", dyxs, ct), "mean": i["MEAN"],
               "inv": i["INV_VARIANCE"], "scale": i["SCALE"], "eq_dy": ("scratch", eq[0], ct),
               "eq_x": ("scratch", eq[1], ct), "eq_b": ("scratch", eq[2], ct)}
    per_group = {}
    for port, name in (("DSCALE", "dscale"), ("DBIAS", "dbias")):
        if per_sample or port not in o:
            per_group[port] = scratch.take(groups, ct)
            tensors[name] = ("scratch", per_group[port], ct)
        else:
            tensors[name] = o[port]
    if lay is not None and lay[0] == "cols" and var is not None and var[3]:
        one = var_persist(var) is not None
        if one and persist_geometry(lay, var)[0] is None:
            return None, persist_geometry(lay, var)[1]
        if one:     # misaligned buffers: the three-launch default replaces the one-kernel step
            var = COLS_VARIANTS[DEFAULT_COLS_VARIANT]
        steps[-1] = fin_step(steps[-1], tensors, C, float(x.numel // groups), cpb=var_cpb(var))
        steps.append(bn_apply_step(lay, x, dx, eq, ct, dy=dy, var=var, occupancy=occ, unroll=unr))
        if one:
            step = persist_step(lay, scratch, x, dy, dx, tensors, COLS_VARIANTS[cfg.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG)])
            step.fallback = steps
            steps = [step]
        return steps, scratch.size
    steps.append(bwd_weights_step(tensors, groups, C, x.numel // groups, per_sample, centered=True))
    if per_sample:  # dscale / dbias of instance norm: sum the (N, C) per-group values over samples
        for port in ("DSCALE", "DBIAS"):
            if port in o:
                t = o[port]
                rs = kr.ReduceSpec((x.dims[0], C), ((ct, (C, 1)),), (1, C), (kr.Term("v0", "sum"),),
                                   ((kdtype(t), (0, t.strides[1])),))
                steps += reduce_steps(rs, scratch, [per_group[port]], [Arg.tensor(t)], name="norm_batch_bwd_wsum")
    if lay is not None:
        steps.append(bn_apply_step(lay, x, dx, eq, ct, dy=dy, var=var, occupancy=occ, unroll=unr))
        return steps, scratch.size
    pw = PointwiseBuilder(x.dims)
    rdy, rx = pw.add_tensor(dy), pw.add_tensor(x)
    ra, rb, rc = (pw.add_input(e, ct, g_strides) for e in eq)
    a = pw.node(PM.CUDNN_POINTWISE_MUL, ("in", rdy), ("in", ra))
    b = pw.node(PM.CUDNN_POINTWISE_MUL, ("in", rx), ("in", rb))
    s = pw.node(PM.CUDNN_POINTWISE_ADD, ("node", a), ("node", b))
    s = pw.node(PM.CUDNN_POINTWISE_ADD, ("node", s), ("in", rc))
    pw.add_output(s, Arg.tensor(dx), kdtype(dx), dx.strides)
    steps.append(pw.step("norm_batch_dx", _block(cfg)))
    return steps, scratch.size


@register
class NormBatchEngine(Engine):
    name = "norm_batch"
    kinds = ("norm_fwd", "norm_bwd")
    fallback = True

    def check_support(self, sub, ctx):
        st, why = check_norm_node(self, sub, MODES)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.anchor if sub.anchor is not None else sub.nodes[0]
        x = node.inputs["X"]
        if x.ndim < 3:
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"node '{node.name}': X: needs [N, C, spatial...] dims"
        if node.OP == "norm_bwd":
            for p in ("MEAN", "INV_VARIANCE"):
                if p not in node.inputs:
                    return S.CUDNN_STATUS_BAD_PARAM, f"node '{node.name}': {p}: saved statistics are required"
        steps, why = self._steps(sub, self.default_config(sub))
        if steps is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': {why}: required by {self.name}"
        return OK

    def knobs(self, sub):
        info = fast_info(sub)
        planes = info is not None and info[0][0] == "planes"
        kc = KnobSpec(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0, 1, 1, 0, PLANES_LABELS) if planes else \
            KnobSpec(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0, len(COLS_VARIANTS) - 1, 1, 0, COLS_LABELS)
        return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128, 512, 128, 256), kc,
                KnobSpec(K.CUDNN_KNOB_TYPE_OCCUPANCY, 0, 8, 1, 0),
                KnobSpec(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, 2, 8, 2, 4))

    def default_config(self, sub):
        cfg = super().default_config(sub)
        info = fast_info(sub)
        if info is not None and info[0][0] == "cols":
            cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, _default_cols(sub) if info[1] else 0)
        elif info is not None:
            cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, DEFAULT_PLANES_VARIANT)
        return cfg

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if _block(cfg) == 384:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE 384 is not a power of 2"
        info = fast_info(sub)
        lay = info[0] if info is not None else None
        kc = cfg.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0)
        var, occ, unr = _cols_knobs(cfg, lay)
        if info is None and (kc or occ or unr != 4):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: KERNEL_CFG / OCCUPANCY / ARRAY_SIZE_PER_THREAD " \
                "apply to packed NHWC / NCHW batch norm (training forward with no epilogue, backward) only"
        if info is None:
            return OK
        if lay[0] == "planes" and (occ or unr != 4):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: the NCHW kernels have no OCCUPANCY / ARRAY_SIZE_PER_THREAD"
        if lay[0] == "cols" and var is not None and var[0] == 4 and not info[1]:
            return S.CUDNN_STATUS_NOT_SUPPORTED, \
                f"{self.name}: KERNEL_CFG {COLS_LABELS[kc]}: 16-byte loads need float32 and C % 4 == 0"
        if lay[0] == "cols" and var is None and (occ or unr != 4):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: KERNEL_CFG cols has no OCCUPANCY / ARRAY_SIZE_PER_THREAD"
        if lay[0] == "cols" and var_persist(var) is not None:
            label = f"{self.name}: KERNEL_CFG {COLS_LABELS[kc]}"
            if sub.kind != "norm_bwd":
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{label}: the one-kernel variants are backward only"
            if occ or unr != 4:
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{label}: no OCCUPANCY / ARRAY_SIZE_PER_THREAD (its own geometry)"
            g, why = persist_geometry(lay, var)
            if g is None:
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{label}: {why}"
        return OK

    def candidates(self, sub, ctx):
        key = self.candidates_key(sub)
        if key[0] == "other":
            return super().candidates(sub, ctx)
        memo = self.__dict__.setdefault("_fast_candidates", {})
        key = key + (_default_cols(sub),)
        if key in memo:
            return memo[key]
        d = self.default_config(sub)
        out = [d] + [d.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, v) for v in range(len(COLS_VARIANTS))]
        if key[0] == "cols":
            for occ in (2, 3, 4, 5, 6, 8):
                for unr in (2, 4, 8):
                    out.append(d.with_knob(K.CUDNN_KNOB_TYPE_OCCUPANCY, occ)
                               .with_knob(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, unr))
        seen, res = set(), []
        for c in out:
            if c not in seen and self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS:
                seen.add(c)
                res.append(c)
        memo[key] = tuple(res)
        return memo[key]

    def candidates_key(self, sub):
        info = fast_info(sub)
        return ("other",) if info is None else (info[0][0], info[1], sub.kind)

    def _steps(self, sub, cfg):
        memo = sub.__dict__.setdefault("_norm_batch_steps", {})
        if cfg not in memo:
            memo[cfg] = _forward_steps(sub, cfg) if sub.kind == "norm_fwd" else _backward_steps(sub, cfg)
        return memo[cfg]

    def workspace_size(self, sub, cfg):
        return self._steps(sub, cfg)[1]

    def cost(self, sub, cfg, device):
        steps = self._steps(sub, cfg)[0]
        if steps is None:       # a config keep() rejects (e.g. a one-kernel grid that cannot be co-resident)
            return float("inf")
        t = steps_time(device, steps) * (1.0 + abs(_block(cfg) - 256) / 1e4)
        info = fast_info(sub)
        if info is None:
            return t
        var, occ, unr = _cols_knobs(cfg, info[0])
        if info[0][0] == "planes":     # the reverse plane order: not measured on the H200 yet, ranked second
            return t * (1.01 if var else 1.0)
        node = sub.anchor if sub.anchor is not None else sub.nodes[0]
        x, dy = node.inputs["X"], node.inputs.get("DY")
        t -= l2_reuse_bytes(info[0], var, device.l2_bytes, x, dy) / device.mem_bandwidth
        # measured on the H200 (experiments/probe_bn.py): VEC 4 loads and the one shared geometry move bytes faster
        if var is not None and var[0] == 1:
            # VEC 1 colsv is not measured on the H200 yet: ranked after the cols kernels it would replace
            return self.cost(sub, cfg.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0), device) * 1.05
        kc = cfg.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0)
        if var_persist(var) is not None and kc != _default_cols(sub):
            # the other one-kernel variants: slower than the default on the H200 (dev/perf_notes.md), ranked after it
            return self.cost(sub, cfg.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, _default_cols(sub)), device) * 1.03
        if var is not None and len(var) > 4 and kc != _default_cols(sub):
            # the other tree-combine / aligned-chunk variants: a little slower than the default on the H200
            t *= 1.02
        if var is not None and kc == _default_cols(sub):
            t *= 0.995
        if var is not None:
            t *= 0.97
            t *= 1.0 + abs((occ or (4 if dy is not None else 5)) - (4 if dy is not None else 5)) / 100 + abs(unr - 4) / 200
        return t

    def build(self, sub, cfg, ctx):
        steps, ws = self._steps(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
