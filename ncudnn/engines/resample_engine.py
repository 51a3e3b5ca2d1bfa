"""Engine "resample": RESAMPLE_FWD / RESAMPLE_BWD (max pool with index, average pool including /
excluding padding, nearest, bilinear; ZERO / NEG_INF / EDGE padding; 1-3 spatial dims; any layout)
as :mod:`ncudnn.kernels.resample` kernels.

Forward: a thread per output element in y's memory order (NHWC: neighbouring threads read
neighbouring channels), compile-time window loops, grid-stride. Backward is a deterministic gather
(a thread per dx element, no atomics); MAXPOOL backward routes dy by the forward's IDX.
Knob: BLOCK_SIZE. No workspace. Unsupported (reason names the field): alpha != 1 or beta != 0
(no blending in the kernels), MAXPOOL backward without IDX, non-integer pooling geometry,
BILINEAR with a window other than 2. Workspace: 256 bytes for MAXPOOL forward without an IDX output
(the kernel always stores the argmax; it goes to one scratch slot).
"""
import math

from ..kernels import resample as krs
from ..types import cudnnBackendKnobType_t, cudnnNanPropagation_t, cudnnResampleMode_t, cudnnStatus_t
from .base import OK, Engine, KnobSpec
from .membound_common import Arg, MemPlan, Scratch, Step, io_dtypes_ok, kdtype, src_key, steps_time, tensor_bytes
from .registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
RM = cudnnResampleMode_t
_POOL = (RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING)
_INT = ("int8", "int32", "int64", "uint8")


def _geom(node):
    D = node.spatial_dims
    conv = (lambda v: int(v)) if RM(int(node.mode)) in _POOL else (lambda v: float(v))
    return (tuple(conv(v) for v in node.window[:D]), tuple(conv(v) for v in node.stride[:D]),
            tuple(conv(v) for v in node.pre_padding[:D]))


def _steps(sub, cfg):
    node = sub.nodes[0]
    mode = RM(int(node.mode))
    w, s, pre = _geom(node)
    pad = int(node.padding_mode)
    block = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128)
    if node.OP == "resample_fwd":
        x, y, idx = node.inputs["X"], node.outputs["Y"], node.outputs.get("IDX")
        if idx is not None and (mode != RM.CUDNN_RESAMPLE_MAXPOOL or idx.is_virtual):
            idx = None
        propagate = int(node.nan_propagation) == int(cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN)
        scratch = Scratch()
        if idx is not None:
            i_st, i_dt, i_arg = tuple(idx.strides), kdtype(idx), Arg.tensor(idx)
        elif mode == RM.CUDNN_RESAMPLE_MAXPOOL:  # the kernel always stores the argmax: one scratch slot
            i_st, i_dt, i_arg = (0,) * x.ndim, "int32", scratch.take(1, "int32")
        else:
            i_st, i_dt, i_arg = tuple(y.strides), "int32", Arg.dummy("int32")
        fargs = (mode, tuple(x.dims), tuple(x.strides), tuple(y.dims), tuple(y.strides), i_st, w, s, pre,
                 krs.PAD(pad), propagate, kdtype(x), kdtype(y), i_dt)
        args = [Arg.tensor(x), Arg.tensor(y), i_arg]
        total = math.prod(y.dims)
        return [Step("resample_fwd:" + src_key(fargs), lambda: krs._fwd_kernel(*fargs)[0], krs._grid(total, block),
                     block, args, nbytes=tensor_bytes(x, y, idx))], scratch.size
    dy, dx, idx = node.inputs["DY"], node.outputs["DX"], node.inputs.get("IDX")
    if mode != RM.CUDNN_RESAMPLE_MAXPOOL:
        idx = None
    i_st = tuple(idx.strides) if idx is not None else tuple(dy.strides)
    fargs = (mode, tuple(dx.dims), tuple(dx.strides), tuple(dy.dims), tuple(dy.strides), i_st, w, s, pre,
             krs.PAD(pad), kdtype(dy), kdtype(dx))
    args = [Arg.tensor(dy), Arg.tensor(idx) if idx is not None else Arg.dummy("int32"), Arg.tensor(dx)]
    total = math.prod(dx.dims)
    return [Step("resample_bwd:" + src_key(fargs, kdtype(idx) if idx is not None else "int32"),
                 lambda: krs._bwd_kernel(*fargs)[0], krs._grid(total, block), block, args,
                 nbytes=tensor_bytes(dy, dx, idx))], 0


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
            return S.CUDNN_STATUS_NOT_SUPPORTED, \
                f"node '{node.name}': IDX: MAXPOOL backward routes dy by the forward's index tensor (X/Y not used)"
        if node.OP == "resample_fwd" and tuple(node.outputs["Y"].dims[:2]) != tuple(node.inputs["X"].dims[:2]):
            return S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"node '{node.name}': Y: N and C must match X's"
        return OK

    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 64, 512, 64, 128),)

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE)
        if st == S.CUDNN_STATUS_SUCCESS and b & (b - 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE {b} is not a power of 2"
        return st, why

    def candidates_key(self, sub):
        return ()

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
        return steps_time(device, self._memo(sub, cfg)[0], flops_per_byte=taps / 2.0, threads=b) \
            * (1.0 + abs(b - 256) / 1e4)

    def workspace_size(self, sub, cfg):
        return self._memo(sub, cfg)[1]

    def build(self, sub, cfg, ctx):
        steps, ws = self._memo(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
