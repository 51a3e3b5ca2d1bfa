"""Engine "resample": RESAMPLE_FWD / RESAMPLE_BWD (max pool with index, average pool including /
excluding padding, nearest, bilinear; ZERO / NEG_INF / EDGE padding; 1-3 spatial dims; any layout).

Forward NEAREST / BILINEAR and pooling with at most ``MAX_TAPS`` taps run the direct kernels of
:mod:`ncudnn.kernels.resample_direct`: 16-byte vectors of 4 channels per thread for float32
tensors with unit channel stride (NHWC), C % 4 == 0, strides multiples of 4 and alignment >= 16 (checked again on the addresses at bind time),
else a thread per element in the output's memory order (NCHW: threads along W); the window unrolled,
the max-pool index written only when the graph has an IDX output. Pooling backward is the direct
integer gather (deterministic, no atomics): MAXPOOL routes dy by IDX, or without IDX recomputes the
winners from X. NEAREST / BILINEAR backward, larger windows and EDGE-padded pooling backward use the generic
:mod:`ncudnn.kernels.resample` kernels (also a deterministic gather). Knob: BLOCK_SIZE. No workspace.
Unsupported (reason names the node and field): alpha != 1 or beta != 0, MAXPOOL backward with
neither IDX nor X (or X with EDGE padding), non-integer pooling geometry, BILINEAR window != 2.
"""
import math

from ..errors import BadParamError
from ..kernels import resample as krs
from ..kernels import resample_direct as rd
from ..types import cudnnBackendKnobType_t, cudnnNanPropagation_t, cudnnResampleMode_t, cudnnStatus_t
from .base import OK, Engine, KnobSpec
from .membound_common import Arg, MemPlan, Step, io_dtypes_ok, kdtype, src_key, steps_time, tensor_bytes
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
        steps, ws, aligned = self._memo(sub, cfg)
        return _ResamplePlan(self, sub, cfg, steps, ws, aligned)
