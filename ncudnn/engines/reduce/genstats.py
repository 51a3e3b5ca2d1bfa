"""Engine "genstats": GENSTATS (SUM_SQSUM) — per-channel sum and sum of squares of X in one pass
over X (any layout: NCHW reads rows, NHWC reads 32 channels per block, coalesced), as one
:mod:`ncudnn.kernels.reduce.strided` spec with two terms. Knobs as the "reduction" engine (BLOCK_SIZE,
SPLIT_K). Accumulates in float32; deterministic (fixed combine order, no atomics).
"""
from ...kernels.reduce import strided as kr
from ...types import cudnnGenStatsMode_t, cudnnStatus_t
from ..base import OK, Engine
from ..membound.common import Arg, MemPlan, Scratch, io_dtypes_ok, kdtype, reduce_steps, steps_time
from .reduction import auto_penalty, block_knobs, keep_block, spec_knobs
from ..registry import register

S = cudnnStatus_t


def _spec(node):
    x, s, q = node.inputs["X"], node.outputs["SUM"], node.outputs["SQSUM"]
    return kr.ReduceSpec(tuple(x.dims), ((kdtype(x), tuple(x.strides)),), tuple(s.dims),
                         (kr.Term("v0", "sum"), kr.Term("v0 * v0", "sum")),
                         ((kdtype(s), tuple(s.strides)), (kdtype(q), tuple(q.strides))))


@register
class GenStatsEngine(Engine):
    name = "genstats"
    kinds = ("genstats",)
    fallback = True

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.nodes[0]
        if int(node.mode) != int(cudnnGenStatsMode_t.CUDNN_GENSTATS_SUM_SQSUM):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': mode {node.mode!r}: only SUM_SQSUM"
        st, why = io_dtypes_ok(node)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if tuple(node.outputs["SUM"].dims) != tuple(node.outputs["SQSUM"].dims):
            return S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"node '{node.name}': SUM and SQSUM dims differ"
        return OK

    def knobs(self, sub):
        return block_knobs()

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        return (st, why) if st != S.CUDNN_STATUS_SUCCESS else keep_block(self, cfg)

    def candidates_key(self, sub):
        return ()

    def _steps(self, sub, cfg):
        memo = sub.__dict__.setdefault("_genstats_steps", {})
        if cfg not in memo:
            node = sub.nodes[0]
            scratch = Scratch()
            steps = reduce_steps(spec_knobs(_spec(node), cfg), scratch, [Arg.tensor(node.inputs["X"])],
                                 [Arg.tensor(node.outputs["SUM"]), Arg.tensor(node.outputs["SQSUM"])],
                                 name="genstats")
            memo[cfg] = (steps, scratch.size)
        return memo[cfg]

    def workspace_size(self, sub, cfg):
        return self._steps(sub, cfg)[1]

    def cost(self, sub, cfg, device):
        return steps_time(device, self._steps(sub, cfg)[0]) * auto_penalty(cfg)

    def build(self, sub, cfg, ctx):
        steps, ws = self._steps(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
