"""Engine "norm_rows": NORM_FORWARD / NORM_BACKWARD for LAYER_NORM, RMS_NORM and ADA_LAYER_NORM as row kernels
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

Layouts: the kernels above need each sample's block dense (any order of the non-batch dims: NCHW, NHWC, ...)
with the batch stride equal to n; Y / DY / DX sharing X's strides; SCALE / BIAS / DSCALE / DBIAS with X's
strides on the normalized dims (elements line up in memory order); statistics one dense value per row.
Any other layout (permuted, padded, tensors in layouts of their own) runs the strided kernels
(:mod:`ncudnn.engines.norm.rows_strided`: forward KERNEL_CFG 30, backward KERNEL_CFG 2), then the engine's
only config; on dense layouts that config is never ranked.
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
ADA_LAYER_NORM (adaptive layer norm: SCALE / BIAS per batch entry, [B, 1, C] on X [B, S, C]) runs the strided
kernels only (rows_strided.py: several row axes, per-batch parameter rows, dscale / dbias summed per batch entry).
The forward's knob tables and steps: rows_fwd.py; the backward's: rows_bwd.py; the knob accessors they share:
rows_knobs.py.
"""
import math

from ...kernels.norm import row as kn
from ...kernels.norm import row_bwd as kf
from ...types import cudnnBackendKnobType_t, cudnnBackendNormMode_t, cudnnStatus_t
from . import rows_pipe as npipe
from ..base import OK, Config, Engine, KnobSpec
from ..membound.common import MemPlan, kdtype, steps_time
from .common import check_norm_node
from .rows_bwd import (BWD_FUSED, BWD_FUSED_VARIANTS, BWD_TWO_PASS, backward_steps, bwd_dparams, bwd_vec, fused_geometry,
                       preferred_bwd_knobs)
from .rows_fwd import FWD_PERSIST_CTAS, FWD_SUB_VARIANTS, forward_steps, fwd_vec, preferred_knobs, sub_default, sub_reason
from .rows_knobs import KC, KS, KW, block_size, cta_count, kernel_cfg, load_size, tile_rows
from .rows_strided import BWD_STRIDED, FWD_STRIDED, is_strided, layout_reason, strided_kcfg, strided_steps
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NM = cudnnBackendNormMode_t
MODES = (NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM, NM.CUDNN_ADA_LAYER_NORM)
BLOCKS = (0, 32, 128, 256, 512, 1024)
ROWS = (0, 1, 2, 4, 8)


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
            return base + (KnobSpec(KC, 0, BWD_STRIDED, 1, 0), KnobSpec(KW, 0, 16, 1, 0), KnobSpec(KS, 0, 2, 1, 0))
        return base + (KnobSpec(KW, 0, 16, 1, 0), KnobSpec(KS, 0, 2, 1, 0), KnobSpec(KC, 0, FWD_STRIDED, 1, 0))

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if is_strided(sub, cfg):
            if any(v for k, v in cfg.knobs if k != int(KC)):
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: KERNEL_CFG {kernel_cfg(cfg)} (the strided " \
                    "kernels) takes every other knob 0"
            return OK
        why = self._layout(sub)
        if why:
            return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{self.name}: node '{self._node(sub).name}': {why}; only " \
                f"KERNEL_CFG {strided_kcfg(sub)} (the strided kernels) runs it"
        if sub.kind == "norm_fwd" and kernel_cfg(cfg):
            why = npipe.pipe_reason(sub, cfg, fwd_vec(sub)) if npipe.is_pipe(cfg) else sub_reason(sub, cfg)
            return (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}") if why else OK
        if block_size(cfg) not in BLOCKS:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE {block_size(cfg)} is not one of {BLOCKS}"
        if tile_rows(cfg) not in ROWS:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS {tile_rows(cfg)} is not one of {ROWS}"
        if sub.kind == "norm_bwd":
            return self._keep_bwd(sub, cfg)
        if tile_rows(cfg) and sub.kind == "norm_fwd":
            n = math.prod(sub.anchor.inputs["X"].dims[1:])
            if kn.row_config(n, block_size(cfg))[1] != 32:
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS {tile_rows(cfg)} needs warp-per-row mode " \
                    f"(BLOCK_SIZE 32, or 0 with rows of <= {32 * kn.VPT_MAX} elements)"
        elif tile_rows(cfg):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS is a forward knob"
        if load_size(cfg) and not fwd_vec(sub):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: LOAD_SIZE 16 needs a forward whose rows divide " \
                "into 16-byte vectors and X, Y, SCALE, BIAS packed with >= 16-byte alignment"
        if cta_count(cfg) and not load_size(cfg):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: CTA_COUNT (a persistent grid) is a knob of the " \
                "16-byte forward kernel (LOAD_SIZE 16)"
        if cfg.get(KS, 0) == 2 and not cta_count(cfg):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: forward STAGES 2 (the next row's loads early) " \
                "needs a persistent grid (CTA_COUNT > 0)"
        return OK

    @staticmethod
    def _node(sub):
        return sub.anchor if sub.anchor is not None else sub.nodes[0]

    def _layout(self, sub):
        """Why the dense row kernels cannot run this subgraph (None: they can; remembered on the subgraph)."""
        memo = sub.__dict__.setdefault("_norm_rows_layout", {})
        if "why" not in memo:
            memo["why"] = layout_reason(self._node(sub))
        return memo["why"]

    def _strided_config(self, sub):
        return super().default_config(sub).with_knob(KC, strided_kcfg(sub))

    def _keep_bwd(self, sub, cfg):
        if kernel_cfg(cfg) == BWD_TWO_PASS:
            if tile_rows(cfg) or load_size(cfg) or cta_count(cfg) or cfg.get(KS, 0):
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS, LOAD_SIZE, CTA_COUNT and STAGES are " \
                    "knobs of the fused backward (KERNEL_CFG 1)"
            return OK
        if not bwd_dparams(sub):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: KERNEL_CFG 1 fuses DSCALE / DBIAS into the dx " \
                f"pass; node '{sub.nodes[0].name}' writes neither"
        if load_size(cfg) and bwd_vec(sub) == 1:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: LOAD_SIZE 16 needs rows that divide into 16-byte " \
                "vectors and X, DY, DX, SCALE with >= 16-byte alignment"
        if fused_geometry(sub, cfg) is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: fused backward: a row of " \
                f"{math.prod(sub.nodes[0].inputs['X'].dims[1:])} elements needs more than {kf.EPT_MAX} values a " \
                f"thread at BLOCK_SIZE {block_size(cfg) or 1024}"
        return OK

    def configs(self, sub, ctx):
        """The backward's search space: the two-pass path and a list of fused geometries (the full
        knob product is thousands of configs); the forward's: every knob combination :meth:`keep` allows."""
        if sub is None or sub.kind != "norm_bwd":
            out = [Config(self.name, tuple(sorted(((int(KW), 0), (int(KS), 0), (int(KC), 0)))))]
            for spec in self.knobs(sub)[:3]:
                out = [c.with_knob(spec.type, v) for c in out for v in spec.values()]
            if sub is not None and load_size(self.default_config(sub)):   # persistent grids first (64 are ranked)
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
        load = 16 if bwd_vec(sub) > 1 else 0
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
        if self._layout(sub):                   # a layout only the strided kernels run
            return self._strided_config(sub)
        memo = sub.__dict__.setdefault("_norm_rows_default", {})
        if "cfg" not in memo and sub.kind == "norm_bwd":
            cfg = super().default_config(sub)
            for k, v in preferred_bwd_knobs(sub).items():
                cfg = cfg.with_knob(k, v)
            memo["cfg"] = cfg
        if "cfg" not in memo:
            memo["cfg"] = self._row_default(sub)
            for k, v in sub_default(sub).items():
                memo["cfg"] = memo["cfg"].with_knob(k, v)
        return memo["cfg"]

    def _row_default(self, sub):
        """The forward's row-kernel config from :func:`preferred_knobs` (the default unless
        :data:`FWD_SUB_DEFAULT` applies)."""
        b, r, l = preferred_knobs(sub)
        return super().default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b) \
            .with_knob(K.CUDNN_KNOB_TYPE_TILE_ROWS, r).with_knob(K.CUDNN_KNOB_TYPE_LOAD_SIZE, l)

    def candidates_key(self, sub):
        if self._layout(sub):
            return ("strided", sub.kind)
        if sub.kind != "norm_fwd":
            x = sub.nodes[0].inputs["X"]
            return ("bwd", bwd_dparams(sub), bwd_vec(sub), math.prod(x.dims[1:]),
                    tuple(preferred_bwd_knobs(sub).items()))
        node = sub.anchor
        n = math.prod(node.inputs["X"].dims[1:])
        # every dtype keep() reads (the .cs loads: X; the pipelined kernel: all of them, statistics included)
        dts = tuple(kdtype(t) if t is not None else None for t in npipe.fwd_tensors(node))
        return ("fwd", n, fwd_vec(sub), preferred_knobs(sub), dts, bool(sub.epilogue),
                tuple(sub_default(sub).items()))

    def _steps(self, sub, cfg):
        memo = sub.__dict__.setdefault("_norm_rows_steps", {})
        if cfg not in memo:
            memo[cfg] = strided_steps(sub, cfg) if is_strided(sub, cfg) else \
                forward_steps(sub, cfg) if sub.kind == "norm_fwd" else backward_steps(sub, cfg)
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
        grid of fewer partial rows ran several times slower)."""
        memo = sub.__dict__.setdefault("_norm_rows_time", {})
        default = self.default_config(sub)
        costed = cfg
        if is_strided(sub, cfg):
            key = (device, "strided")
        elif sub.kind == "norm_fwd":
            key = device
        elif kernel_cfg(cfg) == BWD_FUSED:     # every geometry costed as the default's (the measured best first)
            key = (device, BWD_FUSED)
            costed = default if kernel_cfg(default) == BWD_FUSED else cfg
        else:
            key = (device, BWD_TWO_PASS)
        t = memo.get(key)
        if t is None:
            t = memo[key] = steps_time(device, self._steps(sub, costed)[0])
        return t * (1.0 if cfg.knobs == default.knobs else 1.05)

    def build(self, sub, cfg, ctx):
        steps, ws = self._steps(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
