"""Engine "conv_winograd_fused": Winograd F(2x2, 3x3) with the input transform, the 16 products and
the output transform + fused epilogue in one kernel (CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD
semantics; ncudnn/kernels/winograd/fused.py), after a filter-transform launch into the workspace
(``U[xi, c, k]``: 16 * K * C floats, exactly the workspace). Same problems as
conv_winograd_nonfused but groups = 1 (3x3, stride 1, undilated fprop / dgrad, any padding, NCHW /
NHWC, FP32 / FP16 / BF16 I/O). Knob TILE_SIZE picks the block shape (channels x tiles per block).
"""
import math

import numpy as np

from ...kernels.pointwise import epilogue as ep
from ...kernels.runtime import kcache
from ...kernels.gemm.gemm import dummy
from ...kernels.winograd import kernels as wk
from ...kernels.winograd.fused import FusedConfig, check, make_fused
from ...platform import simulator_enabled
from ...types import cudnnBackendLayoutType_t
from ..gemm import common as gc
from .. import heuristics as H
from ..base import OK, Config, KnobSpec
from .common import K, S, WinogradEngineBase, WinoProblem, filter_args
from ..registry import register

F32 = np.float32
#: (label, config, estimated FP32 TFLOP/s of its 16-product mainloop (not measured on a GPU yet),
#:  registers per thread: sm_90 compile check (kernels/winograd/cases.py) where known, else estimate)
FUSED_TILES = (
    ("32k x 32t x 8c t8x8", FusedConfig(BK=32, BT=32, BC=8, TK=8, TT=8, IP=4), 12.0, 128),
    ("64k x 16t x 8c t8x8", FusedConfig(BK=64, BT=16, BC=8, TK=8, TT=8, IP=2), 12.0, 128),
    ("8k x 8t x 4c t4x4", FusedConfig(BK=8, BT=8, BC=4, TK=4, TT=4, IP=2), 2.0, 64),
    ("8k x 8t x 4c t8x8", FusedConfig(BK=8, BT=8, BC=4, TK=8, TT=8, IP=8), 1.0, 128),   # simulator-size
)


@register
class ConvWinogradFusedEngine(WinogradEngineBase):
    name = "conv_winograd_fused"
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st == S.CUDNN_STATUS_SUCCESS and self.problem(sub).G != 1:
            p = self.problem(sub)
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{p.node.name}': groups = {p.G} (the fused kernel " \
                "takes groups = 1; conv_winograd_nonfused runs groups)"
        return st, why

    def knobs(self, sub):
        ks = self.__dict__.get("_knobs")
        if ks is None:
            ks = self.__dict__["_knobs"] = (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0, len(FUSED_TILES) - 1, 1, 0,
                                                     tuple(t[0] for t in FUSED_TILES)),)
        return ks

    def configs(self, sub, ctx):
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject:
                return []
        table, every = self.__dict__.get("_configs", (None, None))
        if table is not FUSED_TILES:       # one Config per block shape, made once per table
            every = tuple(Config(self.name, ((int(K.CUDNN_KNOB_TYPE_TILE_SIZE), i),)) for i in range(len(FUSED_TILES)))
            self.__dict__["_configs"] = (FUSED_TILES, every)
        if simulator_enabled() and p.K * p.tiles(2)[2] <= gc.SIM_SMALL_OUTPUT:
            return [every[-1]]      # tiny problems in the simulator: the 16-thread block
        return list(every)

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        return self._tile_ok(cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE))

    def _tile_ok(self, i):
        """(status, reason) of block shape ``i`` (depends on the shape only: remembered per index)."""
        table, memo = self.__dict__.get("_tile_memo", (None, None))
        if table is not FUSED_TILES:
            table, memo = self.__dict__["_tile_memo"] = (FUSED_TILES, {})
        hit = memo.get(i)
        if hit is None:
            _, fc, _, regs = FUSED_TILES[i]
            ok, why = check(fc)
            if ok and fc.threads * regs > 65536:
                ok, why = False, f"{fc.threads} threads x {regs} registers > 65536 per block"
            hit = memo[i] = OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}")
        return hit

    def config_notes(self, sub, cfg):
        return self.numerical_notes

    def workspace_size(self, sub, cfg):
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject:
                return 0
        return gc.vector_workspace(p.epi, 16 * p.K * p.C * 4)

    def _cost(self, sub, cfg, device):
        p = sub.__dict__.get("_wino_problem")      # the remembered problem, without a call
        if p.__class__ is not WinoProblem:
            try:
                p = self.problem(sub)
            except gc.Reject:
                return math.inf
        i = cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)
        label, fc, tflops, regs = FUSED_TILES[i]
        per_sm, eff = self._tile_static(i, device)
        T = p.tiles(2)[2]
        flops = 2.0 * 16 * p.K * T * p.C
        blocks = gc.ceil_div(T, fc.BT) * gc.ceil_div(p.K, fc.BK)
        nbytes = (p.N * p.C * p.H * p.W * p.in_bytes * 2 + 16 * p.K * p.C * 4 * gc.ceil_div(T, fc.BT)
                  / max(1, min(blocks, device.sm_count)) + p.N * p.K * p.P * p.Q * p.out_bytes + p.extra_bytes)
        main = H.kernel_time(device, flops=flops / eff, nbytes=nbytes, blocks=blocks, threads=fc.threads, regs=regs,
                             smem=fc.smem_bytes(), tile=(fc.BK, fc.BT), problem=(p.K, T), per_sm=per_sm)
        dev, filt = p._fused_filter      # the filter transform: the same for every block shape
        if dev is not device:
            filt = H.kernel_time(device, nbytes=p.K * p.C * 9 * 4 + 16 * p.K * p.C * 4, blocks=wk.blocks(p.K * p.C))
            p._fused_filter = (device, filt)
        return main + filt

    def _tile_static(self, i, device):
        """(resident blocks per SM, efficiency against the FP32 peak) of block shape ``i`` on
        ``device``: remembered per shape for the last device (compared by identity)."""
        table, memo = self.__dict__.get("_fstatic", (None, None))
        if table is not FUSED_TILES:
            table, memo = self.__dict__["_fstatic"] = (FUSED_TILES, {})
        hit = memo.get(i)
        if hit is None or hit[0] is not device:
            _, fc, tflops, regs = FUSED_TILES[i]
            hit = memo[i] = (device, H.blocks_per_sm(device, fc.threads, regs, fc.smem_bytes()),
                             tflops * 1e12 / device.peak("fp32"))
        return hit[1], hit[2]

    def build(self, sub, cfg, ctx):
        p = self.problem(sub)
        return FusedPlan(self, sub, cfg, p, FUSED_TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)][1],
                         self.workspace_size(sub, cfg))


class FusedPlan(gc.LaunchPlan):
    """filter transform (U[xi, c, k] into the workspace) -> one fused kernel."""

    def __init__(self, engine, sub, cfg, p, fc, ws):
        super().__init__(engine, sub, cfg, ws)
        self.p, self.fc = p, fc
        self.th, self.tw, self.T = p.tiles(2)
        epi = p.epi
        built = ep.build(ep.EpilogueSpec(epi.spec.steps, p.dt_y), p.dt_bias, p.dt_res)
        tx, tw_, ty = (gc.typing_flat(t, t.span_elements()) for t in (p.x, p.w, p.y))
        tu = gc.Flat(0, 16 * p.K * p.C, F32)
        tb = gc.typing_flat(epi.bias, epi.bias.span_elements()) if epi.bias is not None else dummy(p.dt_y)
        tr = gc.typing_flat(epi.residual, epi.residual.span_elements()) if epi.residual is not None else dummy(p.dt_y)
        self.filt = kcache.get_or_compile(gc.key_text("winograd", 2, "filter_kfast", p.dt_w),
                                          lambda: wk.make_filter(2, p.dt_w, kfast=True),
                                          gc.argtypes(self._filter_args(tw_, tu)))
        self.main = kcache.get_or_compile(gc.key_text("winograd_fused", fc, p.dt_x, p.cfast, built.key),
                                          lambda: make_fused(fc, p.dt_x, built, p.cfast),
                                          gc.argtypes(self._main_args(tx, tu, ty, tb, tr, 1.0)))

    def _filter_args(self, w, u):
        return filter_args(self.p, w, u)

    def _main_args(self, x, u, y, bias, res, alpha):
        p, e = self.p, self.p.epi
        b_s = e.bias.strides[1] if e.bias is not None else 0
        r_st = tuple(e.residual.strides) if e.residual is not None else (0, 0, 0, 0)
        return (x, u, y, bias, res, p.C, p.K, p.H, p.W, p.P, p.Q, self.th, self.tw, self.T, p.pad[0], p.pad[1],
                *p.x_strides, *p.y_strides, b_s, *r_st, F32(alpha), F32(p.beta))

    def launches(self, views, scratch):
        p, e, fc = self.p, self.p.epi, self.fc
        u = gc.Flat(scratch.ptr, 16 * p.K * p.C, F32)
        views, pre = gc.pack_launches(e, views, scratch, self.workspace_size)
        bias = gc.flat(views[e.bias.uid], e.bias) if e.bias is not None else dummy(p.dt_y)
        res = gc.flat(views[e.residual.uid], e.residual) if e.residual is not None else dummy(p.dt_y)
        x, w, y = (gc.flat(views[t.uid], t) for t in (p.x, p.w, p.y))
        alpha = gc.alpha_of(e, views, p.alpha, self.sub)
        grid = (gc.ceil_div(self.T, fc.BT), gc.ceil_div(p.K, fc.BK))
        return pre + [self.filt.prepare(wk.blocks(p.K * p.C), wk.THREADS, self._filter_args(w, u)),
                self.main.prepare(grid, fc.threads, self._main_args(x, u, y, bias, res, alpha))]
