"""Engine "conv_winograd_nonfused": 3x3, stride-1, undilated 2-D convolution forward and data
gradient (any groups) by Winograd F(2x2, 3x3) or F(4x4, 3x3) (knob WINO_TILE = 2 | 4) in four
kernels: filter transform, input transform, alpha^2 x groups batched GEMMs on the shared SIMT GEMM
kernel (knobs TILE_SIZE, SWIZZLE),
output transform with the fused epilogue (alpha / beta, per-channel bias, pointwise chain, one
residual). Any padding, NCHW / NHWC / any strides, CROSS_CORRELATION and CONVOLUTION modes,
FP32 / FP16 / BF16 I/O with FP32 math. WINOGRAD_NONFUSED semantics: the workspace holds the
transformed filter, input and products (conv_winograd_common). Notes: WINOGRAD, and
WINOGRAD_TILE_4x4 for F(4x4, 3x3) (less accurate: docs/winograd.md).

Weight gradient (conv_wgrad, one group, alpha / beta only): F(3x3, r x r) with WINO_TILE = r = 2 | 4
(the r x r dy tile is the "filter"): dy transform, x transform, alpha^2 x S batched GEMMs over chunks
of the dy tiles, output transform (conv_winograd_common.WgradProblem / WgradPlan, kernels/winograd/
wgrad.py).
"""
import math

from ...types import cudnnBackendLayoutType_t
from ..gemm import common as gc
from ..base import OK, Config, KnobSpec
from .common import (NN, K, S, NonfusedPlan, WgradPlan, WinogradEngineBase, WinoProblem,
                                   nonfused_cost, nonfused_cost_static, wino_knob)
from ..registry import register

#: the engine's knobs (WINO_TILE, TILE_SIZE, SWIZZLE) and the order a Config lists them in (by type)
_KNOBS = (int(K.CUDNN_KNOB_TYPE_WINO_TILE), int(K.CUDNN_KNOB_TYPE_TILE_SIZE), int(K.CUDNN_KNOB_TYPE_SWIZZLE))
_ORDER = tuple(sorted(range(3), key=lambda i: _KNOBS[i]))


@register
class ConvWinogradNonfusedEngine(WinogradEngineBase):
    name = "conv_winograd_nonfused"
    kinds = ("conv_fprop", "conv_dgrad", "conv_wgrad")
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW

    def knobs(self, sub):
        ks = self.__dict__.get("_knobs")
        if ks is None:
            ks = self.__dict__["_knobs"] = (wino_knob(), gc.tile_knob(self.TILES),
                                            KnobSpec(K.CUDNN_KNOB_TYPE_SWIZZLE, 1, 8, 1, 1))
        return ks

    def configs(self, sub, ctx):
        """WINO_TILE x the useful GEMM tiles (one swizzle each); remembered per subgraph."""
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject:
                return []
        return list(gc.memo(sub, ("configs", self.name), lambda: self._configs(p)))

    def _configs(self, p):
        tiles, made = self.__dict__.get("_made", (None, None))
        if tiles is not self.TILES:          # one Config object per knob values (its hash computed once)
            tiles, made = self.__dict__["_made"] = (self.TILES, {})
        out = []
        for m in (2, 4):
            Mg, Ng, Kg, batch = p.gemm(m)
            for t in gc.useful_tiles(tiles, Mg, Ng, Kg, batch):
                vals = (m, t, gc.swizzle_for(Mg, tiles[t].cfg, (1, 8)))
                c = made.get(vals)
                if c is None:
                    c = made[vals] = Config(self.name, tuple((_KNOBS[i], vals[i]) for i in _ORDER))
                out.append(c)
        return tuple(out)

    def gemm_config(self, cfg):
        """The GemmConfig of a config (remembered per knob values on the engine)."""
        tiles, memo = self.__dict__.get("_gcfg", (None, None))
        if tiles is not self.TILES:          # made for another tile table (or none yet)
            tiles, memo = self.__dict__["_gcfg"] = (self.TILES, {})
        hit = memo.get(cfg.knobs)
        if hit is None:
            hit = memo[cfg.knobs] = gc.gemm_config(tiles, cfg)
        return hit

    def values(self, cfg):
        """(WINO_TILE, TILE_SIZE, SWIZZLE) of a config (None where absent), remembered per knob values."""
        memo = self.__dict__.setdefault("_values", {})
        hit = memo.get(cfg.knobs)
        if hit is None:
            hit = memo[cfg.knobs] = tuple(cfg.get(k) for k in _KNOBS)
        return hit

    def static(self, cfg):
        """Per knob values (remembered on the engine): [WINO_TILE (2 when absent), the GEMM tile (None
        for a TILE_SIZE outside the table), its GemmConfig (None likewise), (device, ``gc.tile_static``)
        of the last device costed, whether the knob values are in range (the base class's check),
        whether SWIZZLE is a power of 2]."""
        tiles, memo = self.__dict__.get("_kstatic", (None, None))
        if tiles is not self.TILES:
            tiles, memo = self.__dict__["_kstatic"] = (self.TILES, {})
        hit = memo.get(cfg.knobs)
        if hit is None:
            m, t, sw = self.values(cfg)
            t_ok = t is None or 0 <= t < len(tiles)
            in_range = m in (2, 4) and t is not None and t_ok and sw is not None and 1 <= sw <= 8 \
                and len(cfg.knobs) == 3
            hit = memo[cfg.knobs] = [2 if m is None else m, tiles[0 if t is None else t] if t_ok else None,
                                     self.gemm_config(cfg) if t_ok else None, (None, None), in_range,
                                     sw is not None and gc.is_pow2(sw)]
        return hit

    def keep(self, sub, cfg, ctx):
        """(status, reason) of a config, remembered on the subgraph per knob values."""
        memo = sub.__dict__.get("_wino_keep")
        if memo is None:
            memo = sub.__dict__["_wino_keep"] = {}
        hit = memo.get(cfg.knobs)
        if hit is None:
            hit = memo[cfg.knobs] = self._keep(sub, cfg, ctx)
        return hit

    def _keep(self, sub, cfg, ctx):
        ks = self.static(cfg)
        if not ks[4]:                           # the knob ranges, with the base class's reasons
            st, why = super().keep(sub, cfg, ctx)
            if st != S.CUDNN_STATUS_SUCCESS:
                return st, why
        if not ks[5]:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: SWIZZLE = {self.values(cfg)[2]} is not a power of 2"
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject as e:
                return e.status, e.reason
        _, _, ws, (Mg, Ng, Kg, batch) = p._tile(ks[0])
        ok, why = gc.keep_config(self.name, ks[2], False, Mg, Ng, Kg, batch, True, "float32")
        if ok and ws >= 1 << 40:
            ok, why = False, f"{self.name}: workspace of {ws} B"
        return OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, why)

    def workspace_size(self, sub, cfg):
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject:
                return 0
        return gc.vector_workspace(getattr(p, "epi", None), p._tile(self.static(cfg)[0])[2])

    def config_notes(self, sub, cfg):
        if self.values(cfg)[0] == 4:
            return self.numerical_notes + (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4,)
        return self.numerical_notes

    def _cost(self, sub, cfg, device):
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject:
                return math.inf
        ks = self.static(cfg)
        if ks[1] is None:                       # TILE_SIZE outside the table: the plain path's error
            return self.cost_plain(sub, cfg, device)
        dev_st = ks[3]
        if dev_st[0] is not device:
            dev_st = ks[3] = (device, gc.tile_static(ks[1], ks[2], device, False))
        return nonfused_cost_static(device, p, ks[0], dev_st[1])

    def cost_plain(self, sub, cfg, device):
        """:meth:`cost` through ``nonfused_cost`` (``gc.cost``): what the static path equals."""
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject:
                return math.inf
        m, t, _ = self.values(cfg)
        tile = self.TILES[0 if t is None else t]
        return nonfused_cost(device, p, 2 if m is None else m, tile, self.gemm_config(cfg))

    def build(self, sub, cfg, ctx):
        p = self.problem(sub)
        m = cfg.get(K.CUDNN_KNOB_TYPE_WINO_TILE, 2)
        if p.kind == "wgrad":
            return WgradPlan(self, sub, cfg, p, m, self.gemm_config(cfg), self.workspace_size(sub, cfg))
        return NonfusedPlan(self, sub, cfg, p, m, self.gemm_config(cfg), self.workspace_size(sub, cfg))
