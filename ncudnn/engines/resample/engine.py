"""Engine "resample": RESAMPLE_FWD / RESAMPLE_BWD (max pool with index, average pool including /
excluding padding, nearest, bilinear; ZERO / NEG_INF / EDGE padding; 1-3 spatial dims; any layout).

2-D float32 pooling with int32 IDX and every tensor NHWC (C % 4 == 0) or every tensor with unit W stride
may run the register-tiled kernels of :mod:`ncudnn.kernels.resample.tile` (a thread per TH x TW tile of
outputs / dx, the window loaded once into registers: 16-byte vectors when 16-byte aligned and, in NCHW,
W % 4 == 0, else scalars; backward a gather from dy and IDX windows, or the winners recomputed from an X
window). Knob KERNEL_CFG picks: auto (``AUTO_TILES``: the tile per direction, layout and backward
source; else the direct kernel), direct, or tiled with TILE_ROWS x TILE_COLS (refused with the reason when
that tile does not fit the problem).

Otherwise forward NEAREST / BILINEAR and pooling with at most ``MAX_TAPS`` taps run the direct kernels of
:mod:`ncudnn.kernels.resample.direct`: 16-byte vectors of 4 channels per thread for float32
tensors with unit channel stride (NHWC), C % 4 == 0, strides multiples of 4 and alignment >= 16 (checked again on the addresses at bind time),
else a thread per element in the output's memory order (NCHW: threads along W); the window unrolled,
the max-pool index written only when the graph has an IDX output. Pooling backward is the direct
integer gather (deterministic, no atomics): MAXPOOL routes dy by IDX, or without IDX recomputes the
winners from X. NEAREST / BILINEAR backward, larger windows and EDGE-padded pooling backward use the generic
:mod:`ncudnn.kernels.resample.generic` kernels (also a deterministic gather). Knobs: BLOCK_SIZE, KERNEL_CFG,
TILE_ROWS, TILE_COLS. No workspace.
Unsupported (reason names the node and field): alpha != 1 or beta != 0, MAXPOOL backward with
neither IDX nor X (or X with EDGE padding), non-integer pooling geometry, BILINEAR window != 2.
"""
import math

from ...errors import BadParamError
from ...kernels.resample import generic as krs
from ...kernels.resample import direct as rd
from ...kernels.resample import tile as rv
from ...types import cudnnBackendKnobType_t, cudnnNanPropagation_t, cudnnResampleMode_t, cudnnStatus_t
from ..base import OK, Engine, KnobSpec
from ..membound.common import Arg, MemPlan, Step, io_dtypes_ok, kdtype, src_key, steps_time, tensor_bytes
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
RM = cudnnResampleMode_t
_POOL = (RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING)
_INT = ("int8", "int32", "int64", "uint8")
KC, KTR, KTC = K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_TILE_COLS
AUTO, DIRECT, TILED = 0, 1, 2     # KERNEL_CFG values
#: KERNEL_CFG AUTO: tiles tried in order per (direction, layout, backward source: "idx" routed by IDX, "x"
#: max-pool winners recomputed from X, "dy" average); the first the problem supports wins, none supported
#: (or an empty list) runs the direct kernel. NHWC forward keeps the direct kernel (close to the copy bandwidth
#: on the H200 at issue 4's shape; dev/perf_notes.md). The tiles are chosen from instruction and L2-traffic
#: counts, not yet from measurements: experiments/probe_pool.py times every alternative (direct included)
#: beside torch.
AUTO_TILES = {("fwd", "nchw", ""): ((1, 4), (1, 8)), ("fwd", "nhwc", ""): (), ("fwd", "nchw1", ""): (),
              ("bwd", "nchw", "idx"): ((2, 8), (4, 8)), ("bwd", "nchw", "x"): ((2, 8), (4, 8)),
              ("bwd", "nchw", "dy"): ((2, 8), (4, 8)),
              ("bwd", "nhwc", "idx"): ((2, 2),), ("bwd", "nhwc", "x"): ((2, 2),), ("bwd", "nhwc", "dy"): ((2, 2),)}
for _src in ("idx", "x", "dy"):   # NCHW without 16-byte rows (W % 4 != 0: 28 -> 14, 14 -> 7): scalar tiles
    AUTO_TILES["bwd", "nchw1", _src] = ((2, 4), (2, 2), (1, 4), (1, 2), (3, 3))


def _geom(node):
    D = node.spatial_dims
    conv = (lambda v: int(v)) if RM(int(node.mode)) in _POOL else (lambda v: float(v))
    return (tuple(conv(v) for v in node.window[:D]), tuple(conv(v) for v in node.stride[:D]),
            tuple(conv(v) for v in node.pre_padding[:D]))


def _vec4(*ts, dtype="float32"):
    """All of ``ts`` fit 16-byte vectors of 4 channels: dtype, unit channel stride, C % 4 == 0, every
    stride a multiple of 4, alignment >= 16."""
    return all(kdtype(t) == dtype and t.strides[1] == 1 and t.dims[1] % 4 == 0
               and all(int(v) % 4 == 0 for v in t.strides[:1] + t.strides[2:]) and t.alignment >= 16 for t in ts)


def _direct_fwd(node, mode, w):
    if mode in (RM.CUDNN_RESAMPLE_NEAREST, RM.CUDNN_RESAMPLE_BILINEAR):
        return True
    return mode in _POOL and math.prod(w) <= rd.MAX_TAPS


def _direct_bwd(node, mode, w, s, pre):
    if mode not in _POOL:
        return False, "not pooling"
    idx = node.inputs.get("IDX") if mode == RM.CUDNN_RESAMPLE_MAXPOOL else None
    return rd.bwd_supported(mode, int(node.padding_mode), pre, w, s, idx is not None, "X" in node.inputs)


def _common_layout(ts):
    """The tiled-kernel layouts every tensor of ``ts`` ((port, desc or None) pairs) fits, best first; the
    vector layouts need 16-byte alignment."""
    common = None
    for _, t in ts:
        if t is None:
            continue
        lays = rv.tile_layouts(tuple(t.dims), tuple(t.strides))
        if t.alignment < 16:
            lays = tuple(v for v in lays if v == "nchw1")
        common = [v for v in (lays if common is None else common) if v in lays]
    return tuple(common or ())


def _tile_choice(direction, node, mode, w, s, pre, cfg, ts, has_index):
    """(layout, TH, TW) of the tiled kernel this config runs, or None for the direct kernel."""
    kc = cfg.get(KC, AUTO)
    if kc == DIRECT or any(t is not None and kdtype(t) != ("int32" if p == "IDX" else "float32") for p, t in ts):
        return None
    x_shape = tuple(node.inputs["X"].dims) if direction == "fwd" else tuple(node.outputs["DX"].dims)
    y_shape = tuple(node.outputs["Y"].dims) if direction == "fwd" else tuple(node.inputs["DY"].dims)
    src = "" if direction == "fwd" else ("idx" if has_index else ("x" if mode == RM.CUDNN_RESAMPLE_MAXPOOL else "dy"))
    for lay in _common_layout(ts):
        tiles = AUTO_TILES[direction, lay, src] if kc == AUTO else ((cfg.get(KTR, 1), cfg.get(KTC, 1)),)
        for th, tw in tiles:
            if rv.tile_supported(direction, mode, lay, th, tw, x_shape, y_shape, w, s, pre, int(node.padding_mode),
                                 has_index)[0]:
                return lay, th, tw
    return None


def _steps(sub, cfg):
    """(steps, workspace bytes, uids that must be 16-byte aligned) of the subgraph's one node."""
    node = sub.nodes[0]
    mode = RM(int(node.mode))
    w, s, pre = _geom(node)
    pad = int(node.padding_mode)
    block = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128)
    propagate = int(node.nan_propagation) == int(cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN)
    if node.OP == "resample_fwd":
        x, y, idx = node.inputs["X"], node.outputs["Y"], node.outputs.get("IDX")
        if idx is not None and (mode != RM.CUDNN_RESAMPLE_MAXPOOL or idx.is_virtual):
            idx = None
        i_arg = Arg.tensor(idx) if idx is not None else Arg.dummy("int32")
        i_dt = kdtype(idx) if idx is not None else "int32"
        args = [Arg.tensor(x), Arg.tensor(y), i_arg]
        nbytes = tensor_bytes(x, y, idx)
        tile = _tile_choice("fwd", node, mode, w, s, pre, cfg, (("X", x), ("Y", y), ("IDX", idx)), idx is not None) \
            if node.spatial_dims == 2 and mode in _POOL else None
        if tile is not None:
            lay, th, tw = tile
            i_st = tuple(idx.strides) if idx is not None else tuple(y.strides)
            fargs = (mode, lay, th, tw, tuple(x.dims), tuple(x.strides), tuple(y.dims), tuple(y.strides), i_st, w, s,
                     pre, pad, propagate, idx is not None, block)
            total = _tiles(y.dims, lay, th, tw)
            return [Step("resample_tile_fwd:" + src_key(fargs), lambda: rv.fwd_tile_kernel(*fargs)[0],
                         rd.grid(total, block), block, args, nbytes=nbytes)], 0, \
                ((x.uid, y.uid) + ((idx.uid,) if idx is not None else ()) if lay != "nchw1" else ())
        if _direct_fwd(node, mode, w):
            vec = 4 if _vec4(x, y) else 1
            index = None if idx is None else ("vec" if vec == 4 and _vec4(idx, dtype="int32") else "scalar")
            i_st = tuple(idx.strides) if idx is not None else tuple(y.strides)
            fargs = (mode, vec, tuple(x.dims), tuple(x.strides), tuple(y.dims), tuple(y.strides), i_st, w, s, pre,
                     pad, propagate, index, kdtype(x), kdtype(y), i_dt, block)
            aligned = (x.uid, y.uid) + ((idx.uid,) if index == "vec" else ()) if vec == 4 else ()
            return [Step("resample_direct_fwd:" + src_key(fargs), lambda: rd.fwd_kernel(*fargs)[0],
                         rd.grid(math.prod(y.dims) // vec, block), block, args, nbytes=nbytes)], 0, aligned
        i_st = tuple(idx.strides) if idx is not None else None   # None: the kernel stores no index
        fargs = (mode, tuple(x.dims), tuple(x.strides), tuple(y.dims), tuple(y.strides), i_st, w, s, pre,
                 krs.PAD(pad), propagate, kdtype(x), kdtype(y), i_dt)
        return [Step("resample_fwd:" + src_key(fargs), lambda: krs._fwd_kernel(*fargs)[0],
                     krs._grid(math.prod(y.dims), block), block, args, nbytes=nbytes)], 0, ()
    dy, dx, idx = node.inputs["DY"], node.outputs["DX"], node.inputs.get("IDX")
    if mode != RM.CUDNN_RESAMPLE_MAXPOOL:
        idx = None
    ok, _ = _direct_bwd(node, mode, w, s, pre)
    xin = node.inputs.get("X") if (mode == RM.CUDNN_RESAMPLE_MAXPOOL and idx is None) else None
    tile = _tile_choice("bwd", node, mode, w, s, pre, cfg, (("DY", dy), ("DX", dx), ("IDX", idx), ("X", xin)),
                        idx is not None) if ok and node.spatial_dims == 2 else None
    if tile is not None:
        lay, th, tw = tile
        i_st = tuple(idx.strides) if idx is not None else tuple(dy.strides)
        x_st = tuple(xin.strides) if xin is not None else tuple(dx.strides)
        fargs = (mode, lay, th, tw, tuple(dx.dims), tuple(dx.strides), tuple(dy.dims), tuple(dy.strides), i_st, x_st,
                 w, s, pre, pad, propagate, idx is not None, block)
        args = [Arg.tensor(dy), Arg.tensor(idx) if idx is not None else Arg.dummy("int32"),
                Arg.tensor(xin) if xin is not None else Arg.dummy("float32"), Arg.tensor(dx)]
        aligned = tuple(t.uid for t in (dy, dx, idx, xin) if t is not None) if lay != "nchw1" else ()
        return [Step("resample_tile_bwd:" + src_key(fargs), lambda: rv.bwd_tile_kernel(*fargs)[0],
                     rd.grid(_tiles(dx.dims, lay, th, tw), block), block, args,
                     nbytes=tensor_bytes(dy, dx, idx, xin))], 0, aligned
    if ok:
        x = node.inputs.get("X") if (mode == RM.CUDNN_RESAMPLE_MAXPOOL and idx is None) else None
        vec = 4 if _vec4(dy, dx, *((x,) if x is not None else ())) else 1
        index = None if idx is None else ("vec" if vec == 4 and _vec4(idx, dtype="int32") else "scalar")
        i_st = tuple(idx.strides) if idx is not None else tuple(dy.strides)
        x_st = tuple(x.strides) if x is not None else tuple(dx.strides)
        x_dt = kdtype(x) if x is not None else "float32"
        fargs = (mode, vec, tuple(dx.dims), tuple(dx.strides), tuple(dy.dims), tuple(dy.strides), i_st, x_st, w,
                 s, pre, pad, propagate, index, kdtype(dy), kdtype(dx), x_dt, block)
        args = [Arg.tensor(dy), Arg.tensor(idx) if idx is not None else Arg.dummy("int32"),
                Arg.tensor(x) if x is not None else Arg.dummy("float32"), Arg.tensor(dx)]
        aligned = ()
        if vec == 4:
            aligned = (dy.uid, dx.uid) + ((idx.uid,) if index == "vec" else ()) + ((x.uid,) if x is not None else ())
        key = src_key(fargs, kdtype(idx) if idx is not None else "int32")
        return [Step("resample_direct_bwd:" + key, lambda: rd.bwd_kernel(*fargs)[0],
                     rd.grid(math.prod(dx.dims) // vec, block), block, args,
                     nbytes=tensor_bytes(dy, dx, idx, x))], 0, aligned
    i_st = tuple(idx.strides) if idx is not None else tuple(dy.strides)
    fargs = (mode, tuple(dx.dims), tuple(dx.strides), tuple(dy.dims), tuple(dy.strides), i_st, w, s, pre,
             krs.PAD(pad), kdtype(dy), kdtype(dx))
    args = [Arg.tensor(dy), Arg.tensor(idx) if idx is not None else Arg.dummy("int32"), Arg.tensor(dx)]
    total = math.prod(dx.dims)
    return [Step("resample_bwd:" + src_key(fargs, kdtype(idx) if idx is not None else "int32"),
                 lambda: krs._bwd_kernel(*fargs)[0], krs._grid(total, block), block, args,
                 nbytes=tensor_bytes(dy, dx, idx))], 0, ()


def _tiles(dims, lay, th, tw):
    """Threads of a tiled kernel: one per TH x TW tile and channel vector (4 channels in NHWC)."""
    n, c, h, w = dims
    return n * (c // (4 if lay == "nhwc" else 1)) * (h // th) * (w // tw)


def _tile_reason(node, th, tw):
    """Why the tiled kernel does not take this node with this tile."""
    d = "fwd" if node.OP == "resample_fwd" else "bwd"
    mode = RM(int(node.mode))
    if node.spatial_dims != 2 or mode not in _POOL:
        return "tiled kernels are 2-D pooling only"
    w, s, pre = _geom(node)
    ts = dict(node.inputs, **node.outputs)
    if d == "bwd" and mode == RM.CUDNN_RESAMPLE_MAXPOOL and "IDX" in ts:
        ts.pop("X", None)
    bad = [p for p, t in ts.items() if kdtype(t) != ("int32" if p == "IDX" else "float32")]
    if bad:
        return f"{bad}: tiled kernels need float32 data and int32 IDX"
    lays = _common_layout(list(ts.items()))
    if not lays:
        return "no common layout: all tensors NHWC (C % 4 == 0) or all with unit W stride"
    lay = lays[-1]   # the most permissive
    xs = tuple((ts["X"] if d == "fwd" else ts["DX"]).dims)
    ys = tuple((ts["Y"] if d == "fwd" else ts["DY"]).dims)
    ok, why = rv.tile_supported(d, mode, lay, th, tw, xs, ys, w, s, pre, int(node.padding_mode), "IDX" in ts)
    if ok and d == "bwd":
        ok, why = _direct_bwd(node, mode, w, s, pre)
    return why or "not taken"


class _ResamplePlan(MemPlan):
    """MemPlan that checks, per set of buffers, the 16-byte alignment the vector kernels rely on."""

    def __init__(self, engine, sub, cfg, steps, ws, aligned):
        super().__init__(engine, sub, cfg, steps, ws)
        self.aligned = tuple(aligned)

    def launches(self, views, scratch):
        for uid in self.aligned:
            v = views.get(uid)
            if v is not None and not isinstance(v, (int, float)) and int(v.ptr) % 16:
                raise BadParamError(f"node '{self.sub.nodes[0].name}': tensor uid {uid}: address {int(v.ptr):#x} "
                                    "is not 16-byte aligned (its descriptor's alignment is >= 16)")
        return super().launches(views, scratch)


@register
class ResampleEngine(Engine):
    name = "resample"
    kinds = ("resample_fwd", "resample_bwd")
    fallback = True

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.nodes[0]
        st, why = io_dtypes_ok(node, ("float32", "float16", "bfloat16", "float64") + _INT)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        for p, t in list(node.inputs.items()) + list(node.outputs.items()):
            if (p == "IDX") != (kdtype(t) in _INT):
                return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': {p}: data type {t.dtype.name}"
        if float(node.alpha) != 1.0 or float(node.beta) != 0.0:
            return S.CUDNN_STATUS_NOT_SUPPORTED, \
                f"node '{node.name}': alpha/beta = {node.alpha}/{node.beta}: blending is not supported (1 / 0 only)"
        mode = RM(int(node.mode))
        D = node.spatial_dims
        geo = tuple(node.window[:D]) + tuple(node.stride[:D]) + tuple(node.pre_padding[:D])
        if mode in _POOL and any(float(v) != int(v) for v in geo):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': window/stride/pre_padding: pooling needs integers"
        if mode == RM.CUDNN_RESAMPLE_BILINEAR and any(int(v) != 2 or float(v) != 2 for v in node.window[:D]):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': window {node.window}: BILINEAR needs 2"
        if node.OP == "resample_bwd" and mode == RM.CUDNN_RESAMPLE_MAXPOOL and "IDX" not in node.inputs:
            w, s, pre = _geom(node)
            ok, why = _direct_bwd(node, mode, w, s, pre)
            if not ok:
                return S.CUDNN_STATUS_NOT_SUPPORTED, \
                    f"node '{node.name}': IDX: MAXPOOL backward without IDX recomputes the winners from X: {why}"
        if node.OP == "resample_fwd" and tuple(node.outputs["Y"].dims[:2]) != tuple(node.inputs["X"].dims[:2]):
            return S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"node '{node.name}': Y: N and C must match X's"
        return OK

    def recomputes_from_x(self, mode, padding_mode, pre_padding, window, stride):
        """(ok, reason): does a backward of this geometry without IDX run here, the direct gather recomputing
        each covering window's first maximum from X (what a MAXPOOL backward without IDX needs)?"""
        return rd.bwd_supported(mode, int(padding_mode), tuple(pre_padding), tuple(window), tuple(stride),
                                False, True)

    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 64, 512, 64, 128),
                KnobSpec(KC, AUTO, TILED, 1, AUTO, labels=("auto", "direct", "tiled")),
                KnobSpec(KTR, 1, 4, 1, 1), KnobSpec(KTC, 1, 8, 1, 1))

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE)
        if st == S.CUDNN_STATUS_SUCCESS and b & (b - 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE {b} is not a power of 2"
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        kc = cfg.get(KC)
        if kc != TILED and (cfg.get(KTR) != 1 or cfg.get(KTC) != 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS / TILE_COLS apply to KERNEL_CFG=tiled only"
        if kc == TILED and not self._memo(sub, cfg)[0][0].key.startswith("resample_tile"):
            th, tw = cfg.get(KTR), cfg.get(KTC)
            return S.CUDNN_STATUS_NOT_SUPPORTED, \
                f"node '{sub.nodes[0].name}': tile {th}x{tw}: " + _tile_reason(sub.nodes[0], th, tw)
        return st, why

    def candidates_key(self, sub):
        return None

    def candidates(self, sub, ctx):
        """AUTO first, then the direct kernel, then every tiled kernel that applies (blocks 128 / 256)."""
        memo = sub.__dict__.setdefault("_resample_cands", {})   # keep() does not look at ctx
        if "c" in memo:
            return memo["c"]
        base = self.default_config(sub)
        out = [base.with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b).with_knob(KC, kc)
               for kc in (AUTO, DIRECT) for b in (128, 256)]
        if sub.nodes[0].spatial_dims == 2:
            for th in (1, 2, 4):
                for tw in (1, 2, 4, 8):
                    for b in (128, 256):
                        out.append(base.with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b).with_knob(KC, TILED)
                                   .with_knob(KTR, th).with_knob(KTC, tw))
        out = tuple(c for c in out if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS)
        memo["c"] = out
        return out

    def _memo(self, sub, cfg):
        memo = sub.__dict__.setdefault("_resample_steps", {})
        if cfg not in memo:
            memo[cfg] = _steps(sub, cfg)
        return memo[cfg]

    def cost(self, sub, cfg, device):
        node = sub.nodes[0]
        D = node.spatial_dims
        taps = math.prod(int(math.ceil(float(v))) for v in node.window[:D])
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128)
        pref = 1.0 if cfg.get(KC, AUTO) == AUTO else 1.01   # equal bytes: the AUTO default ranks first
        return steps_time(device, self._memo(sub, cfg)[0], flops_per_byte=taps / 2.0, threads=b) \
            * (1.0 + abs(b - 256) / 1e4) * pref

    def workspace_size(self, sub, cfg):
        return self._memo(sub, cfg)[1]

    def build(self, sub, cfg, ctx):
        steps, ws, aligned = self._memo(sub, cfg)
        return _ResamplePlan(self, sub, cfg, steps, ws, aligned)
