"""What the Winograd convolution engines share: the problem (which 3x3 convolutions they take, and
why not the others), the workspace layout, the cost model and the non-fused plan.

Non-fused F(m x m, 3 x 3) (m = 2 or 4, alpha = m + 2, ``A2 = alpha^2`` transform positions):

1. filter transform   U[xi, k, c]   = (G g G^T)[xi]              (A2 x K x C floats; dgrad: the
                                                                    rotated filter, channels swapped)
2. input transform    V[xi, c, t]   = (B^T d B)[xi]              (A2 x C x T, or A2 x T x C for NHWC)
3. A2 batched GEMMs   M[xi] (K x T) = U[xi] (K x C) @ V[xi] (C x T)   (the shared SIMT GEMM kernel;
                                                                    with groups: A2 x G GEMMs of Kg x T x Cg)
4. output transform   Y = A^T M A per (k, tile), through the fused epilogue.

``T = N * ceil(P / m) * ceil(Q / m)`` output tiles. The workspace is exactly U + V + M (float32),
in that order. The filter transform runs on every execute (no cache: a K*C*9 read, small beside V).
"""
import math

import numpy as np

from ...kernels.pointwise import epilogue as ep
from ...kernels.runtime import kcache
from ...kernels.gemm import make_gemm
from ...kernels.gemm.gemm import dummy, gemm_args
from ...kernels.winograd import kernels as wk
from ...kernels.winograd import wgrad as ww
from ...types import (cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnConvolutionMode_t,
                     cudnnStatus_t)
from ..gemm import common as gc
from .. import heuristics as H
from ..base import OK, Engine, KnobSpec

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
F32 = np.float32
#: input dtypes the transforms load (FP32 math, fp32 workspace)
IO_DTYPES = ("float32", "float16", "bfloat16")


def check_3x3_s1(node, where, port, w):
    """Raises :class:`gc.Reject` naming the field unless ``node`` is a 2-D, 3x3 (filter tensor ``w`` at
    ``port``), stride-1, undilated convolution: what every Winograd engine needs."""
    if node.spatial_dims != 2:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: spatial_dims = {node.spatial_dims} (2-D only)")
    if tuple(w.dims[2:]) != (3, 3):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {port}: filter {tuple(w.dims[2:])} is not 3x3")
    if tuple(node.stride) != (1, 1):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: stride {tuple(node.stride)} is not 1")
    if tuple(node.dilation) != (1, 1):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: dilation {tuple(node.dilation)} is not 1")


def channels_last(t, C):
    """Whether activation ``t`` with ``C`` channels is channels-last (the transforms' ``cfast``)."""
    return t.strides[1] == 1 and C > 1


class PerTile:
    """The per-tile interface of the Winograd problems over their ``_tile(m)`` (computed once per tile
    size m): ``((TH, TW, T), (U, V, M) sizes, workspace bytes, GEMM (M, N, K, batch))``."""

    def tiles(self, m):
        """(tile rows, tile columns, T = N x rows x columns) of tile m."""
        return self._tile(m)[0]

    def sizes(self, m):
        """(U, V, M) element counts of the workspace for tile m."""
        return self._tile(m)[1]

    def workspace(self, m):
        return self._tile(m)[2]

    def gemm(self, m):
        """(M, N, K, batch) of the batched GEMM."""
        return self._tile(m)[3]


class WinoProblem(PerTile):
    """A conv_fprop / conv_dgrad subgraph the Winograd engines can run, or :class:`gc.Reject` naming
    the field. Both become one stride-1 3x3 correlation ``out[n, ko] = sum_ci corr(in[n, ci], f[ko, ci])``:
    fprop reads X with W as is (``ko = k, ci = c``); dgrad reads DY with W rotated by 180 degrees and
    its channels swapped (``ko = c, ci = k``) at padding ``2 - pre_padding`` (a negative padding just
    starts the tiles inside the image). CONVOLUTION mode flips the filter once more."""

    def __init__(self, sub):
        node = sub.anchor
        where = f"node '{node.name}'"
        if sub.kind not in ("conv_fprop", "conv_dgrad"):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{where}: {sub.kind}: only conv_fprop "
                            "and conv_dgrad")
        if sub.tail is not None:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                            f"node '{sub.tail.name}': a trailing {sub.tail.OP} does not fuse into Winograd")
        self.kind = "dgrad" if sub.kind == "conv_dgrad" else "fprop"
        dgrad = self.kind == "dgrad"
        x, w, y = node.conv_tensors()          # dgrad: (DX, W, DY)
        src, out = (y, x) if dgrad else (x, y)
        src_port = "DY" if dgrad else "X"
        for port, t in ((src_port, src), ("W", w)):
            gc.check_tensor(node, port, t, IO_DTYPES)
        check_3x3_s1(node, where, "W", w)

        def classify(t):
            return gc.channel_axis(t, out.dims)

        self.epi = gc.epilogue_of(sub, out.dims, classify, rule=gc.CHANNEL_BIAS)
        fin = self.epi.out
        if tuple(fin.dims) != tuple(out.dims):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{fin.label}: dims {fin.dims} differ from the "
                            f"conv output's {out.dims}")
        gc.check_tensor(node, "output", fin, IO_DTYPES)
        for port, t in (("bias", self.epi.bias), ("residual", self.epi.residual)):
            if t is not None:
                gc.check_tensor(node, port, t, IO_DTYPES)
        self.alpha, self.beta = float(node.alpha), float(node.beta)
        if self.beta != 0 and sub.epilogue:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: beta = {self.beta} blends with a virtual "
                            "output (a fused epilogue follows): not supported")
        self.node, self.x, self.w, self.y = node, src, w, fin
        self.N, self.C, self.H, self.W = src.dims
        self.K, self.P, self.Q = fin.dims[1:]
        pre = tuple(node.pre_padding)
        if dgrad:
            pre = (2 - pre[0], 2 - pre[1])
        if self.N != fin.dims[0]:
            raise gc.Reject(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"{where}: batch {self.N} != {fin.dims[0]}")
        self.pad = pre
        cross = node.mode == cudnnConvolutionMode_t.CUDNN_CROSS_CORRELATION
        self.flip = cross if dgrad else not cross
        self.G = int(node.groups)
        self.Cg, self.Kg = self.C // self.G, self.K // self.G      # per group: input / output channels
        s_k, s_c, s_r, s_s = w.strides
        # filter addressing for the transform: (out channels per group, group step, out, in, r, s)
        if dgrad:     # output channel c = g*Kg + cl, input channel k = g*Cg + kl: w[g*Cg + kl, cl]
            self.filt = (self.Kg, self.Cg * s_k, s_c, s_k, s_r, s_s)
        else:         # w[g*Kg + kl, c]
            self.filt = (self.Kg, self.Kg * s_k, s_k, s_c, s_r, s_s)
        self.x_strides, self.y_strides = tuple(src.strides), tuple(fin.strides)
        self.cfast = channels_last(src, self.C)
        self.dt_x, self.dt_w, self.dt_y = gc.kdtype(src), gc.kdtype(w), self.epi.spec.out_dtype
        self.dt_bias = gc.kdtype(self.epi.bias) if self.epi.bias is not None else self.dt_y
        self.dt_res = gc.kdtype(self.epi.residual) if self.epi.residual is not None else self.dt_y
        self.in_bytes = gc.bytes_of(self.dt_x)
        self.out_bytes = gc.bytes_of(self.dt_y)
        self.w_bytes = gc.bytes_of(self.dt_w)
        self.extra_bytes = sum((math.prod(t.dims) if t.dims else 0) * t.itemsize
                               for t in (self.epi.bias, self.epi.residual) if t is not None)   # numel, without NumPy
        self._per_tile = {}           # m -> (tiles, sizes, workspace, gemm): computed once per tile size
        self._transform = {}          # (device, m) -> transform_time
        self._nf = {}                 # m -> (device, GEMM (M, N, K, batch), transform_time): nonfused_cost's
        self._fused_filter = (None, 0.0)   # (device, the fused engine's filter-transform time)

    # ---- the F(m x m, 3 x 3) decomposition (per tile size m, computed once)
    def _tile(self, m):
        """The F(m x m, 3 x 3) decomposition (GEMM batch: alpha^2 positions x groups)."""
        hit = self._per_tile.get(m)
        if hit is None:
            th, tw = -(-self.P // m), -(-self.Q // m)
            T = self.N * th * tw
            a2 = (m + 2) ** 2
            sizes = (a2 * self.K * self.Cg, a2 * self.C * T, a2 * self.K * T)
            hit = self._per_tile[m] = ((th, tw, T), sizes, 4 * sum(sizes), (self.Kg, T, self.Cg, a2 * self.G))
        return hit



def wino_knob():
    return KnobSpec(K.CUDNN_KNOB_TYPE_WINO_TILE, 2, 4, 2, 2, ("F(2x2,3x3)", "", "F(4x4,3x3)"))


class WinogradEngineBase(Engine):
    """Shared check_support / knobs / keep / cost plumbing (subclasses: ``build``, ``_cost``)."""

    kinds = ("conv_fprop", "conv_dgrad")
    numerical_notes = (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD,)
    TILES = gc.CONV_TILES

    def problem(self, sub):
        """The subgraph's :class:`WinoProblem` (made once per subgraph), or raises its :class:`gc.Reject`."""
        hit = sub.__dict__.get("_wino_problem")
        if hit is None:
            try:
                hit = (WgradProblem if sub.kind == "conv_wgrad" else WinoProblem)(sub)
            except gc.Reject as e:
                hit = e
            sub.__dict__["_wino_problem"] = hit
        if isinstance(hit, gc.Reject):
            raise hit
        return hit

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            self.problem(sub)
        except gc.Reject as e:
            return e.status, e.reason
        if not self.has_config(sub, ctx):
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{self.name}: no valid configuration for this problem"
        return OK

    def has_config(self, sub, ctx):
        """Does any config pass :meth:`keep`? (What ``candidates`` would be non-empty for, without
        costing or sorting anything: the first valid config ends the search.)"""
        return any(self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS for c in self.configs(sub, ctx))

    def config_notes(self, sub, cfg):
        if cfg.get(K.CUDNN_KNOB_TYPE_WINO_TILE, 2) == 4:
            return self.numerical_notes + (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4,)
        return self.numerical_notes

    def candidates(self, sub, ctx):
        dev = ctx.device if ctx is not None else None
        return gc.memo(sub, ("candidates", self.name, dev), lambda: self._candidates(sub, ctx))

    def _candidates(self, sub, ctx):
        try:
            self.problem(sub)
        except gc.Reject:
            return ()
        good = [c for c in self.configs(sub, ctx) if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
        dev = ctx.device if ctx is not None else None
        if dev is not None and len(good) > 1:
            if type(self).cost is _OWN_COST and "cost" not in self.__dict__:
                costs = self._cost_many(sub, good, dev)
            else:
                costs = [self.cost(sub, c, dev) for c in good]
            order = sorted(range(len(good)), key=costs.__getitem__)    # stable: ties keep configs() order
            good = [good[i] for i in order]
        return tuple(good[:64])

    def cost(self, sub, cfg, device):
        """Predicted seconds (``_cost``), remembered on the subgraph per engine, device and knob values
        (the device compared by identity: one ranking costs every config on one device object)."""
        memo = sub.__dict__.get("_wino_cost")
        if memo is None:
            memo = sub.__dict__["_wino_cost"] = {}
        per = memo.get(self.name)
        if per is None or per[0] is not device:
            per = memo[self.name] = (device, {})
        t = per[1].get(cfg.knobs)
        if t is None:
            t = per[1][cfg.knobs] = self._cost(sub, cfg, device)
        return t

    def _cost_many(self, sub, cfgs, device):
        """:meth:`cost` of each of ``cfgs`` (through the same table, looked up once)."""
        memo = sub.__dict__.get("_wino_cost")
        if memo is None:
            memo = sub.__dict__["_wino_cost"] = {}
        per = memo.get(self.name)
        if per is None or per[0] is not device:
            per = memo[self.name] = (device, {})
        table, out = per[1], []
        for c in cfgs:
            t = table.get(c.knobs)
            if t is None:
                t = table[c.knobs] = self._cost(sub, c, device)
            out.append(t)
        return out

    def candidate_costs(self, sub, device):
        """The per-subgraph cost table :meth:`cost` reads for ``device`` (filled by :meth:`_candidates`);
        None when there is none for this device object or ``cost`` is replaced."""
        if type(self).cost is not _OWN_COST or "cost" in self.__dict__:
            return None
        memo = sub.__dict__.get("_wino_cost")
        per = memo.get(self.name) if memo is not None else None
        return per[1] if per is not None and per[0] is device else None


#: the class's own ``cost`` (candidate_costs answers only while it is the one in use)
_OWN_COST = WinogradEngineBase.cost


# ------------------------------------------------------------------------------- non-fused

def transform_time(device, p, m):
    """Seconds of the three transform kernels (memory-bound: bytes over the DRAM bandwidth); remembered
    on the problem per (device, m): every GEMM config of a tile size shares it."""
    key = (device, m)
    t = p._transform.get(key)
    if t is None:
        t = p._transform[key] = _transform_time(device, p, m)
    return t


def _transform_time(device, p, m):
    if p.kind == "wgrad":
        return _wgrad_transform_time(device, p, m)
    nu, nv, nm = p.sizes(m)
    T = p.tiles(m)[2]
    a2 = (m + 2) ** 2
    filt = p.K * p.Cg * 9 * p.w_bytes + nu * 4
    # input: each tile reads its (m+2)^2 window (overlap re-reads come from L1/L2), writes V
    inp = p.N * p.C * p.H * p.W * p.in_bytes * (a2 / (m * m)) ** 0.5 + nv * 4
    out = nm * 4 + p.N * p.K * p.P * p.Q * p.out_bytes + p.extra_bytes
    t = 0.0
    per_sm = H.blocks_per_sm(device, wk.THREADS, 64, 0)     # the three kernels' shared launch shape
    for nbytes, threads in ((filt, p.K * p.C), (inp, p.C * T), (out, p.K * T)):
        t += H.kernel_time(device, nbytes=nbytes, blocks=wk.blocks(threads), threads=wk.THREADS, regs=64,
                           bytes_in_flight=min(threads, device.sm_count * 2048) * 4 * a2, per_sm=per_sm)
    return t


def nonfused_cost(device, p, m, tile, gcfg):
    """Seconds of the four kernels: the batched GEMM (``gc.cost``) plus the transforms."""
    Mg, Ng, Kg, batch = p.gemm(m)
    gemm = gc.cost(device, tile, gcfg, Mg, Ng, Kg, batch, 4, 4, 0, False)
    if p.kind == "wgrad":
        gemm *= wgrad_gemm_factor(p, m)
    return gemm + transform_time(device, p, m)


def nonfused_cost_static(device, p, m, st):
    """:func:`nonfused_cost` from the config's ``gc.tile_static`` tuple ``st`` (the same float): the
    problem's GEMM shape and transform time remembered on the problem per m (device by identity)."""
    hit = p._nf.get(m)
    if hit is None or hit[0] is not device:
        f = wgrad_gemm_factor(p, m) if p.kind == "wgrad" else 1.0
        hit = p._nf[m] = (device, p.gemm(m), transform_time(device, p, m), f)
    Mg, Ng, Kg, batch = hit[1]
    return gc.tile_cost(st, device, Mg, Ng, Kg, batch, 4, 4, 0, False, 1.0) * hit[3] + hit[2]


def workspace_parts(scratch, sizes):
    """(U, V, M): float32 Flats of ``sizes`` elements laid out back to back from the scratch buffer's start."""
    nu, nv, nm = sizes
    base = scratch.ptr
    return gc.Flat(base, nu, F32), gc.Flat(base + 4 * nu, nv, F32), gc.Flat(base + 4 * (nu + nv), nm, F32)


def filter_args(p, w, u):
    """Arguments of the filter-transform kernel (U over all output channels x in-group inputs)."""
    cog, s_grp, s_ko, s_ci, s_r, s_s = p.filt
    base = 0
    if p.flip:          # read the filter rotated by 180 degrees
        base, s_r, s_s = 2 * s_r + 2 * s_s, -s_r, -s_s
    return (w, u, p.K, p.Cg, cog, base, s_grp, s_ko, s_ci, s_r, s_s)


class NonfusedPlan(gc.LaunchPlan):
    """filter transform -> input transform -> batched GEMM -> output transform (+ epilogue)."""

    def __init__(self, engine, sub, cfg, p, m, gcfg, ws):
        super().__init__(engine, sub, cfg, ws)
        self.p, self.m = p, m
        epi = p.epi
        self.sizes = p.sizes(m)
        self.th, self.tw, self.T = p.tiles(m)
        nu, nv, nm = self.sizes
        b_layout = "nk" if p.cfast else "kn"
        self.gk = make_gemm(gcfg, "mk", b_layout, ("float32",) * 3, ep.EpilogueSpec())
        built = ep.build(ep.EpilogueSpec(epi.spec.steps, p.dt_y), p.dt_bias, p.dt_res)
        tx, tw_, ty = (gc.typing_flat(t, t.span_elements()) for t in (p.x, p.w, p.y))
        tu, tv, tm = (gc.Flat(0, n, F32) for n in self.sizes)
        tb = gc.typing_flat(epi.bias, epi.bias.span_elements()) if epi.bias is not None else dummy(p.dt_y)
        tr = gc.typing_flat(epi.residual, epi.residual.span_elements()) if epi.residual is not None else dummy(p.dt_y)
        key = gc.key_text("winograd", m, p.cfast)
        self.filt = kcache.get_or_compile(gc.key_text(key, "filter", p.dt_w), lambda: wk.make_filter(m, p.dt_w),
                                          gc.argtypes(self._filter_args(tw_, tu)))
        self.inp = kcache.get_or_compile(gc.key_text(key, "input", p.dt_x), lambda: wk.make_input(m, p.dt_x, p.cfast),
                                         gc.argtypes(self._input_args(tx, tv)))
        self.out = kcache.get_or_compile(gc.key_text(key, "output", built.key),
                                         lambda: wk.make_output(m, built, p.cfast),
                                         gc.argtypes(self._output_args(tm, ty, tb, tr, 1.0)))
        self.bl = gc.BlockLaunch(gc.key_text("gemm", gcfg, "mk", b_layout, ("float32",) * 3, self.gk.spec),
                                 self.gk.bk, self._gemm_pack(tu, tv, tm))

    # ---- argument tuples
    def _filter_args(self, w, u):
        return filter_args(self.p, w, u)

    def _input_args(self, x, v):
        p = self.p
        s_n, s_c, s_h, s_w = p.x_strides
        return (x, v, p.C, p.H, p.W, self.th, self.tw, self.T, p.pad[0], p.pad[1], s_n, s_c, s_h, s_w)

    def _output_args(self, mb, y, bias, res, alpha):
        p = self.p
        sy_n, sy_k, sy_h, sy_w = p.y_strides
        e = p.epi
        b_s = e.bias.strides[1] if e.bias is not None else 0
        if e.residual is not None:
            sr_n, sr_k, sr_h, sr_w = e.residual.strides
        else:
            sr_n = sr_k = sr_h = sr_w = 0
        return (mb, y, bias, res, p.K, p.P, p.Q, self.th, self.tw, self.T, sy_n, sy_k, sy_h, sy_w, b_s,
                sr_n, sr_k, sr_h, sr_w, F32(alpha), F32(p.beta))

    def _gemm_pack(self, u, v, mb):
        p, T = self.p, self.T
        Mg, Ng, Kg, _ = p.gemm(self.m)
        C, K_ = p.C, p.K
        # batch (position xi, group g); U [xi, g, kl, cl]; V [xi, c, t] or [xi, t, c]; M likewise
        a_st = (K_ * Kg, Mg * Kg, Kg, 1)
        b_st = (C * T, Kg, 1, C) if p.cfast else (C * T, Kg * T, T, 1)
        c_st = (K_ * T, Mg, 1, K_) if p.cfast else (K_ * T, Mg * T, T, 1)
        return gemm_args(self.gk, u, v, mb, M=Mg, N=Ng, K=Kg, a_strides=a_st, b_strides=b_st,
                         c_strides=c_st, batch=((self.m + 2) ** 2, p.G))

    # ---- launches
    def launches(self, views, scratch):
        p = self.p
        u, v, mb = workspace_parts(scratch, self.sizes)
        e = p.epi
        views, pre = gc.pack_launches(e, views, scratch, self.workspace_size)
        bias = gc.flat(views[e.bias.uid], e.bias) if e.bias is not None else dummy(p.dt_y)
        res = gc.flat(views[e.residual.uid], e.residual) if e.residual is not None else dummy(p.dt_y)
        alpha = gc.alpha_of(e, views, p.alpha, self.sub)
        x, w, y = (gc.flat(views[t.uid], t) for t in (p.x, p.w, p.y))
        T = self.T
        out = pre + [self.filt.prepare(wk.blocks(p.K * p.C), wk.THREADS, self._filter_args(w, u)),
               self.inp.prepare(wk.blocks(p.C * T), wk.THREADS, self._input_args(x, v))]
        out += self.bl.launches(self._gemm_pack(u, v, mb), 1.0, 0.0, None)
        out.append(self.out.prepare(wk.blocks(p.K * T), wk.THREADS, self._output_args(mb, y, bias, res, alpha)))
        return out




# ------------------------------------------------------------------------------- weight gradient

class WgradProblem(PerTile):
    """A conv_wgrad subgraph the non-fused engine runs as Winograd F(3x3, r x r) (kernels/winograd/
    wgrad.py; WINO_TILE = r = 2 or 4), or :class:`gc.Reject` naming the field: 3x3, stride 1,
    dilation 1, one group, any padding, no fused epilogue (alpha / beta only). Shares
    :class:`WinoProblem`'s per-tile interface: ``gemm(m)`` is (K, C, TC, alpha^2 x S), the reduction
    over the T dy tiles cut into S chunks of TC (``ww.splits`` for 128x128 blocks on 132 SMs)."""

    kind = "wgrad"

    def __init__(self, sub):
        node = sub.anchor
        where = f"node '{node.name}'"
        if sub.kind != "conv_wgrad":
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{where}: {sub.kind}: not conv_wgrad")
        if sub.tail is not None or sub.epilogue:
            n = sub.tail if sub.tail is not None else sub.epilogue[0]
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                            f"node '{n.name}': Winograd wgrad fuses no epilogue (alpha / beta only)")
        x, dw, dy = node.conv_tensors()
        for port, t in (("X", x), ("DY", dy), ("DW", dw)):
            gc.check_tensor(node, port, t, IO_DTYPES)
            if t.is_virtual:
                raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {port} is virtual")
        check_3x3_s1(node, where, "DW", dw)
        if int(node.groups) != 1:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: groups = {node.groups} (1 only)")
        self.N, self.C, self.H, self.W = x.dims
        self.K, self.P, self.Q = dy.dims[1:]
        pre, post = tuple(node.pre_padding), tuple(node.post_padding)
        if (dy.dims[0], dw.dims[0], dw.dims[1]) != (self.N, self.K, self.C) or \
                (self.P, self.Q) != (self.H + pre[0] + post[0] - 2, self.W + pre[1] + post[1] - 2):
            raise gc.Reject(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"{where}: X {x.dims}, DY {dy.dims} and DW "
                            f"{dw.dims} do not match a 3x3 stride-1 convolution at padding {pre} / {post}")
        self.node, self.x, self.dy, self.w = node, x, dy, dw
        self.pad = pre
        self.alpha, self.beta = float(node.alpha), float(node.beta)
        self.flip = node.mode != cudnnConvolutionMode_t.CUDNN_CROSS_CORRELATION
        self.G, self.Cg, self.Kg = 1, self.C, self.K
        self.cfast = channels_last(x, self.C)
        self.x_strides, self.dy_strides, self.w_strides = tuple(x.strides), tuple(dy.strides), tuple(dw.strides)
        self.dt_x, self.dt_dy, self.dt_w = gc.kdtype(x), gc.kdtype(dy), gc.kdtype(dw)
        self.in_bytes, self.dy_bytes = gc.bytes_of(self.dt_x), gc.bytes_of(self.dt_dy)
        self.w_bytes = gc.bytes_of(self.dt_w)
        self._per_tile, self._split, self._transform, self._nf = {}, {}, {}, {}

    def _tile(self, m):
        """((TH, TW, T), (U, V, M) sizes, workspace bytes, GEMM (M, N, K, batch)) for F(3x3, m x m);
        (S, TC, TPAD) in ``split(m)``."""
        hit = self._per_tile.get(m)
        if hit is None:
            th, tw, T = ww.tiles(self.P, self.Q, self.N, m)
            a2 = (m + 2) ** 2
            S_, TC = ww.splits(self.K, self.C, T, a2, 128, 128, 132, l2_bytes=L2_TARGET)
            sizes = ww.sizes(self.K, self.C, S_ * TC, S_, m)
            self._split[m] = (S_, TC, S_ * TC)
            hit = self._per_tile[m] = ((th, tw, T), sizes, 4 * sum(sizes), (self.K, self.C, TC, a2 * S_))
        return hit

    def split(self, m):
        """(S, TC, TPAD) of tile m."""
        self._tile(m)
        return self._split[m]



#: the part of the L2 that keeps M between the GEMM and the output kernel (on the H200's 50 MiB a 37.7 MB M
#: stayed, a 51.9 MB one did not; docs/winograd.md)
WG_L2_KEEP = 0.8
#: the H200's L2 kept for M (bytes): the split choice is made without a device (WgradProblem._tile)
L2_TARGET = int(WG_L2_KEEP * 50 * 1024 * 1024)
#: measured / model time of the dy and x transforms at ResNet-50 sizes on an H200 (about 1.3 past the L2,
#: 1.0 - 1.3 below it; docs/winograd.md)
WG_TRANSFORM_SLOW = 1.3
#: the batched GEMM: measured / ``gc.tile_cost`` -> WG_GEMM_EFF x (TC + ww.FIXED_K) / TC (128x128x16,
#: TC = 128 .. 6272, docs/winograd.md)
WG_GEMM_EFF = 0.8
#: output kernel, per alpha^2: (seconds per pass over the S splits with M in L2 (doubled past it),
#: its bandwidth reading M as a fraction of the device's), fitted to H200 measurements (docs/winograd.md)
WG_OUT = {16: (1.2e-6, 0.83), 36: (5.5e-6, 0.35)}
#: the output kernel's dw stores: coalesced (c fastest, KRSC; or KCRS-packed through shared memory,
#: ``ww.packed_dw``) / 9 scattered per thread (other strides), fraction of the device bandwidth
#: (the H200's measured store rates over its bandwidth, docs/winograd.md; the packed KCRS path not measured)
WG_STORE = (0.875, 0.094)


def wgrad_gemm_factor(p, m):
    """Measured / modelled batched-GEMM time of tile m: a fixed per-block cost of ``ww.FIXED_K``
    reduction elements over the chunk of TC (few k-steps: prologue and epilogue dominate)."""
    tc = p.split(m)[1]
    return WG_GEMM_EFF * (tc + ww.FIXED_K) / tc


def wgrad_transform_parts(device, p, m):
    """Seconds of the (dy, x, out) kernels of tile m. dy / x: memory-bound (dy and x read, x windows
    overlapping in L1 / L2; U and V written) x WG_TRANSFORM_SLOW. out: the larger of S latency-bound
    passes over M (doubled when M exceeds the L2) and M read + dw written at the measured bandwidths."""
    nu, nv, nm = p.sizes(m)
    a2 = (m + 2) ** 2
    S_, _, tpad = p.split(m)
    dy_b = p.N * p.K * p.P * p.Q * p.dy_bytes + nu * 4
    x_b = p.N * p.C * p.H * p.W * p.in_bytes * (a2 / (m * m)) ** 0.5 + nv * 4
    per_sm = H.blocks_per_sm(device, wk.THREADS, 64, 0)
    out = []
    for nbytes, threads in ((dy_b, p.K * tpad), (x_b, p.C * tpad)):
        out.append(WG_TRANSFORM_SLOW * H.kernel_time(
            device, nbytes=nbytes, blocks=wk.blocks(threads), threads=wk.THREADS, regs=64,
            bytes_in_flight=min(threads, device.sm_count * 2048) * 4 * a2, per_sm=per_sm))
    lat, frac = WG_OUT.get(a2, WG_OUT[36])
    m_bytes = nm * 4
    passes = S_ * lat * (2 if m_bytes > WG_L2_KEEP * device.l2_bytes else 1)
    coalesced = abs(p.w_strides[1]) == 1 or ww.packed_dw(p.w_strides, p.C)
    bw = device.mem_bandwidth
    stream = m_bytes / (frac * bw) + p.K * p.C * 9 * p.w_bytes / (WG_STORE[0 if coalesced else 1] * bw)
    out.append(H.LAUNCH_OVERHEAD + (passes if passes > stream else stream))
    return tuple(out)


def _wgrad_transform_time(device, p, m):
    """The wgrad transforms' seconds (:func:`wgrad_transform_parts`, summed)."""
    return sum(wgrad_transform_parts(device, p, m))


class WgradPlan(gc.LaunchPlan):
    """dy transform -> x transform -> alpha^2 x S batched GEMM -> output transform (alpha / beta)."""

    def __init__(self, engine, sub, cfg, p, m, gcfg, ws):
        super().__init__(engine, sub, cfg, ws)
        self.p, self.m = p, m
        self.sizes = p.sizes(m)
        self.th, self.tw, self.T = p.tiles(m)
        self.S, self.TC, self.TPAD = p.split(m)
        self.a_st, self.b_st, self.c_st, lay = ww.gemm_strides(p.K, p.C, self.TPAD, self.TC, self.S, m, p.cfast)
        self.gk = make_gemm(gcfg, lay[0], lay[1], ("float32",) * 3, ep.EpilogueSpec())
        tx, tdy, tdw = (gc.typing_flat(t, t.span_elements()) for t in (p.x, p.dy, p.w))
        tu, tv, tm = (gc.Flat(0, n, F32) for n in self.sizes)
        key = gc.key_text("winograd_wgrad", m, p.cfast)
        self.kdy = kcache.get_or_compile(gc.key_text(key, "dy", p.dt_dy), lambda: ww.make_dy(m, p.dt_dy, p.cfast),
                                         gc.argtypes(self._dy_args(tdy, tu)))
        self.kx = kcache.get_or_compile(gc.key_text(key, "x", p.dt_x), lambda: ww.make_x(m, p.dt_x, p.cfast),
                                        gc.argtypes(self._x_args(tx, tv)))
        packed = ww.packed_dw(p.w_strides, p.C)
        self.kout = kcache.get_or_compile(gc.key_text(key, "out", p.dt_w, packed),
                                          lambda: ww.make_out(m, p.dt_w, packed),
                                          gc.argtypes(self._out_args(tm, tdw, 1.0)))
        self.bl = gc.BlockLaunch(gc.key_text("gemm", gcfg, lay[0], lay[1], ("float32",) * 3, self.gk.spec),
                                 self.gk.bk, self._gemm_pack(tu, tv, tm))

    def _dy_args(self, dy, u):
        p = self.p
        return (dy, u, p.K, p.P, p.Q, self.th, self.tw, self.T, self.TPAD) + p.dy_strides

    def _x_args(self, x, v):
        p = self.p
        return (x, v, p.C, p.H, p.W, self.th, self.tw, self.T, self.TPAD, p.pad[0], p.pad[1]) + p.x_strides

    def _out_args(self, mb, dw, alpha):
        p = self.p
        return (mb, dw, p.K, p.C, self.S) + ww.dw_addressing(p.w_strides, p.flip) + (F32(alpha), F32(p.beta))

    def _gemm_pack(self, u, v, mb):
        p = self.p
        return gemm_args(self.gk, u, v, mb, M=p.K, N=p.C, K=self.TC, a_strides=self.a_st, b_strides=self.b_st,
                         c_strides=self.c_st, batch=((self.m + 2) ** 2, self.S))

    def launches(self, views, scratch):
        p = self.p
        u, v, mb = workspace_parts(scratch, self.sizes)
        x, dy, dw = (gc.flat(views[t.uid], t) for t in (p.x, p.dy, p.w))
        T = wk.THREADS
        out = [self.kdy.prepare(wk.blocks(p.K * self.TPAD), T, self._dy_args(dy, u)),
               self.kx.prepare(wk.blocks(p.C * self.TPAD), T, self._x_args(x, v))]
        out += self.bl.launches(self._gemm_pack(u, v, mb), 1.0, 0.0, None)
        out.append(self.kout.prepare(wk.blocks(p.K * p.C), T, self._out_args(mb, dw, p.alpha)))
        return out
