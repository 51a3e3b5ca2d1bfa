"""Plain (batched, strided) GEMM problems and the engine base the matmul engines and conv_gemm_1x1 share.

A :class:`GemmMapping` says how a subgraph is one call of the GEMM kernel: M, N, K, a (B1, B2) batch,
element strides ``(batch1, batch2, row, col)`` of A (m, k), B (k, n), C (m, n) and the residual,
``(batch, index)`` of the bias, the layouts, and the fused epilogue. Batch dims collapse where the
strides of every tensor allow (numpy-style broadcast batches have stride 0); more than two batch
dims that do not collapse are NOT_SUPPORTED_SHAPE.
"""
import math
from dataclasses import dataclass

from ...kernels.gemm import make_gemm
from ...kernels.gemm.gemm import gemm_args
from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from ..gemm import common as gc
from ..base import OK, KnobSpec
from ..gemm.engine_base import TiledGemmEngine

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t


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


def _typing_arg(t):
    return gc.typing_flat(t, t.span_elements())


class GemmEngineBase(TiledGemmEngine):
    """A GEMM-kernel engine over a :class:`GemmMapping` (subclasses: ``mapping(sub)``, ``TILES``,
    ``SPLITS``, candidate knobs)."""

    TILES = gc.BIG_TILES
    SPLITS = (1,)                 # SPLIT_K values offered as candidates
    SWIZZLES = (1, 8)
    ATOMIC = False                # offer atomic split-K candidates
    MAX_SPLIT = 16
    numerical_notes = ()

    def mapping(self, sub):
        raise NotImplementedError

    def gemm_shape(self, p):
        return p.M, p.N, p.K, p.nb

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

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            p = self.problem(sub)
            gc.tail_of(sub, p.epi.out, ctx)
        except gc.Reject as e:
            return e.status, e.reason
        if not any(self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS for c in self._space(sub)):
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{self.name}: no tile fits M={p.M}, N={p.N}, K={p.K}, " \
                f"batch={p.nb}"
        return OK

    def _knob_specs(self):
        return (gc.tile_knob(self.TILES),
                KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K, 1, self.MAX_SPLIT, 1, 1),
                KnobSpec(K.CUDNN_KNOB_TYPE_SWIZZLE, 1, 8, 1, 1),
                KnobSpec(K.CUDNN_KNOB_TYPE_EDGE, 1, 1, 1, 1, ("predicated edges (any M, N, K)",)),
                KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 0, 1, 1, 1,
                         ("atomic accumulation (NONDETERMINISTIC)", "workspace partials + ordered reduce")),
                KnobSpec(K.CUDNN_KNOB_TYPE_STAGES, 1, 2, 1, 2))

    def _make_space(self, sub):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return []
        base = self.default_config(sub)
        out = []
        for t in self._useful_tiles(p):
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

    def _useful_tiles(self, p):
        """TILE_SIZE values worth ranking for ``p`` (gemm_common.useful_tiles over ``TILES``)."""
        return gc.useful_tiles(self.TILES, p.M, p.N, p.K, p.nb)

    #: rank tiles by their best config (split-K included): False keeps the base rule (tiles by their
    #: unsplit cost), which drops the split-K configs of a tile whose unsplit grid is under one wave
    RANK_BY_BEST = False

    def _rank(self, configs, costs, best_tiles=4, limit=24):
        """With RANK_BY_BEST: every config of the ``best_tiles`` tiles whose cheapest config (any split)
        is cheapest, cheapest first (stable: ties keep the space order, smaller splits first), at most
        ``limit``; else the base rule."""
        if not self.RANK_BY_BEST:
            return super()._rank(configs, costs, best_tiles, limit)
        kst = self.__dict__.get("_kstatic") or {}
        rows, best = [], {}
        for i, c in enumerate(configs):
            ks = kst.get(c.knobs) or self._knob_static(c)
            t, cost = ks[2], costs[c.knobs]
            rows.append((cost, i, c, t))
            if t not in best or cost < best[t][0]:
                best[t] = (cost, i)
        top = {t for t, _ in sorted(best.items(), key=lambda kv: kv[1])[:best_tiles]}
        rows = sorted([r for r in rows if r[3] in top], key=lambda r: (r[0], r[1]))
        return tuple([r[2] for r in rows[:limit]])

    def build(self, sub, cfg, ctx):
        p = self.problem(sub)
        gcfg = self.gemm_config(cfg)
        kern = make_gemm(gcfg, p.a_layout, p.b_layout, p.dtypes, p.epi.spec)
        key = gc.key_text("gemm", gcfg, p.a_layout, p.b_layout, p.dtypes, kern.spec)
        bl = gc.BlockLaunch(key, kern.bk, p.pack(kern, _typing_arg))
        return gc.BlockPlan(self, sub, cfg, p, kern, bl, self.workspace_size(sub, cfg),
                            tail=gc.tail_build(sub, p.epi.out, ctx))


#: the FP8 storage types :func:`matmul_mapping` takes with ``fp8=True`` (A, B, the written output)
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")


def matmul_mapping(sub, fp8=False):
    """The GemmMapping of a matmul subgraph (raises gc.Reject with the node and the reason). ``fp8``: A, B
    and the written output may also be FP8 (:data:`FP8_DTYPES`, for the FP8 tensor-core kernels); the
    mapping's dtypes and byte sizes are then the FP8 ones (every dim and stride is in elements)."""
    kinds = gc.KERNEL_DTYPES + FP8_DTYPES if fp8 else gc.KERNEL_DTYPES
    node = sub.anchor
    for port in ("M_OVERRIDE", "N_OVERRIDE", "K_OVERRIDE"):
        if port in node.inputs:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': {port}: per-batch size override "
                            "tensors are not implemented by the GEMM engines")
    if getattr(node, "irregularly_strided_batch_count", None) is not None:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': irregularly strided batches are "
                        "not implemented")
    A, B = node.inputs["A"], node.inputs["B"]
    C = node.outputs["C"]
    for port, t in (("A", A), ("B", B), ("C", C)):
        gc.check_tensor(node, port, t, kinds)
    M, N, K_ = node.mnk()
    rank = len(C.dims)
    bdims = tuple(C.dims[:-2])

    def bstrides(t):
        return [s if d == bd else 0 for d, s, bd in zip(t.dims[:-2], t.strides[:-2], bdims)]

    def classify(t):
        if len(t.dims) != rank or any(d not in (1, bd) for d, bd in zip(t.dims[:-2], bdims)):
            return None
        if t.dims[-2:] == (1, N):
            return "col"
        if t.dims[-2:] == (M, 1):
            return "row"
        return None

    epi = gc.epilogue_of(sub, C.dims, classify)
    out = epi.out
    if tuple(out.dims) != tuple(C.dims):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{out.label}: dims {out.dims} differ from the "
                        f"matmul output's {C.dims} (the epilogue does not broadcast the output)")
    gc.check_tensor(node, "C", out, kinds)
    tensors = [A, B, out] + [t for t in (epi.residual,) if t is not None]
    bias_batched = epi.bias is not None and any(d != 1 for d in epi.bias.dims[:-2])
    if bias_batched:
        tensors.append(epi.bias)
    sizes, strides = merge_dims(list(bdims), [bstrides(t) for t in tensors])
    batch, bs = batch2(sizes, strides, f"node '{node.name}'")
    a_st = bs[0] + (A.strides[-2], A.strides[-1])
    b_st = bs[1] + (B.strides[-2], B.strides[-1])
    c_st = bs[2] + (out.strides[-2], out.strides[-1])
    res_st = None
    if epi.residual is not None:
        r = epi.residual
        res_st = bs[3] + (r.strides[-2], r.strides[-1])
    bias_st = (0, 1)
    if epi.bias is not None:
        t = epi.bias
        index = t.strides[-1] if epi.bias_axis == "col" else t.strides[-2]
        sb = 0
        if bias_batched:
            s1, s2 = bs[-1]
            if batch[0] > 1 and batch[1] > 1 and s1 != batch[1] * s2:
                raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{t.label}: a per-batch bias whose batch "
                                "strides do not flatten")
            sb = s2 if batch[1] > 1 else s1
        bias_st = (sb, index)
    return GemmMapping(M, N, K_, batch, A, B, a_st, b_st, c_st, epi, bias_st, res_st)


def total_flops(p):
    return 2.0 * p.M * p.N * p.K * p.nb


def is_small(p):
    """Few output tiles of the large configs: the small-tile / split-K engine's problems."""
    return math.ceil(p.M / 128) * math.ceil(p.N / 128) * p.nb < 132
