"""Engine "reduction": a REDUCTION node (every cudnnReduceTensorOp_t) over the axes where Y's extent
is 1, any strides, as :mod:`ncudnn.kernels.reduce.strided` kernels.

Layout decides the kernel: when the innermost memory axis is reduced, a block per output walks the
reduced elements (row kernel); otherwise 32 outputs per block read coalesced (column kernel). When
there are too few outputs to fill the GPU the reduced range is split over ``grid.y`` and a second
fixed-order kernel combines the partials (workspace). Deterministic: no atomics, fixed combine order.

When the reduced elements of each output are one contiguous run (rows of a row-major tensor, or
the whole tensor), the vector row kernel reads them as 16-byte vectors, a warp or a block per row;
a split grid has a fixed number of blocks per SM and the partials of a few outputs are combined by
one block each (fixed order).

Knobs (0: the kernel layer's choice): BLOCK_SIZE (threads of the row kernel, or 32 x BLOCK_SIZE/32
for the column kernel), SPLIT_K (1: never split, no workspace), LOAD_SIZE (1: element loads, no
vectors), TILE_ROWS (vector kernel: rows per block; > 1 is a warp per row, BLOCK_SIZE = 32 x rows),
ARRAY_SIZE_PER_THREAD (vector kernel: vectors in flight per thread) and CTA_COUNT (vector kernel,
split grids: blocks per SM). Accumulates in float32 (float64 for all-fp64 I/O); NaN propagates
through MIN / MAX / AMAX.
"""
from ...kernels.reduce import spec as krs, strided as kr
from ...types import cudnnBackendKnobType_t, cudnnReduceTensorOp_t, cudnnStatus_t
from ..base import OK, Engine, KnobSpec
from ..membound.common import Arg, MemPlan, Scratch, grid_steps_time, io_dtypes_ok, kdtype, reduce_steps
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
RO = cudnnReduceTensorOp_t
BLOCKS = (0, 64, 128, 256, 512)


def block_knobs():
    return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0, 512, 64, 0),
            KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K, 0, 1, 1, 0))


def keep_block(engine, cfg):
    b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0)
    if b not in BLOCKS:
        return S.CUDNN_STATUS_NOT_SUPPORTED, f"{engine.name}: BLOCK_SIZE = {b} is not one of {BLOCKS}"
    return OK


def spec_knobs(spec, cfg):
    """``spec`` with the config's block / split (0 keeps the kernel layer's automatic choice)."""
    from dataclasses import replace

    b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0)
    if b:
        kept, red = krs.layout(spec)
        b = b if krs.is_row(kept, red) else max(1, b // 32)
    split = 1 if cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 0) == 1 else 0
    return replace(spec, block=b, split=split)


KB, KS, KL, KR, KU, KC = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_SPLIT_K, K.CUDNN_KNOB_TYPE_LOAD_SIZE,
                          K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD,
                          K.CUDNN_KNOB_TYPE_CTA_COUNT)
#: the hand-picked configs ranked after the automatic one (knob -> value; others 0)
SEARCH = ([{}, {KS: 1}, {KL: 1}, {KL: 1, KS: 1}]
          + [{KB: b} for b in BLOCKS[1:]]
          + [{KB: b, KU: u} for b in (128, 256, 512, 1024) for u in (2, 4, 8)]
          + [{KB: 32 * r, KR: r, KU: u} for r in (2, 4, 8) for u in (2, 4, 8)]
          + [{KB: b, KC: c} for b in (256, 512) for c in (1, 2, 4, 8)])


def reduction_knobs():
    return (KnobSpec(KB, 0, 1024, 32, 0), KnobSpec(KS, 0, 1, 1, 0), KnobSpec(KL, 0, 1, 1, 0),
            KnobSpec(KR, 0, 32, 1, 0), KnobSpec(KU, 0, 8, 1, 0), KnobSpec(KC, 0, 16, 1, 0))


def keep_reduction(engine, cfg):
    b, r, u = cfg.get(KB, 0), cfg.get(KR, 0), cfg.get(KU, 0)
    if b and (b & (b - 1)):
        return S.CUDNN_STATUS_NOT_SUPPORTED, f"{engine.name}: BLOCK_SIZE = {b} is not a power of 2"
    if r > 1 and (b or 32 * r) != 32 * r:
        return S.CUDNN_STATUS_NOT_SUPPORTED, \
            f"{engine.name}: TILE_ROWS = {r} (a warp per row) needs BLOCK_SIZE = {32 * r}, not {b}"
    if u & (u - 1):
        return S.CUDNN_STATUS_NOT_SUPPORTED, f"{engine.name}: ARRAY_SIZE_PER_THREAD = {u} is not a power of 2"
    return OK


def reduction_spec_knobs(spec, cfg):
    """``spec`` with every knob of the config (0 keeps the kernel layer's automatic choice)."""
    from dataclasses import replace

    spec = spec_knobs(spec, cfg)
    if cfg.get(KL, 0) == 1:
        return replace(spec, vec=1)
    if not vector_problem(spec):   # the column / strided kernels: BLOCK_SIZE and SPLIT_K only (keep() refuses the rest)
        return replace(spec, vec=0)
    r = cfg.get(KR, 0)
    block = 32 * r if r > 1 else cfg.get(KB, 0)   # keep() refuses TILE_ROWS > 1 with another BLOCK_SIZE
    return replace(spec, vec=0, block=block, rows=r, unroll=cfg.get(KU, 0), ctas=cfg.get(KC, 0))


def vector_problem(spec):
    """Does the vector row kernel run ``spec`` (each output's reduced elements one contiguous run)?"""
    from dataclasses import replace

    kept, red = krs.layout(spec)
    return kr.vec_width(replace(spec, vec=0), kept, red) > 1


def auto_penalty(cfg):
    """Hand-picked knobs rank just behind the kernel layer's own choice (autotuning may promote them)."""
    return 1.0 if not any(v for _, v in cfg.knobs) else 1.05


def _spec(node):
    x, y = node.inputs["X"], node.outputs["Y"]
    return kr.reduce_spec(node.mode, x.dims, kdtype(x), x.strides, y.dims, kdtype(y), y.strides)


def _sub_vector(sub):
    """vector_problem of the subgraph's reduction, remembered on the subgraph (keep() asks once per config)."""
    v = sub.__dict__.get("_reduce_vector")
    if v is None:
        v = sub.__dict__["_reduce_vector"] = vector_problem(_spec(sub.nodes[0]))
    return v


@register
class ReductionEngine(Engine):
    name = "reduction"
    kinds = ("reduction",)
    fallback = True

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.nodes[0]
        st, why = io_dtypes_ok(node)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            RO(int(node.mode))
        except ValueError:
            return S.CUDNN_STATUS_BAD_PARAM, f"node '{node.name}': mode {node.mode!r} is not a reduce op"
        x, y = node.inputs["X"], node.outputs["Y"]
        if len(x.dims) != len(y.dims):
            return S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"node '{node.name}': Y: rank differs from X's"
        return OK

    def knobs(self, sub):
        return reduction_knobs()

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if (cfg.get(KR, 0) > 1 or cfg.get(KU, 0) or cfg.get(KC, 0)) and cfg.get(KL, 0) != 1 \
                and not _sub_vector(sub):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_ROWS / ARRAY_SIZE_PER_THREAD / CTA_COUNT " \
                "shape the vector row kernel, and this reduction's elements are not contiguous runs"
        return keep_reduction(self, cfg)

    def configs(self, sub, ctx):
        base = self.default_config(sub)
        out = []
        for knobs in SEARCH:
            cfg = base
            for k, v in knobs.items():
                cfg = cfg.with_knob(k, v)
            if self.keep(sub, cfg, ctx)[0] == S.CUDNN_STATUS_SUCCESS:
                out.append(cfg)
        return out

    def candidates_key(self, sub):
        return (_sub_vector(sub),)   # the vector-kernel knobs are kept for vector problems only

    def _steps(self, sub, cfg):
        memo = sub.__dict__.setdefault("_reduction_steps", {})
        if cfg not in memo:
            node = sub.nodes[0]
            scratch = Scratch()
            steps = reduce_steps(reduction_spec_knobs(_spec(node), cfg), scratch, [Arg.tensor(node.inputs["X"])],
                                 [Arg.tensor(node.outputs["Y"])], name="reduction")
            memo[cfg] = (steps, scratch.size)
        return memo[cfg]

    def workspace_size(self, sub, cfg):
        return self._steps(sub, cfg)[1]

    def cost(self, sub, cfg, device):
        return grid_steps_time(device, self._steps(sub, cfg)[0]) * auto_penalty(cfg)

    def build(self, sub, cfg, ctx):
        steps, ws = self._steps(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
