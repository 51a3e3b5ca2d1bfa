"""Engine "reduction": a REDUCTION node (every cudnnReduceTensorOp_t) over the axes where Y's extent
is 1, any strides, as :mod:`ncudnn.kernels.reduce` kernels.

Layout decides the kernel: when the innermost memory axis is reduced, a block per output walks the
reduced elements (row kernel); otherwise 32 outputs per block read coalesced (column kernel). When
there are too few outputs to fill the GPU the reduced range is split over ``grid.y`` and a second
fixed-order kernel combines the partials (workspace). Deterministic: no atomics, fixed combine order.

Knobs: BLOCK_SIZE (0: the kernel layer's choice; else threads of the row kernel, or 32 x
BLOCK_SIZE/32 for the column kernel) and SPLIT_K (0: automatic; 1: never split, no workspace).
Accumulates in float32 (float64 for all-fp64 I/O); NaN propagates through MIN / MAX / AMAX.
"""
from ..kernels import reduce as kr
from ..types import cudnnBackendKnobType_t, cudnnReduceTensorOp_t, cudnnStatus_t
from .base import OK, Engine, KnobSpec
from .membound_common import Arg, MemPlan, Scratch, io_dtypes_ok, kdtype, reduce_steps, steps_time
from .registry import register

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
        kept, red = kr._layout(spec)
        b = b if kr._is_row(kept, red) else max(1, b // 32)
    split = 1 if cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 0) == 1 else 0
    return replace(spec, block=b, split=split)


def auto_penalty(cfg):
    """Hand-picked knobs rank just behind the kernel layer's own choice (autotuning may promote them)."""
    return 1.0 if not any(v for _, v in cfg.knobs) else 1.05


def _spec(node):
    x, y = node.inputs["X"], node.outputs["Y"]
    return kr.reduce_spec(node.mode, x.dims, kdtype(x), x.strides, y.dims, kdtype(y), y.strides)


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
        return block_knobs()

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        return (st, why) if st != S.CUDNN_STATUS_SUCCESS else keep_block(self, cfg)

    def candidates_key(self, sub):
        return ()

    def _steps(self, sub, cfg):
        memo = sub.__dict__.setdefault("_reduction_steps", {})
        if cfg not in memo:
            node = sub.nodes[0]
            scratch = Scratch()
            steps = reduce_steps(spec_knobs(_spec(node), cfg), scratch, [Arg.tensor(node.inputs["X"])],
                                 [Arg.tensor(node.outputs["Y"])], name="reduction")
            memo[cfg] = (steps, scratch.size)
        return memo[cfg]

    def workspace_size(self, sub, cfg):
        return self._steps(sub, cfg)[1]

    def cost(self, sub, cfg, device):
        return steps_time(device, self._steps(sub, cfg)[0]) * auto_penalty(cfg)

    def build(self, sub, cfg, ctx):
        steps, ws = self._steps(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
