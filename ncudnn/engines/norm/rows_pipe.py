"""Engine "norm_rows", forward KERNEL_CFG 20..29: the persistent ``cp.async``-pipelined row kernel
(:mod:`ncudnn.kernels.norm.row_fwd_pipe`) for layer / RMS norm rows of 128..1024 FP32 columns.

A grid of SMs x ``bps`` blocks of ``warps`` warps; each warp streams whole rows through a ring of ``stages``
rows in shared memory (the next rows' copies in flight while it normalizes this one). The KERNEL_CFG value
names the whole geometry (:data:`FWD_PIPE_KCFG`); BLOCK_SIZE, TILE_ROWS, CTA_COUNT and STAGES stay 0,
LOAD_SIZE is 16.

Where it applies (:func:`pipe_reason`): FP32 X, Y, SCALE, BIAS and statistics, rows of n % 128 == 0 and
n <= 1024 elements packed and 16-byte aligned, no pointwise epilogue, and the block's shared memory fits
``bps`` blocks an SM.

Default (:data:`FWD_PIPE_DEFAULT`, taken before the sub-block default) when every warp of the grid gets at
least two rows: KERNEL_CFG 28, 4 warps, 4 stages, 3 blocks an SM, scale / bias in shared memory, the L2
evict-first policy on x's copies and y's stores plain. On the H200 (experiments/probe_norm_sweep.py, alternating
rounds in one process) it is faster than cuDNN at 8192 x 1024 in every round and ties it at 8192 x 512, where the
sub-block default before it was slower; evict-first y stores too (KERNEL_CFG 20 / 21) are as fast alone but leave
y out of the L2 for the kernel that reads it next, so y is stored plain. Figures: dev/perf_notes.md, "Layer / RMS
norm rows".
"""
import math

from ...kernels.norm import row_fwd_pipe as kp
from ...kernels.primitives import warp as kprim
from ...types import cudnnBackendKnobType_t
from ..membound.common import Step, kdtype, src_key, tensor_bytes

K = cudnnBackendKnobType_t
KC = K.CUDNN_KNOB_TYPE_KERNEL_CFG
EF = "evict_first"
#: KERNEL_CFG -> (warps a block, stages a warp, blocks an SM, statistics, scale / bias home, L2 policy of x's copies,
#: the same policy on y's stores too)
FWD_PIPE_KCFG = {20: (4, 4, 3, "shift", "regs", EF, True), 21: (4, 4, 3, "shift", "smem", EF, True),
                 22: (4, 4, 3, "shift", "smem", None, False), 23: (4, 4, 3, "two", "smem", EF, True),
                 24: (2, 6, 4, "shift", "smem", EF, True), 25: (4, 3, 4, "shift", "smem", EF, True),
                 26: (2, 8, 3, "shift", "smem", EF, True), 27: (8, 2, 2, "shift", "smem", EF, True),
                 28: (4, 4, 3, "shift", "smem", EF, False), 29: (4, 4, 3, "shift", "regs", EF, False)}
#: (smallest, largest row length, KERNEL_CFG) of the default; a row must also give each warp of the grid two rows
FWD_PIPE_DEFAULT = ((512, 1024, 28),)
#: knobs that must be 0 with a pipe KERNEL_CFG (the value names the geometry)
_ZERO = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_CTA_COUNT,
         K.CUDNN_KNOB_TYPE_STAGES)


def is_pipe(cfg):
    return cfg.get(KC, 0) in FWD_PIPE_KCFG


def _geometry(cfg):
    return FWD_PIPE_KCFG[cfg.get(KC, 0)]


def fwd_tensors(node):
    """The forward node's X, SCALE, BIAS, Y, MEAN, INV_VARIANCE (None where absent): the tensors whose dtypes decide
    which forward kernels apply."""
    return (node.inputs["X"], node.inputs["SCALE"], node.inputs.get("BIAS"), node.outputs["Y"],
            node.outputs.get("MEAN"), node.outputs.get("INV_VARIANCE"))


def pipe_reason(sub, cfg, vec):
    """Why a pipe config cannot run this forward (None: it can); ``vec`` is the forward's 16-byte vector width
    (0: the layout or alignment allows none)."""
    node = sub.anchor
    if any(cfg.get(k, 0) for k in _ZERO) or cfg.get(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 0) != 16:
        return f"forward KERNEL_CFG {cfg.get(KC)} (the pipelined kernel) takes LOAD_SIZE 16 and BLOCK_SIZE, " \
            "TILE_ROWS, CTA_COUNT, STAGES 0 (the KERNEL_CFG value names its geometry)"
    x = node.inputs["X"]
    n = math.prod(x.dims[1:])
    if vec != 4 or any(t is not None and kdtype(t) != "float32" for t in fwd_tensors(node)):
        return f"forward KERNEL_CFG {cfg.get(KC)} (the pipelined kernel) needs FP32 X, Y, SCALE, BIAS and " \
            "statistics, packed rows and 16-byte alignment"
    if n % 128 or n > kp.N_MAX:
        return f"forward KERNEL_CFG {cfg.get(KC)} (the pipelined kernel) needs rows of a multiple of 128 and at " \
            f"most {kp.N_MAX} elements (this row: {n})"
    if sub.epilogue:
        return f"forward KERNEL_CFG {cfg.get(KC)} (the pipelined kernel) takes no pointwise epilogue"
    warps, stages, bps, _, params, *_ = _geometry(cfg)
    if not kp.pipe_fits(n, warps, stages, bps, node.inputs.get("BIAS") is not None, params):
        return f"forward KERNEL_CFG {cfg.get(KC)}: {bps} blocks of {warps} warps x {stages} rows of {n} floats do " \
            "not fit an SM's shared memory"
    return None


def pipe_default(sub, vec):
    """KERNEL_CFG of the default pipe config for this forward (0: none applies)."""
    x = sub.anchor.inputs["X"]
    n, rows = math.prod(x.dims[1:]), x.dims[0]
    for lo, hi, kc in FWD_PIPE_DEFAULT:
        warps, _, bps, *_ = FWD_PIPE_KCFG[kc]
        probe = {KC: kc, K.CUDNN_KNOB_TYPE_LOAD_SIZE: 16}
        if lo <= n <= hi and rows >= 2 * kprim.sm_count() * bps * warps and pipe_reason(sub, probe, vec) is None:
            return kc
    return 0


def pipe_step(sub, cfg, args, rms, has_bias, write, eps_dt):
    """The launch of a pipe config; ``args`` as the other forward kernels take them (x, scale, bias, y, mean,
    inv, eps, rows)."""
    node = sub.anchor
    x, y = node.inputs["X"], node.outputs["Y"]
    n = math.prod(x.dims[1:])
    warps, stages, bps, stats, params, hint, hint_y = _geometry(cfg)
    fargs = (n, warps, stages, not rms, has_bias, write, "float32", "float32", "float32", "float32", eps_dt, stats,
             params, False, bps, hint, hint_y)
    grid, block, shared = kp.pipe_geometry(n, warps, stages, bps, kprim.sm_count(), has_bias, params)
    return Step("norm_rows_fwd_pipe:" + src_key(fargs), lambda: kp.row_fwd_pipe_kernel(*fargs)[0], grid, block,
                args, shared=shared, nbytes=tensor_bytes(x, y, node.inputs["SCALE"], node.inputs.get("BIAS")))
