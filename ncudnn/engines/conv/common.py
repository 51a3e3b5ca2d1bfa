"""Convolution subgraphs as implicit GEMMs: the problem the conv engines share, and the family base of the
implicit-GEMM engines (conv_implicit_gemm, conv_implicit_precomp).

:func:`conv_problem` reads a conv_fprop / conv_dgrad / conv_wgrad subgraph into a
:class:`ConvProblem`: the kernel geometry (``kernels.conv.geometry``; 1-3 spatial dims, any stride,
asymmetric padding, dilation, groups, convolution or cross-correlation, any element strides: NCHW,
NHWC or other), the fused epilogue (fprop / dgrad: bias per channel, pointwise chain, one residual or
backward-activation operand; wgrad: pointwise only), the reduction order ("rsc" for channels-last
activations, else "crs") and the per-operand coalescing hints.
"""

import math

from ...kernels.conv import ConvGeometry, geometry, make_conv_dgrad, make_conv_fprop, make_conv_wgrad
from ...types import (cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnConvolutionMode_t,
                     cudnnStatus_t)
from .. import device as dev_mod
from ..gemm import common as gc
from .. import heuristics as H
from ..base import OK, Engine, KnobSpec
from ..gemm.tiled import TiledGemm

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
DIRECTION = {"conv_fprop": "fprop", "conv_dgrad": "dgrad", "conv_wgrad": "wgrad"}


def _pad5(strides):
    s = tuple(int(v) for v in strides)
    return s[:2] + (0,) * (5 - len(s)) + s[2:]


_BYTES = {}


def _bytes_of(name):
    """gc.bytes_of, remembered per dtype name."""
    hit = _BYTES.get(name)
    if hit is None:
        hit = _BYTES[name] = gc.bytes_of(name)
    return hit


_new = object.__new__
_INT = int


def _ints(v, n):
    """``v`` as a tuple of ``n`` plain ints, or None (anything else: the general path decides)."""
    if type(v) is not tuple:
        if type(v) is not list:
            return None
        v = tuple(v)
    if len(v) != n:
        return None
    for x in v:
        if type(x) is not _INT:
            return None
    return v


def conv_geometry(x_t, w_t, y_t, node):
    """``kernels.conv.geometry`` of a conv node with its tensors (x, w, y as the node reads them; x's and
    w's dims are the node's): for plain-int shapes, parameters and strides of 1-3 spatial dims, a valid
    geometry is written out with the output sizes the IR node gives (``node.output_spatial()``, the
    package's one output-size formula) in the same :class:`ConvGeometry` fields; anything else (lists of
    other numbers, scalars, invalid values, an empty output) goes through ``geometry`` itself, which
    raises its ValueError. ``tests/engines/conv/test_conv_geometry_written_out.py`` holds the two equal."""
    xd, wd = x_t.dims, w_t.dims
    nd = len(xd)
    nsp = nd - 2
    cross = node.mode == cudnnConvolutionMode_t.CUDNN_CROSS_CORRELATION
    groups = node.groups
    xd, wd = _ints(xd, nd), _ints(wd, nd)
    s, pre, post, d = (_ints(node.stride, nsp), _ints(node.pre_padding, nsp), _ints(node.post_padding, nsp),
                       _ints(node.dilation, nsp))
    xs, ws, ys = _ints(x_t.strides, nd), _ints(w_t.strides, nd), _ints(y_t.strides, nd)
    if (1 <= nsp <= 3 and xd is not None and wd is not None and s is not None and pre is not None
            and post is not None and d is not None and xs is not None and ws is not None and ys is not None
            and type(groups) is _INT):
        N, C, K, Cg = xd[0], xd[1], wd[0], wd[1]
        ok = groups >= 1 and not C % groups and not K % groups and Cg == C // groups
        if ok and min(s) >= 1 and min(d) >= 1 and min(pre) >= 0 and min(post) >= 0:
            out = node.output_spatial()     # the IR node's output sizes (ir.ops.conv_common.out_size)
            if min(out) >= 1:
                one, zero = (1,) * (3 - nsp), (0,) * (3 - nsp)
                g = _new(ConvGeometry)
                g.__dict__.update(N=N, C=C, K=K, G=groups, DHW=one + xd[2:], TRS=one + wd[2:],
                                  OPQ=one + tuple(out), stride=one + s, pad=zero + pre, dil=one + d,
                                  flip=not cross, x_strides=xs[:2] + zero + xs[2:],
                                  w_strides=ws[:2] + zero + ws[2:], y_strides=ys[:2] + zero + ys[2:])
                return g
    return geometry(x_t.dims, w_t.dims, stride=node.stride, pre_pad=node.pre_padding,
                    post_pad=node.post_padding, dilation=node.dilation, groups=node.groups,
                    cross_correlation=cross, x_strides=x_t.strides, w_strides=w_t.strides, y_strides=y_t.strides)


class ConvProblem:
    def __init__(self, sub):
        node = sub.anchor
        self.node, self.kind = node, DIRECTION[sub.kind]
        x, w, y = node.conv_tensors()
        out = next(iter(node.outputs.values()))
        for port, t in zip(("x", "w", "y"), (x, w, y)):
            gc.check_tensor(node, port, t)

        def classify(t):
            return gc.channel_axis(t, out.dims)

        wgrad = self.kind == "wgrad"
        self.epi = gc.epilogue_of(sub, out.dims, classify, allow_bias=not wgrad, allow_residual=not wgrad,
                                    rule=gc.CHANNEL_BIAS)
        fin = self.epi.out
        if tuple(fin.dims) != tuple(out.dims):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{fin.label}: dims {fin.dims} differ from the "
                            f"conv output's {out.dims}")
        gc.check_tensor(node, "output", fin)
        self.alpha, self.beta = float(node.alpha), float(node.beta)
        if self.beta != 0 and sub.epilogue:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': beta = {self.beta} blends with "
                            "a virtual output (a fused epilogue follows): not supported")
        # the written tensor replaces the anchor's output in the addressing
        if self.kind == "fprop":
            x_t, w_t, y_t = x, w, fin
            ins = (x, w)
        elif self.kind == "dgrad":
            x_t, w_t, y_t = fin, w, y
            ins = (y, w)
        else:
            x_t, w_t, y_t = x, fin, y
            ins = (y, x)
        self.x, self.w, self.y, self.ins = x_t, w_t, y_t, ins
        names = [gc.kdtype(ins[0]), gc.kdtype(ins[1]), self.epi.spec.out_dtype]
        self.fp64 = gc.check_precision(node, names)
        bias_dt = gc.kdtype(self.epi.bias) if self.epi.bias is not None else names[2]
        res_dt = gc.kdtype(self.epi.residual) if self.epi.residual is not None else names[2]
        self.dtypes = tuple(names) + ((bias_dt, res_dt) if not wgrad else ())
        nsp = node.spatial_dims
        try:
            self.g = conv_geometry(x_t, w_t, y_t, node)
        except ValueError as e:
            raise gc.Reject(S.CUDNN_STATUS_BAD_PARAM, f"node '{node.name}': {e}") from None
        if tuple(self.g.OPQ[3 - nsp:]) != tuple(y_t.dims[2:]):
            raise gc.Reject(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"node '{node.name}': output spatial dims "
                            f"{y_t.dims[2:]} differ from the geometry's {self.g.OPQ[3 - nsp:]}")
        g = self.g
        self.gemm = {"fprop": g.gemm_fprop, "dgrad": g.gemm_dgrad, "wgrad": g.gemm_wgrad}[self.kind]()
        self.bias_stride = self.epi.bias.strides[1] if self.epi.bias is not None else 1
        self.res_strides = _pad5(self.epi.residual.strides) if self.epi.residual is not None else None
        # reduction order and coalescing hints (performance only: the loaders take any strides)
        sx, sw, sy = g.x_strides, g.w_strides, g.y_strides
        if self.kind == "fprop":
            nhwc = sx[1] == 1 and g.C > 1
            self.order = "rsc" if nhwc else "crs"
            self.a_fast = "k" if nhwc else "outer"
            self.b_fast = "k" if (sw[1] == 1 if nhwc else sw[4] == 1) else "outer"
        elif self.kind == "dgrad":
            nhwc = sy[1] == 1 and g.K > 1
            self.order = "rsc" if nhwc else "crs"
            self.a_fast = "k" if nhwc else "outer"
            self.b_fast = "outer" if sw[1] == 1 else "k"
        else:
            nhwc = sx[1] == 1 and g.C > 1
            self.order = "rsc" if nhwc else "crs"
            self.a_fast = "outer" if sy[1] == 1 and g.K > 1 else "k"
            self.b_fast = "outer" if nhwc else "k"
        self.in_bytes = _bytes_of(names[0])
        self.out_bytes = _bytes_of(names[2])
        extra = 0
        for t in (self.epi.bias, self.epi.residual):
            if t is not None and t.dims:
                extra += math.prod(t.dims) * t.itemsize      # t.numel * t.itemsize, without NumPy
        self.extra_bytes = extra

    def make(self, gcfg, precomp):
        """The kernels' conv object for a GemmConfig."""
        spec = self.epi.spec
        if self.kind == "fprop":
            return make_conv_fprop(gcfg, self.dtypes, spec, self.order, self.a_fast, self.b_fast, precomp)
        if self.kind == "dgrad":
            return make_conv_dgrad(gcfg, self.g.stride, self.dtypes, spec, self.order, self.a_fast, self.b_fast,
                                   precomp)
        return make_conv_wgrad(gcfg, self.dtypes, spec, self.order, self.a_fast, self.b_fast, precomp)

    def pack(self, kern, arg, table=None):
        """The kernel's checked argument pack; ``arg(t)`` gives each tensor's Flat."""
        e, g = self.epi, self.g
        if self.kind == "wgrad":
            return kern.pack(g, arg(self.x), arg(self.y), arg(self.w), table=table)
        bias = arg(e.bias) if e.bias is not None else None
        res = arg(e.residual) if e.residual is not None else None
        if self.kind == "fprop":
            return kern.pack(g, arg(self.x), arg(self.w), arg(self.y), table=table, bias=bias,
                             bias_stride=self.bias_stride, residual=res, residual_strides=self.res_strides)
        return kern.pack(g, arg(self.y), arg(self.w), arg(self.x), table=table, bias=bias,
                         bias_stride=self.bias_stride, residual=res, residual_strides=self.res_strides)


def conv_problem(sub):
    """The memoized :class:`ConvProblem` of a conv subgraph (raises gc.Reject, memoized too)."""
    hit = sub.__dict__.get("_conv_p")
    if hit is None:
        memo = sub.__dict__.setdefault("_conv_problem", {})
        hit = memo.get("p")
        if hit is None:
            try:
                hit = ConvProblem(sub)
            except gc.Reject as e:
                hit = e
            memo["p"] = hit
        sub.__dict__["_conv_p"] = hit
    if hit.__class__ is not ConvProblem:
        raise hit
    return hit


#: largest SPLIT_K offered (wgrad reduces over N*O*P*Q: 100 352 for ResNet-50 conv2 at N = 32)
MAX_SPLIT = 256


def wgrad_splits(tile, tiles, reduction, device=None):
    """SPLIT_K values worth ranking for a wgrad tile. Every split is a candidate of its own (the
    ranking costs each one: a small unsplit grid never hides a tile that wins once split): powers
    of two whose grid holds from half a wave to eight waves of resident blocks, each slice at least
    8 k-tiles long; when no split reaches half a wave, the largest one that keeps 8 k-tiles."""
    dev = device or dev_mod.current()
    c = tile.cfg
    per_sm = max(H.blocks_per_sm(dev, c.num_threads, tile.regs, c.smem_bytes()), 1)
    slots = dev.sm_count * per_sm
    feasible = []
    s = 2
    while s <= MAX_SPLIT and reduction >= s * c.BLOCK_K * 8:
        feasible.append(s)
        s *= 2
    out = [s for s in feasible if slots // 2 <= tiles * s <= 8 * slots]
    if not out and feasible and tiles * feasible[-1] < slots // 2:
        out = feasible[-1:]
    return tuple(out)


class ConvEngineBase(Engine):
    """An implicit-GEMM conv engine (subclasses: ``PRECOMP``, ``PHASED``, ``LOADER_EFF``, ``extra_check``);
    the shared tiled-GEMM machinery is ``self.tiled`` (:class:`~ncudnn.engines.gemm.tiled.TiledGemm`)."""

    kinds = ("conv_fprop", "conv_dgrad", "conv_wgrad")
    TILES = gc.CONV_TILES
    numerical_notes = ()
    PRECOMP = False
    PHASED = False      # offer SPLIT_RS (per-phase dgrad of strided convolutions)
    #: efficiency against the tile's measured GEMM figure (loader arithmetic): an estimate
    LOADER_EFF = 1.0

    def __init__(self):
        self.tiled = TiledGemm(self)

    def problem(self, sub):
        return conv_problem(sub)

    def gemm_shape(self, p):
        return (*p.gemm, p.g.G)

    def efficiency(self, p):
        return self.LOADER_EFF

    def gemm_config(self, cfg):
        return self.tiled.gemm_config(cfg)

    def extra_check(self, sub, p):
        """Engine-specific refusals (raise gc.Reject)."""

    # ---- the Engine interface, answered by the tiled-GEMM machinery

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            p = self.problem(sub)
            self.extra_check(sub, p)
            gc.tail_of(sub, p.epi.out, ctx)
        except gc.Reject as e:
            return e.status, e.reason
        if not self.tiled.any_kept(sub):
            M, N, K_ = p.gemm
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{self.name}: no tile fits the implicit GEMM " \
                f"M={M}, N={N}, K={K_}, groups={p.g.G}"
        return OK

    def knobs(self, sub):
        return self.tiled.knobs()

    def default_config(self, sub):
        return self.tiled.default_config(sub)

    def keep(self, sub, cfg, ctx):
        return self.tiled.keep(sub, cfg, ctx)

    def config_notes(self, sub, cfg):
        return self.tiled.config_notes(sub, cfg)

    def candidates(self, sub, ctx):
        return self.tiled.candidates(sub, ctx)

    def cost(self, sub, cfg, device):
        return self.tiled.cost(sub, cfg, device)

    def candidate_costs(self, sub, device):
        return self.tiled.candidate_costs(sub, device)

    def workspace_size(self, sub, cfg):
        return self.tiled.workspace_size(sub, cfg)

    # ---- the hooks of TiledGemm

    def knob_specs(self):
        return (gc.tile_knob(self.TILES),
                KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K, 1, MAX_SPLIT, 1, 1),
                KnobSpec(K.CUDNN_KNOB_TYPE_SWIZZLE, 1, 8, 1, 1),
                KnobSpec(K.CUDNN_KNOB_TYPE_EDGE, 1, 1, 1, 1, ("predicated edges and padding",)),
                KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 0, 1, 1, 1,
                         ("atomic accumulation (NONDETERMINISTIC)", "workspace partials + ordered reduce")),
                KnobSpec(K.CUDNN_KNOB_TYPE_STAGES, 1, 2, 1, 2)) + (
                (KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_RS, 0, 1, 1, 0,
                          ("one GEMM over every tap", "strided dgrad: one GEMM per output phase, no zero taps")),)
                if self.PHASED else ())

    def phased(self, sub, cfg):
        """Whether ``cfg`` runs the per-phase (sub-pixel) dgrad."""
        return self.PHASED and cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_RS, 0) == 1

    @property
    def keep_extra(self):
        return self._keep_phased if self.PHASED else None

    def needs_extra(self, cfg):
        return self.PHASED and cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_RS, 0) == 1

    def _keep_phased(self, sub, cfg, p):
        """The GEMM checks passed: SPLIT_RS = 1 needs the dgrad of a strided convolution, unsplit."""
        if cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_RS, 0) != 1:
            return OK
        if p.kind != "dgrad" or all(v == 1 for v in p.g.stride):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: SPLIT_RS = 1 (per-phase GEMMs) is for the " \
                f"dgrad of a strided convolution, not {p.kind} with stride {p.g.stride}"
        if cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1) != 1:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: SPLIT_RS = 1 needs SPLIT_K = 1"
        return OK

    @property
    def adjust_cost(self):
        return self._phased_adjust if self.PHASED else None

    def _phased_adjust(self, sub, cfg, c, device):
        """A per-phase dgrad config's cost from its one-GEMM cost ``c``."""
        if not self.phased(sub, cfg) or not math.isfinite(c):
            return c
        return self._phased_cost(sub, c)

    def rank_configs(self, sub, configs, costs):
        return self.tiled.rank(configs, costs)

    def _phased_cost(self, sub, c):
        """The per-phase dgrad's time from the one-GEMM time ``c``: the useful taps' share, 5 % more,
        one launch per extra phase."""
        from ...kernels.conv.dgrad_phased import phases
        g = self.problem(sub).g
        ph = phases(g)
        useful = sum(len(taps) * math.prod(n) for _, n, taps, _ in ph)
        return c * useful / max(g.taps * math.prod(g.DHW), 1) * 1.05 + 3e-6 * (len(ph) - 1)

    def make_space(self, sub):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return []
        base = self.default_config(sub)
        wgrad = p.kind == "wgrad"
        M = p.gemm[0]
        out = []
        plan = self._plan(p)
        strided_dgrad = self.PHASED and p.kind == "dgrad" and any(v > 1 for v in p.g.stride)
        make, made, bk = self.tiled.config, self.tiled.made, base.knobs
        for t, tile, splits in plan:
            sw = 8 if -(-M // tile.cfg.BLOCK_M) > 8 else 1     # gc.swizzle_for(M, tile.cfg, (1, 8))
            for s in splits or (1,):
                for buf in ((1, 0) if wgrad and s > 1 else (1,)):
                    out.append(made.get((bk, t, s, buf, sw, None)) or make(base, t, s, buf, sw, None))
                    if strided_dgrad and s == 1:
                        out.append(made.get((bk, t, s, buf, sw, 1)) or make(base, t, s, buf, sw, 1))
        return out

    def _plan(self, p):
        """(tile index, tile, SPLIT_K values) of the space: remembered on the problem per tile table
        and ``_tiles_for`` (conv_implicit_gemm and conv_implicit_precomp share it)."""
        plans = p.__dict__.get("_plans")
        if plans is None:
            plans = p.__dict__["_plans"] = {}
        key = (id(self.TILES), type(self)._tiles_for)
        hit = plans.get(key)
        if hit is not None and hit[0] is self.TILES:
            return hit[1]
        wgrad = p.kind == "wgrad"
        M = p.gemm[0]
        plan = []
        # gc.split_worthwhile(M, N, tiles, G): under two waves of one block, unless a simulated tiny problem
        small = gc.simulated_small(M, p.gemm[1], p.g.G)
        for t in self._tiles_for(M, p.gemm[1], p.gemm[2], p.g.G):
            tile = self.TILES[t]
            tiles = -(-M // tile.cfg.BLOCK_M) * -(-p.gemm[1] // tile.cfg.BLOCK_N)
            if small or tiles * p.g.G >= 2 * 132:
                plan.append((t, tile, (1,)))
            elif wgrad:
                plan.append((t, tile, wgrad_splits(tile, tiles * p.g.G, p.gemm[2])))
            else:
                plan.append((t, tile, (1, 4)))
        if wgrad and any(sp and sp != (1,) for _, _, sp in plan):
            # split candidates only: an unsplit tile would be ranked against split ones unfairly
            plan = [(t, tile, sp) for t, tile, sp in plan if sp and sp != (1,)]
        plan = tuple(plan)
        plans[key] = (self.TILES, plan)
        return plan

    def _tiles_for(self, M, N, K_, G):
        """gc.useful_tiles, widened when none of those fits the grid's 65535 tile rows (a huge M with
        a tiny N, e.g. the dgrad of a 3-channel stem: M = N*H*W = 1.6 M, N = 3)."""
        T, big = self.TILES, gc.MAX_GRID_YZ
        out = [t for t in gc.useful_tiles(T, M, N, K_, G) if -(-M // T[t].cfg.BLOCK_M) <= big]
        rows_ok = lambda t: -(-M // T[t].cfg.BLOCK_M) <= big  # noqa: E731
        if not out:
            every = [t for t in range(len(self.TILES)) if rows_ok(t)]
            narrow = [t for t in every if self.TILES[t].cfg.BLOCK_N <= 2 * max(N, 16)]
            out = narrow or every
        return out

    def build(self, sub, cfg, ctx):
        from numba import cuda

        p = self.problem(sub)
        gcfg = self.gemm_config(cfg)
        if self.phased(sub, cfg):
            return self._build_phased(sub, cfg, ctx, p, gcfg)
        kern = p.make(gcfg, self.PRECOMP)
        table = None
        if self.PRECOMP:
            table = cuda.to_device(kern.make_table(p.g))
        key = gc.key_text("conv", p.kind, gcfg, p.dtypes, kern.spec, p.order, p.a_fast, p.b_fast, self.PRECOMP,
                          p.g.stride if p.kind == "dgrad" else "")
        typing = p.pack(kern, lambda t: gc.typing_flat(t, t.span_elements()), table)
        bl = gc.BlockLaunch(key, kern.bk, typing)
        return gc.BlockPlan(self, sub, cfg, p, kern, bl, self.workspace_size(sub, cfg), table,
                            gc.tail_build(sub, p.epi.out, ctx))


    def _build_phased(self, sub, cfg, ctx, p, gcfg):
        from numba import cuda

        from ...kernels.conv.dgrad_phased import make_conv_dgrad_phased
        kern = make_conv_dgrad_phased(gcfg, p.dtypes, p.epi.spec, p.order, p.a_fast, p.b_fast)
        table = cuda.to_device(kern.make_table(p.g))
        key = gc.key_text("conv_phased", p.kind, gcfg, p.dtypes, kern.spec, p.order, p.a_fast, p.b_fast)
        typing = phased_packs(p, kern, lambda t: gc.typing_flat(t, t.span_elements()), table)[0]
        bl = gc.BlockLaunch(key, kern.bk, typing)
        return PhasedPlan(self, sub, cfg, p, kern, bl, self.workspace_size(sub, cfg), table,
                          gc.tail_build(sub, p.epi.out, ctx))


def phased_packs(p, kern, arg, table):
    """The phased dgrad's launch tuples (one per output phase); ``arg(t)`` gives each tensor's Flat."""
    e = p.epi
    bias = arg(e.bias) if e.bias is not None else None
    res = arg(e.residual) if e.residual is not None else None
    return kern.packs(p.g, arg(p.y), arg(p.w), arg(p.x), table=table, bias=bias, bias_stride=p.bias_stride,
                      residual=res, residual_strides=p.res_strides)


class PhasedPlan(gc.BlockPlan):
    """A BlockPlan running one launch of the same kernel per dgrad output phase."""

    def _own(self, views, scratch):
        p = self.p
        alpha = gc.alpha_of(p.epi, views, p.alpha, self.sub)
        views, out = gc.pack_launches(p.epi, views, scratch, self.workspace_size)
        for packed in phased_packs(p, self.kern, lambda t: gc.flat(views[t.uid], t), self.table):
            out += list(self.bl.launches(packed, alpha, p.beta, scratch))
        return out


def _extremes(terms):
    """(min, max) of sum(coef * i) over a grid of indices 0 <= i < n, ``terms`` (coef, n) with n >= 1."""
    lo = hi = 0
    for c, n in terms:
        v = c * (n - 1)
        if v < 0:
            lo += v
        else:
            hi += v
    return lo, hi


def _packs(coords):
    """"" or the reason :func:`kernels.conv.table.pack3` refuses coordinates ``(coef, n)`` (c * i, i < n)."""
    from ...kernels.conv.table import BITS, LIMIT

    for c, n in coords:
        v = c * (n - 1)
        lo, hi = (v, 0) if v < 0 else (0, v)
        if lo < 0 or hi >= LIMIT:
            return f"conv coordinates up to {hi} do not pack into {BITS} bits (precomputed table); use IMPLICIT_GEMM"
    return ""


def table_fits(p):
    """(ok, reason): the IMPLICIT_PRECOMP_GEMM offsets fit int32 and the tap coordinates pack into 10
    bits. Decided in closed form (every column of ``kernels.conv.table`` is linear in its indices, so
    its extremes sit at the grid's corners): the same verdict and reason as building the table."""
    g = p.g
    if p.kind == "wgrad":
        O, P, Q = g.OPQ
        if not g.N * O * P * Q:
            return True, ""
        sd, sh, sw = g.stride
        sy, sx = g.y_strides, g.x_strides
        why = _packs(((sd, O), (sh, P), (sw, Q)))
        cols = (((sy[0], g.N), (sy[2], O), (sy[3], P), (sy[4], Q)),
                ((sx[0], g.N), (sd * sx[2], O), (sh * sx[3], P), (sw * sx[4], Q)))
    else:
        T, R, S_ = g.TRS
        dd, dh, dw = g.dil
        if p.kind == "fprop":
            CH, s_act, s_wch, sp = g.Cg, g.x_strides[1], g.w_strides[1], g.x_strides[2:]
        else:
            CH, s_act, s_wch, sp = g.Kg, g.y_strides[1], g.w_strides[0], (0, 0, 0)
        if not CH * T * R * S_:
            return True, ""
        sw = g.w_strides
        why = _packs(((dd, T), (dh, R), (dw, S_)))
        cols = (((s_act, CH), (dd * sp[0], T), (dh * sp[1], R), (dw * sp[2], S_)),
                ((s_wch, CH), (sw[2], T), (sw[3], R), (sw[4], S_)))
    if why:
        return False, why
    for terms in cols:
        lo, hi = _extremes(terms)
        if hi >= 2 ** 31 or -lo >= 2 ** 31:
            return False, "conv offsets do not fit the int32 table"
    return True, ""


def table_fits_built(p):
    """:func:`table_fits` by building the table (the reference the closed form is tested against)."""
    from ...kernels.conv.table import build_table, build_wgrad_table

    try:
        if p.kind == "wgrad":
            build_wgrad_table(p.g)
        else:
            build_table(p.g, p.kind, p.order)
    except ValueError as e:
        return False, str(e)
    return True, ""
