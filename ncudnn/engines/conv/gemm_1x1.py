"""Engine "conv_gemm_1x1": a 1x1 (1x1x1), stride-1, unpadded, ungrouped convolution forward or data
gradient as one plain GEMM. fprop: rows are the (n, spatial) output pixels, columns the output
channels K, the reduction the input channels C (y = x . w^T). dgrad: rows are the pixels, columns
the input channels C, the reduction the output channels K (dx = dy . w). With NHWC activations the
pixels collapse into one M = N*H*W GEMM; NCHW is a GEMM batched over images (m contiguous).
Dilation does not matter for a 1x1 filter, nor does the mode (a 1x1 filter flips onto itself).
Same fused epilogue (alpha / beta, per-channel bias, pointwise chain, one residual or backward
activation operand) as the implicit-GEMM engines, on the GEMM kernel's plain strided loaders.

wgrad (dw[k, c] = sum over pixels of dy[., k, .] x[., c, .]): rows are the output channels K, columns
the input channels C, the reduction the (n, spatial) pixels. When the pixels of dy and x collapse into
one strided dim (NHWC, or one image) it is one GEMM (NHWC: both operands contiguous along K / C, the
fast mainloop's st.shared.v4 path); otherwise (NCHW) a batch of per-image GEMMs (each contiguous along
its pixels) summed into dw through the deterministic split-K workspace (``sum_batch``). wgrad ranks
the fast-mainloop tiles (WGRAD_TILES) with SPLIT_K up to 1024 to fill the SMs (the cost picks;
many slices are summed by the wide split-K reduce).

NCHW with H*W % 8 != 0 (7², 14²) and strided 1x1 wgrad (2-D, fp32, channels % 4): dy and x are first
copied pixels-last into the workspace (kernels/gemm/transpose.py; x's strided pixels gathered), then
one NHWC-style GEMM over N*P*Q runs on them.
"""
import math

from ...kernels.gemm import make_gemm
from ...kernels.gemm.config import FAST_SMALL
from ...kernels.gemm.transpose import grid as pixels_last_grid, make_pixels_last
from ...kernels.runtime import kcache
from ...platform import simulator_enabled
from ...types import cudnnBackendKnobType_t, cudnnBackendLayoutType_t, cudnnStatus_t
from .. import heuristics as H
from ..gemm import common as gc
from ..base import OK
from ..gemm.mapping import GemmEngineBase, GemmMapping, batch2, merge_dims, typing_arg
from ..registry import register

S = cudnnStatus_t
KT = cudnnBackendKnobType_t


#: fast-mainloop tiles (fp32 16-byte global quads; 128 registers), appended after the conv table (its
#: indices unchanged): wgrad ranks only these, fprop / dgrad rank them beside the generic ones.
#: TFLOP/s are estimates (experiments/probe_conv.py --mode wgrad1x1 measures them): the 128x128 one as
#: gemm.tiles.FAST_TILES, smaller blocks a little less.
WGRAD_TILES = (
    gc.FAST_TILES[0],
    gc.Tile("128x64x8 t8x8 vec4 fast", FAST_SMALL[0], None, 33.0, 128),
    gc.Tile("64x128x8 t8x8 vec4 fast", FAST_SMALL[1], None, 33.0, 128),
    gc.Tile("64x64x8 t8x8 vec4 fast", FAST_SMALL[2], None, 28.0, 168),
    gc.Tile("64x64x8 t8x4 vec4 fast", FAST_SMALL[3], None, 26.0, 112),
)
TILES_1X1 = gc.CONV_TILES + WGRAD_TILES
FIRST_WGRAD_TILE = len(gc.CONV_TILES)
#: SPLIT_K values ranked for wgrad (powers of 2), and the fraction of the fast mainloop's rate with
#: "k"-fast operands (NCHW: quads transposed into shared memory by scalar stores)
WGRAD_MAX_SPLIT = 1024
KFAST_EFF = 0.85
SIM_SMALL_MACS = 1 << 20


def _checked_1x1(node, ports, filt_port, stride_refusal):
    """The checks both 1x1 mappings start with, in this order: the tensors at ``ports`` ((port, tensor)
    pairs), a 1x1 filter at ``filt_port``, the strides (a stride other than 1 is refused when
    ``stride_refusal()`` says why: ``stride ... <why>``; None: allowed), no padding, one group."""
    for port, t in ports:
        gc.check_tensor(node, port, t)
    f = dict(ports)[filt_port]
    if any(d != 1 for d in f.dims[2:]):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': {filt_port}: filter {f.dims[2:]} is "
                        "not 1x1")
    why = stride_refusal() if any(s != 1 for s in node.stride) else None
    if why is not None:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': stride {node.stride} {why}")
    if any(node.pre_padding) or any(node.post_padding):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': padding {node.pre_padding} / "
                        f"{node.post_padding} is not 0")
    if node.groups != 1:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': {node.groups} groups (one GEMM "
                        "needs groups = 1)")


def _checked_output(sub, epi, dims, whose):
    """(output tensor, alpha, beta) of the GEMM whose epilogue is ``epi``: the output has ``dims`` (else
    the Reject says they differ from ``whose``), a supported dtype, and beta blends a real output only."""
    node, out = sub.anchor, epi.out
    if tuple(out.dims) != tuple(dims):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{out.label}: dims {out.dims} differ from {whose} "
                        f"{dims}")
    gc.check_tensor(node, "output", out)
    alpha, beta = float(node.alpha), float(node.beta)
    if beta != 0 and sub.epilogue:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': beta = {beta} blends with a "
                        "virtual output (a fused epilogue follows): not supported")
    return out, alpha, beta


def _pixels(dims, tensors):
    """(sizes, per-tensor strides) of the (n, spatial) dims of ``dims`` merged where every tensor allows
    (one size-1 dim when all are 1)."""
    pix = [0] + list(range(2, len(dims)))
    sizes, strides = merge_dims([dims[i] for i in pix], [[t.strides[i] for i in pix] for t in tensors])
    if not sizes:
        return [1], [[0] for _ in tensors]
    return sizes, strides


def conv1x1_mapping(sub):
    node = sub.anchor
    x, w, y = node.conv_tensors()
    dgrad = sub.kind == "conv_dgrad"
    if dgrad:
        x, y = y, x        # the GEMM reads dy (the "input") and writes dx (the "output")
    _checked_1x1(node, (("X", x), ("W", w), ("Y", y)), "W", lambda: "is not 1")

    def classify(t):
        return gc.channel_axis(t, y.dims)

    epi = gc.epilogue_of(sub, y.dims, classify)
    out, alpha, beta = _checked_output(sub, epi, y.dims, "the conv output's")
    tensors = [x, out] + ([epi.residual] if epi.residual is not None else [])
    sizes, strides = _pixels(y.dims, tensors)
    M = sizes[-1]
    batch, bs = batch2(sizes[:-1], [s[:-1] for s in strides], f"node '{node.name}'")
    a_st = bs[0] + (strides[0][-1], x.strides[1])
    c_st = bs[1] + (strides[1][-1], out.strides[1])
    # B element (k, n): fprop w[n = out channel, k = in channel]; dgrad w[k = out channel, n = in channel]
    b_st = (0, 0, w.strides[0], w.strides[1]) if dgrad else (0, 0, w.strides[1], w.strides[0])
    res_st = bs[2] + (strides[2][-1], epi.residual.strides[1]) if epi.residual is not None else None
    bias_st = (0, epi.bias.strides[1]) if epi.bias is not None else (0, 1)
    return GemmMapping(M, y.dims[1], x.dims[1], batch, x, w, a_st, b_st, c_st, epi, bias_st, res_st, alpha, beta)


def wgrad1x1_mapping(sub):
    """The GemmMapping of a 1x1 unpadded ungrouped conv_wgrad, with ``sum_batch`` (per-image GEMMs summed
    through the workspace) and ``pixels_last`` (None, or (images, pixels, row length, dy strides, x
    strides) of the copies the plan makes first) set on it."""
    node = sub.anchor
    x, dw, dy = node.conv_tensors()
    strided = any(s != 1 for s in node.stride)
    _checked_1x1(node, (("X", x), ("DW", dw), ("DY", dy)), "DW", lambda: None if len(dy.dims) == 4 and _copyable(
        dy, x) else "needs a 2-D fp32 conv with channels % 4 == 0 (x's strided pixels are copied pixels-last)")
    if node.output_spatial() != tuple(dy.dims[2:]) or \
            x.dims[0] != dy.dims[0]:
        raise gc.Reject(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"node '{node.name}': X {x.dims} and DY "
                        f"{dy.dims} pixels differ")
    epi = gc.epilogue_of(sub, dw.dims, lambda t: None, allow_bias=False, allow_residual=False)
    out, alpha, beta = _checked_output(sub, epi, dw.dims, "DW's")
    sizes, (sy, sx) = _pixels(dy.dims, (dy, x))
    if len(sizes) > 2 and not strided:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"node '{node.name}': pixels {tuple(sizes)} of "
                        "DY / X do not collapse into (images, pixels)")
    c_st = (0, 0, out.strides[0], out.strides[1])
    M, N = dw.dims[0], dw.dims[1]
    if strided:                 # x's pixels (and dy's) copied pixels-last, one GEMM over N*P*Q
        n_img, P, Q = dy.dims[0], dy.dims[2], dy.dims[3]
        sh, sw = node.stride
        p = GemmMapping(M, N, n_img * P * Q, (1, 1), dy, x, (0, 0, 1, M), (0, 0, N, 1), c_st, epi, alpha=alpha,
                        beta=beta)
        p.sum_batch = False
        p.pixels_last = (n_img, P * Q, Q, (dy.strides[0], dy.strides[1], dy.strides[2], dy.strides[3]),
                         (x.strides[0], x.strides[1], x.strides[2] * sh, x.strides[3] * sw))
    elif len(sizes) == 1:       # one GEMM over every pixel
        p = GemmMapping(dw.dims[0], dw.dims[1], sizes[0], (1, 1), dy, x, (0, 0, dy.strides[1], sy[0]),
                        (0, 0, sx[0], x.strides[1]), c_st, epi, alpha=alpha, beta=beta)
        p.sum_batch = False
    elif sizes[1] % 8 and _copyable(dy, x):    # NCHW, H*W not a multiple of 8: copy to NHWC, one GEMM
        p = GemmMapping(M, N, sizes[0] * sizes[1], (1, 1), dy, x, (0, 0, 1, M), (0, 0, N, 1), c_st, epi,
                        alpha=alpha, beta=beta)
        p.sum_batch = False
        p.pixels_last = (sizes[0], sizes[1], sizes[1], (sy[0], dy.strides[1], 0, sy[1]),
                         (sx[0], x.strides[1], 0, sx[1]))
    else:                       # per-image GEMMs summed over the batch
        p = GemmMapping(dw.dims[0], dw.dims[1], sizes[1], (sizes[0], 1), dy, x, (sy[0], 0, dy.strides[1], sy[1]),
                        (sx[0], 0, sx[1], x.strides[1]), c_st, epi, alpha=alpha, beta=beta)
        p.sum_batch = True
    if not hasattr(p, "pixels_last"):
        p.pixels_last = None
    p.fast_ok = _fast_possible(p)
    return p


def _copyable(dy, x):
    """Whether dy and x can be copied pixels-last (kernels/gemm/transpose.py: fp32) into a fast GEMM
    (channels % 4). Used for NCHW images whose pixel count is not a multiple of the fast mainloop's k-tile
    (7², 14²: one fast GEMM over N*H*W instead of unaligned per-image GEMMs summed through an N*K*C
    workspace) and for strided x (stride-2 1x1)."""
    return (gc.kdtype(dy) == "float32" and gc.kdtype(x) == "float32" and dy.dims[1] % 4 == 0
            and x.dims[1] % 4 == 0)


def _round256(n):
    return -(-n // 256) * 256


def pixels_last_bytes(p):
    """(bytes of dy pixels-last, bytes of x pixels-last) in the workspace (each rounded to 256)."""
    return _round256(p.K * p.M * 4), _round256(p.K * p.N * 4)


class _Part:
    """A byte range of the scratch buffer (what BlockLaunch.launches reads: ptr, nbytes)."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = int(ptr), int(nbytes)


class _PixelsLastPlan(gc.BlockPlan):
    """Two pixels-last copies (dy, x -> workspace) then the GEMM over them (and its split-K reduce)."""

    def __init__(self, engine, sub, cfg, p, kern, bl, ws, tail=None):
        super().__init__(engine, sub, cfg, p, kern, bl, ws, tail=tail)
        f = gc.Flat(0, 1, "float32")
        self.copy = kcache.get_or_compile("pixels_last_f32", make_pixels_last,
                                          gc.argtypes((f, f, 1, 1, 1, 1, 1, 1, 1)))

    def _own(self, views, scratch):
        p = self.p
        n_img, pq, q, sy, sx = p.pixels_last
        ya, xa = pixels_last_bytes(p)
        dyt = gc.Flat(scratch.ptr, p.K * p.M, "float32")
        xt = gc.Flat(scratch.ptr + ya, p.K * p.N, "float32")
        rest = _Part(scratch.ptr + ya + xa, scratch.nbytes - ya - xa)
        out = []
        for t, dst, ch, st in ((p.A, dyt, p.M, sy), (p.B, xt, p.N, sx)):
            g, b = pixels_last_grid(n_img, ch, pq)
            out.append(self.copy.prepare(g, b, (gc.flat(views[t.uid], t), dst, ch, pq, q, *st)))

        def arg(t):
            return dyt if t is p.A else xt if t is p.B else gc.flat(views[t.uid], t)
        packed = p.pack(self.kern, arg)
        return out + list(self.bl.launches(packed, gc.alpha_of(p.epi, views, p.alpha, self.sub), p.beta, rest))


def _fast_possible(p):
    """Whether the fast mainloop's stride / size conditions (kernels/gemm/fastloop.fast_ok, bar the base
    address) can hold for every wgrad tile (BLOCK_K 8)."""
    def operand(st, outer):
        if st[0] % 4 or st[1] % 4:
            return False
        if st[3] == 1:                       # contiguous along the reduction ("k"-fast)
            return st[2] % 4 == 0
        return st[2] == 1 and st[3] % 4 == 0 and outer % 4 == 0
    a, b = p.a_strides, (p.b_strides[0], p.b_strides[1], p.b_strides[3], p.b_strides[2])
    fp32 = p.dtypes[:2] == ("float32", "float32") and not p.fp64
    return fp32 and p.K % 8 == 0 and operand(a, p.M) and operand(b, p.N)


@register
class ConvGemm1x1Engine(GemmEngineBase):
    name = "conv_gemm_1x1"
    kinds = ("conv_fprop", "conv_dgrad", "conv_wgrad")
    TILES = TILES_1X1
    SPLITS = (1, 4)
    SWIZZLES = (1, 8)
    MAX_SPLIT = WGRAD_MAX_SPLIT
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NHWC

    def mapping(self, sub):
        if sub.kind == "conv_wgrad":
            return wgrad1x1_mapping(sub)
        if sub.kind not in ("conv_fprop", "conv_dgrad"):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{self.name}: conv fprop, dgrad and "
                            "wgrad only")
        return conv1x1_mapping(sub)

    # ---- wgrad: sum_batch workspace, atomic refusal, fast-tile cost, ranking by cost alone

    def keep_extra(self, sub, cfg, p):
        if sub.kind != "conv_wgrad":
            return OK
        if p.sum_batch and cfg.get(KT.CUDNN_KNOB_TYPE_SPLIT_K, 1) > 1 and \
                cfg.get(KT.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1) == 0:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{sub.anchor.name}': NCHW wgrad sums images through the " \
                "split-K workspace (atomic SPLIT_K_BUF = 0 not supported)"
        return OK

    def workspace_size(self, sub, cfg):
        if sub.kind != "conv_wgrad":
            return super().workspace_size(sub, cfg)
        try:
            p = self.problem(sub)
        except gc.Reject:
            return 0
        g = self.gemm_config(cfg)
        item = 8 if p.fp64 else 4
        if p.sum_batch:
            ws = p.nb * g.SPLIT_K * p.M * p.N * item
        else:
            ws = gc.split_workspace(g, p.M, p.N, p.nb, p.fp64)
        if p.pixels_last is not None:
            ws += sum(pixels_last_bytes(p))
        return max(ws, gc.tail_workspace(sub, p.epi.out))

    def rank_configs(self, sub, configs, costs, best_tiles=4, limit=24):
        """wgrad: every valid config by cost alone (an unsplit wgrad tile's cost says nothing about the
        tile: the base rule's top-4-tiles-unsplit filter would drop good tiles)."""
        if sub.kind != "conv_wgrad":
            return super().rank_configs(sub, configs, costs, best_tiles, limit)
        order = sorted(range(len(configs)), key=lambda i: (costs[configs[i].knobs], i))
        return tuple(configs[i] for i in order[:24])

    def adjust_cost(self, sub, cfg, t, device):
        """wgrad: the tile cost ``t`` with the fast mainloop's operand terms, the pixels-last copies and the
        per-image partials."""
        if sub.kind != "conv_wgrad" or math.isinf(t):
            return t
        p = self.problem(sub)
        g = self.gemm_config(cfg)
        if g.MAINLOOP == "fast":
            tile = self.TILES[cfg.get(KT.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
            rate = tile.tflops or tile.estimate
            if not p.fast_ok and p.in_bytes == 4 and not p.fp64:    # fp32 misaligned: the generic
                t *= rate / gc.GENERIC_BK8_TFLOPS                       # mainloop of the same tile runs
            elif p.fast_ok and (p.a_strides[3] == 1 or p.b_strides[2] == 1):
                t /= KFAST_EFF
        if p.pixels_last is not None:  # dy and x read and written once more
            t += 2 * p.K * (p.M + p.N) * 4 / device.mem_bandwidth + 2 * H.LAUNCH_OVERHEAD
        if p.sum_batch:                # partials of every image written and read back once
            part = p.nb * g.SPLIT_K * p.M * p.N * 4
            t += (2 * part if g.SPLIT_K == 1 else 0) / device.mem_bandwidth
            t += 0 if g.SPLIT_K > 1 else H.LAUNCH_OVERHEAD
        return t

    def build(self, sub, cfg, ctx):
        if sub.kind != "conv_wgrad":
            return super().build(sub, cfg, ctx)
        p = self.problem(sub)
        gcfg = self.gemm_config(cfg)
        kern = make_gemm(gcfg, p.a_layout, p.b_layout, p.dtypes, p.epi.spec, sum_batch=p.sum_batch)
        key = gc.key_text("gemm", gcfg, p.a_layout, p.b_layout, p.dtypes, kern.spec, "sum_batch" * p.sum_batch)
        bl = gc.BlockLaunch(key, kern.bk, p.pack(kern, typing_arg))
        plan = _PixelsLastPlan if p.pixels_last is not None else gc.BlockPlan
        return plan(self, sub, cfg, p, kern, bl, self.workspace_size(sub, cfg),
                            tail=gc.tail_build(sub, p.epi.out, ctx))

    def make_space(self, sub):
        """GemmEngineBase's space (useful tiles x SPLITS when the grid leaves SMs idle x one swizzle),
        made from shared Config objects without helper calls per tile."""
        try:
            p = self.problem(sub)
        except gc.Reject:
            return []
        if sub.kind == "conv_wgrad":
            return self._wgrad_space(sub, p)
        base, make, T = self.default_config(sub), self.tiled.config, self.TILES
        made, bk = self.tiled.made, base.knobs
        M, N, nb = p.M, p.N, p.nb
        small = gc.simulated_small(M, N, nb)          # gc.split_worthwhile, hoisted
        sws = [w for w in self.SWIZZLES if w != 1]
        out = []
        for t in gc.useful_tiles(T, M, N, p.K, nb):
            c = T[t].cfg
            rows = -(-M // c.BLOCK_M)
            splits = self.SPLITS if not small and rows * -(-N // c.BLOCK_N) * nb < 2 * 132 else (1,)
            sw = max([w for w in sws if rows > w] or [1])     # gc.swizzle_for(M, c, SWIZZLES)
            for s in splits:
                for buf in ((1, 0) if self.ATOMIC and s > 1 else (1,)):
                    out.append(made.get((bk, t, s, buf, sw, None)) or make(base, t, s, buf, sw, None))
        return out

    def _wgrad_space(self, sub, p):
        """The fast tiles (useful ones) x SPLIT_K: 1 and the powers of 2 whose grid holds half a wave to
        eight waves of resident blocks with slices of at least 8 k-tiles (the cost picks)."""
        base = self.default_config(sub)
        out = []
        # under the simulator a tiny problem (M*N*K*batch, the CI shapes) gets one tile, unsplit
        small = simulator_enabled() and p.M * p.N * p.K * p.nb <= SIM_SMALL_MACS
        useful = [i for i, t in enumerate(WGRAD_TILES)
                  if t.cfg.BLOCK_M <= 2 * max(p.M, 16) and t.cfg.BLOCK_N <= 2 * max(p.N, 16)] or [len(WGRAD_TILES) - 1]
        for i in (useful[-1:] if small else useful):
            t = FIRST_WGRAD_TILE + i
            c = WGRAD_TILES[i].cfg
            tiles = gc.ceil_div(p.M, c.BLOCK_M) * gc.ceil_div(p.N, c.BLOCK_N) * p.nb
            regs = -(-WGRAD_TILES[i].regs // 8) * 8
            slots = 132 * max(1, min(2048 // c.num_threads, 65536 // (regs * c.num_threads)))
            feasible, sp = [], 2
            while not small and sp <= WGRAD_MAX_SPLIT and p.K >= sp * c.BLOCK_K * 8:
                feasible.append(sp)
                sp *= 2
            splits = [sp for sp in feasible if slots // 2 <= tiles * sp <= 8 * slots]
            if not splits and feasible and tiles * feasible[-1] < slots // 2:
                splits = feasible[-2:]          # the longest splits the reduction allows
            splits = [1] + splits
            sw = gc.swizzle_for(p.M, c, self.SWIZZLES)
            for sp in splits:
                out.append(self.tiled.config(base, t, sp, 1, sw, None))
        return out
