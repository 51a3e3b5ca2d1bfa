"""Plain (batched, strided) GEMM problems and the family base of the engines that run one as one call of
the SIMT GEMM kernel (matmul_simt, matmul_small, conv_gemm_1x1).

A :class:`GemmMapping` says how a subgraph is one call of the GEMM kernel: M, N, K, a (B1, B2) batch,
element strides ``(batch1, batch2, row, col)`` of A (m, k), B (k, n), C (m, n) and the residual,
``(batch, index)`` of the bias, the layouts, and the fused epilogue. Batch dims collapse where the
strides of every tensor allow (numpy-style broadcast batches have stride 0); more than two batch
dims that do not collapse are NOT_SUPPORTED_SHAPE.

:class:`GemmEngineBase` holds the shared tiled-GEMM machinery (:class:`~ncudnn.engines.gemm.tiled.TiledGemm`)
and answers the Engine interface through it; an engine supplies ``mapping(sub)`` (its GemmMapping),
``TILES``, ``SPLITS``, ``SWIZZLES``, ``ATOMIC``, ``MAX_SPLIT`` and ``RANK_BY_BEST``.
"""
from dataclasses import dataclass

from ...kernels.gemm import make_gemm
from ...kernels.gemm.gemm import gemm_args
from ...types import cudnnBackendKnobType_t, cudnnStatus_t
from . import common as gc
from ..base import OK, Engine, KnobSpec
from .tiled import TiledGemm

S = cudnnStatus_t
K = cudnnBackendKnobType_t


def merge_dims(sizes, strides):
    """Collapse adjacent dims (outer -> inner) of ``sizes`` where every tensor's strides allow, dropping
    size-1 dims. ``strides``: one list per tensor. Returns (sizes, strides per tensor)."""
    keep = [i for i, s in enumerate(sizes) if s != 1]
    out_sizes, out_strides = [], [[] for _ in strides]
    for i in keep:
        if out_sizes and all(st[-1] == s[i] * sizes[i] for st, s in zip(out_strides, strides)):
            out_sizes[-1] *= sizes[i]
            for st, s in zip(out_strides, strides):
                st[-1] = s[i]
            continue
        out_sizes.append(sizes[i])
        for st, s in zip(out_strides, strides):
            st.append(s[i])
    return out_sizes, out_strides


def batch2(sizes, strides, what):
    """(B1, B2) and per-tensor (s1, s2) of at most two merged batch dims."""
    if len(sizes) > 2:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{what}: {len(sizes)} batch dims {tuple(sizes)} "
                        "that do not collapse into two (the kernel indexes at most two)")
    sizes = [1] * (2 - len(sizes)) + list(sizes)
    return tuple(sizes), [tuple([0] * (2 - len(s)) + list(s)) for s in strides]


@dataclass
class GemmMapping:
    M: int
    N: int
    K: int
    batch: tuple          # (B1, B2)
    A: object             # TensorDesc of each operand
    B: object
    a_strides: tuple      # (b1, b2, m, k)
    b_strides: tuple      # (b1, b2, k, n)
    c_strides: tuple      # (b1, b2, m, n) of the written output
    epi: gc.Epilogue
    bias_strides: tuple = (0, 1)
    res_strides: tuple = None
    alpha: float = 1.0
    beta: float = 0.0

    def __post_init__(self):
        names = [gc.kdtype(self.A), gc.kdtype(self.B), self.epi.spec.out_dtype]
        self.fp64 = gc.check_precision(self.epi.out if self.epi.out is not None else self.A, names)
        self.a_layout = "mk" if self.a_strides[3] == 1 else "km"
        self.b_layout = "nk" if self.b_strides[2] == 1 and self.b_strides[3] != 1 else "kn"
        bias_dt = gc.kdtype(self.epi.bias) if self.epi.bias is not None else names[2]
        res_dt = gc.kdtype(self.epi.residual) if self.epi.residual is not None else names[2]
        self.dtypes = tuple(names) + (bias_dt, res_dt)
        self.nb = self.batch[0] * self.batch[1]
        self.in_bytes = gc.bytes_of(names[0])
        self.out_bytes = gc.bytes_of(names[2])
        extra = 0
        for t in (self.epi.bias, self.epi.residual):
            if t is not None:
                extra += t.numel * t.itemsize
        self.extra_bytes = extra

    def pack(self, kern, tensor_arg, table=None):
        """The kernel's checked argument pack; ``tensor_arg(t)`` gives each tensor's Flat."""
        e = self.epi
        return gemm_args(kern, tensor_arg(self.A), tensor_arg(self.B), tensor_arg(e.out), M=self.M, N=self.N,
                         K=self.K, a_strides=self.a_strides, b_strides=self.b_strides, c_strides=self.c_strides,
                         batch=self.batch, bias=tensor_arg(e.bias) if e.bias is not None else None,
                         bias_strides=self.bias_strides,
                         residual=tensor_arg(e.residual) if e.residual is not None else None,
                         residual_strides=self.res_strides)


def typing_arg(t):
    """The typing Flat of tensor ``t`` (what a kernel is compiled for)."""
    return gc.typing_flat(t, t.span_elements())


class GemmEngineBase(Engine):
    """A GEMM-kernel engine over a :class:`GemmMapping` (subclasses: ``mapping(sub)``, ``TILES``,
    ``SPLITS``, candidate knobs)."""

    TILES = gc.BIG_TILES
    SPLITS = (1,)                 # SPLIT_K values offered as candidates
    SWIZZLES = (1, 8)
    ATOMIC = False                # offer atomic split-K candidates
    MAX_SPLIT = 16
    numerical_notes = ()
    #: rank tiles by their best config (split-K included): False keeps the base rule (tiles by their
    #: unsplit cost), which drops the split-K configs of a tile whose unsplit grid is under one wave
    RANK_BY_BEST = False

    def __init__(self):
        self.tiled = TiledGemm(self)

    # ---- the problem

    def mapping(self, sub):
        raise NotImplementedError

    def problem(self, sub):
        """The memoized GemmMapping of ``sub`` (raises gc.Reject)."""
        memo = sub.__dict__.setdefault("_gemm_mapping", {})
        hit = memo.get(self.name)
        if hit is None:
            try:
                hit = self.mapping(sub)
            except gc.Reject as e:
                hit = e
            memo[self.name] = hit
        if isinstance(hit, gc.Reject):
            raise hit
        return hit

    def gemm_shape(self, p):
        return p.M, p.N, p.K, p.nb

    def efficiency(self, p):
        """Engine-specific factor on the tile's measured efficiency."""
        return 1.0

    def gemm_config(self, cfg):
        return self.tiled.gemm_config(cfg)

    # ---- the Engine interface, answered by the tiled-GEMM machinery

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            p = self.problem(sub)
            gc.tail_of(sub, p.epi.out, ctx)
        except gc.Reject as e:
            return e.status, e.reason
        if not any(self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS for c in self.tiled.space(sub)):
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{self.name}: no tile fits M={p.M}, N={p.N}, K={p.K}, " \
                f"batch={p.nb}"
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

    keep_extra = None
    adjust_cost = None

    def needs_extra(self, cfg):
        return self.keep_extra is not None

    def knob_specs(self):
        return (gc.tile_knob(self.TILES),
                KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K, 1, self.MAX_SPLIT, 1, 1),
                KnobSpec(K.CUDNN_KNOB_TYPE_SWIZZLE, 1, 8, 1, 1),
                KnobSpec(K.CUDNN_KNOB_TYPE_EDGE, 1, 1, 1, 1, ("predicated edges (any M, N, K)",)),
                KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 0, 1, 1, 1,
                         ("atomic accumulation (NONDETERMINISTIC)", "workspace partials + ordered reduce")),
                KnobSpec(K.CUDNN_KNOB_TYPE_STAGES, 1, 2, 1, 2))

    def make_space(self, sub):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return []
        base = self.default_config(sub)
        out = []
        for t in self.useful_tiles(p):
            tile = self.TILES[t]
            tiles = gc.ceil_div(p.M, tile.cfg.BLOCK_M) * gc.ceil_div(p.N, tile.cfg.BLOCK_N)
            splits = self.SPLITS if gc.split_worthwhile(p.M, p.N, tiles, p.nb) else (1,)
            swizzles = (gc.swizzle_for(p.M, tile.cfg, self.SWIZZLES),)
            for s in splits:
                for buf in ((1, 0) if self.ATOMIC and s > 1 else (1,)):
                    for sw in swizzles:
                        c = base.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, t).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, s)
                        c = c.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, buf)
                        out.append(c.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, sw))
        return out

    def useful_tiles(self, p):
        """TILE_SIZE values worth ranking for ``p`` (gemm.tiles.useful_tiles over ``TILES``)."""
        return gc.useful_tiles(self.TILES, p.M, p.N, p.K, p.nb)

    def rank_configs(self, sub, configs, costs, best_tiles=4, limit=24):
        """With RANK_BY_BEST: every config of the ``best_tiles`` tiles whose cheapest config (any split)
        is cheapest, cheapest first (stable: ties keep the space order, smaller splits first), at most
        ``limit``; else TiledGemm's rule."""
        if not self.RANK_BY_BEST:
            return self.tiled.rank(configs, costs, best_tiles, limit)
        kst, static = self.tiled.kstatic, self.tiled.knob_static
        rows, best = [], {}
        for i, c in enumerate(configs):
            ks = kst.get(c.knobs) or static(c)
            t, cost = ks[2], costs[c.knobs]
            rows.append((cost, i, c, t))
            if t not in best or cost < best[t][0]:
                best[t] = (cost, i)
        top = {t for t, _ in sorted(best.items(), key=lambda kv: kv[1])[:best_tiles]}
        rows = sorted([r for r in rows if r[3] in top], key=lambda r: (r[0], r[1]))
        return tuple([r[2] for r in rows[:limit]])

    # ---- build

    def build(self, sub, cfg, ctx):
        p = self.problem(sub)
        gcfg = self.gemm_config(cfg)
        kern = make_gemm(gcfg, p.a_layout, p.b_layout, p.dtypes, p.epi.spec)
        key = gc.key_text("gemm", gcfg, p.a_layout, p.b_layout, p.dtypes, kern.spec)
        bl = gc.BlockLaunch(key, kern.bk, p.pack(kern, typing_arg))
        return gc.BlockPlan(self, sub, cfg, p, kern, bl, self.workspace_size(sub, cfg),
                            tail=gc.tail_build(sub, p.epi.out, ctx))
