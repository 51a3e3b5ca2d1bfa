"""Engine "bn_finalize": BN_FINALIZE (training / inference) as one thread-per-channel kernel
(:mod:`ncudnn.kernels.norm.bn_finalize`): equivalent scale / bias, saved mean and inverse std, running
statistics read from PREV_* and written to UPDATED_* (they may alias). EPSILON, ACCUM_COUNT and
EXP_AVG_FACTOR by value or as one-element device tensors (read inside the kernel). Knob: BLOCK_SIZE (threads per block). No workspace.
Also "bn_bwd_weights": BN_BWD_WEIGHTS (dscale, dbias and the dx coefficients) the same way.
"""
from numba.cuda import types

from ...kernels.norm import bn_finalize as kb
from ...types import cudnnBackendKnobType_t, cudnnBnFinalizeStatsMode_t, cudnnStatus_t
from ..base import OK, Engine, KnobSpec
from ..membound.common import Arg, MemPlan, Scratch, Step, io_dtypes_ok, kdtype, src_key, \
    steps_time, tensor_bytes, written
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
BF = cudnnBnFinalizeStatsMode_t
_UNUSED = ("float32", 0, 0)


def group_desc(t, per_sample=False):
    """(dtype, sN, sC) of a [1, C, 1..] / [N, C, 1..] statistics or parameter tensor."""
    if t is None:
        return _UNUSED
    sn = t.strides[0] if (per_sample and t.dims[0] > 1) else 0
    return (kdtype(t), sn, t.strides[1] if t.dims[1] > 1 else 0)


def tensor_arg(t):
    return Arg.tensor(t) if t is not None else Arg.dummy("float32")


def finalize_step(tensors, groups, channels, count_arg, eps_arg, mom_arg, training, per_sample=False,
                  block=128, shift=None, bias_shifted=False):
    """A Step of the finalize kernel; ``tensors`` maps FINALIZE_ARRAYS names to descriptors, to
    ``("scratch", Arg, dtype)`` entries (dense per-group workspace), or None. ``shift``: X when the
    sums are shifted by X's first element per group; ``bias_shifted``: eq_bias relative to it."""
    descs, args = [], []
    tensors = dict(tensors, shift=shift)
    for name, kind in kb.FINALIZE_ARRAYS:
        t = tensors.get(name)
        if isinstance(t, tuple):  # scratch: dense per group
            _, arg, dt = t
            descs.append((dt, channels if per_sample else 0, 1))
            args.append(arg)
        else:
            descs.append(group_desc(t, per_sample and kind == "g"))
            args.append(tensor_arg(t))
    descs = tuple(descs)
    writes = frozenset(n for n in ("saved_mean", "saved_inv", "next_mean", "next_var") if tensors.get(n) is not None)
    shifted = shift is not None
    rel = bool(shifted and bias_shifted)
    scalars = tuple((n, a.dtype) for n, a in (("count", count_arg), ("eps", eps_arg), ("mom", mom_arg))
                    if a.kind == "tensor")
    factory = lambda: kb.finalize_kernel(descs, training, writes, shifted, rel, scalars)[0]  # noqa: E731
    key = "bn_finalize:" + src_key(descs, training, sorted(writes), shifted, rel, scalars)
    grid = max(1, -(-groups // block))
    args += [Arg.const(groups), Arg.const(channels), count_arg, eps_arg, mom_arg]
    return Step(key, factory, grid, block, args, nbytes=groups * 4 * 8)


def scalar_arg(t, nbtype=types.float64, conv=float):
    """A run-time scalar port: its value as a launch parameter when given by value, else the device
    tensor itself (the kernel reads element 0)."""
    return Arg.scalar(t, nbtype, conv) if t.is_by_value else Arg.tensor(t)


def scalar_ports_ok(node, ports):
    """(status, reason): every listed scalar port, when a device tensor, is one element of a kernel dtype."""
    for p in ports:
        t = node.inputs.get(p)
        if t is None or t.is_by_value:
            continue
        if t.numel != 1:
            return S.CUDNN_STATUS_BAD_PARAM, f"node '{node.name}': {p}: a device scalar needs 1 element, has {t.numel}"
        if kdtype(t) not in ("float32", "float64", "float16", "bfloat16", "int32", "int64"):
            return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': {p}: data type {t.dtype.name}"
    return OK


def bwd_weights_step(tensors, groups, channels, count, per_sample=False, block=128, centered=False):
    descs, args = [], []
    for name, kind in kb.BWD_ARRAYS:
        t = tensors.get(name)
        if isinstance(t, tuple):
            _, arg, dt = t
            descs.append((dt, channels if per_sample else 0, 1))
            args.append(arg)
        else:
            descs.append(group_desc(t, per_sample and kind == "g"))
            args.append(tensor_arg(t))
    descs = tuple(descs)
    key = "bn_bwd_weights:" + src_key(descs, centered)
    args += [Arg.const(groups), Arg.const(channels), Arg.const(float(count), types.float64)]
    return Step(key, lambda: kb.bwd_weights_kernel(descs, centered)[0], max(1, -(-groups // block)), block, args,
                nbytes=groups * 4 * 10)


def _block_knob():
    return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 64, 256, 64, 128),)


class _PerChannelEngine(Engine):
    fallback = True

    def knobs(self, sub):
        return _block_knob()

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st == S.CUDNN_STATUS_SUCCESS and cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE) == 192:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE 192 is not a power of 2"
        return st, why

    def candidates_key(self, sub):
        return ()

    def cost(self, sub, cfg, device):
        node = sub.nodes[0]
        return steps_time(device, []) + tensor_bytes(*node.inputs.values(), *node.outputs.values()) \
            / device.mem_bandwidth * (1.0 + cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128) / 1e4)

    def _channels_ok(self, node, ports):
        ref = node.inputs[ports[0]]
        if ref.ndim < 2:
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"node '{node.name}': {ports[0]}: needs [1, C, ...] dims"
        want = (1, ref.dims[1]) + (1,) * (ref.ndim - 2)
        for p, t in list(node.inputs.items()) + list(node.outputs.items()):
            if t.is_by_value or p in ("X", "EPSILON", "ACCUM_COUNT", "EXP_AVG_FACTOR"):
                continue
            if tuple(t.dims) != want:
                return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, \
                    f"node '{node.name}': {p}: dims {t.dims}, this engine needs per-channel {want}"
        return OK


@register
class BnFinalizeEngine(_PerChannelEngine):
    name = "bn_finalize"
    kinds = ("bn_finalize",)

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        node = sub.nodes[0] if st == S.CUDNN_STATUS_SUCCESS else None
        for check in (lambda: io_dtypes_ok(node),
                      lambda: scalar_ports_ok(node, ("EPSILON", "ACCUM_COUNT", "EXP_AVG_FACTOR")),
                      lambda: self._channels_ok(node, ("SUM",))):
            if st != S.CUDNN_STATUS_SUCCESS:
                return st, why
            st, why = check()
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if int(node.mode) == int(BF.CUDNN_BN_FINALIZE_STATISTICS_INFERENCE):
            for p in ("PREV_RUNNING_MEAN", "PREV_RUNNING_VAR"):
                if p not in node.inputs:
                    return S.CUDNN_STATUS_BAD_PARAM, f"node '{node.name}': {p}: required in INFERENCE mode"
        running = [p for p in ("PREV_RUNNING_MEAN", "PREV_RUNNING_VAR", "UPDATED_RUNNING_MEAN",
                               "UPDATED_RUNNING_VAR") if p in node.inputs or p in node.outputs]
        if int(node.mode) == int(BF.CUDNN_BN_FINALIZE_STATISTICS_TRAINING) and running and len(running) != 4:
            return S.CUDNN_STATUS_BAD_PARAM, \
                f"node '{node.name}': running statistics need PREV_* and UPDATED_* mean and var, got {running}"
        if ("SAVED_MEAN" in node.outputs) != ("SAVED_INV_STD" in node.outputs):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': SAVED_MEAN and SAVED_INV_STD go together"
        return OK

    def _plan(self, sub, cfg):
        node = sub.nodes[0]
        i = node.inputs
        o = {p: written(sub, t) for p, t in node.outputs.items()}
        training = int(node.mode) == int(BF.CUDNN_BN_FINALIZE_STATISTICS_TRAINING)
        C = i["SUM"].dims[1]
        scratch = Scratch()
        tensors = {"sum": i["SUM"], "sqsum": i["SQSUM"], "scale": i["SCALE"], "bias": i["BIAS"],
                   "prev_mean": i.get("PREV_RUNNING_MEAN"), "prev_var": i.get("PREV_RUNNING_VAR"),
                   "saved_mean": o.get("SAVED_MEAN") if training else None,
                   "saved_inv": o.get("SAVED_INV_STD") if training else None,
                   "next_mean": o.get("UPDATED_RUNNING_MEAN"), "next_var": o.get("UPDATED_RUNNING_VAR")}
        for port, name in (("EQ_SCALE", "eq_scale"), ("EQ_BIAS", "eq_bias")):
            tensors[name] = o[port] if o[port] is not None else ("scratch", scratch.take(C, "float32"), "float32")
        mom = scalar_arg(i["EXP_AVG_FACTOR"]) if "EXP_AVG_FACTOR" in i else Arg.const(0.0, types.float64)
        step = finalize_step(tensors, C, C, scalar_arg(i["ACCUM_COUNT"]), scalar_arg(i["EPSILON"]), mom,
                             training, block=cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128))
        return [step], scratch.size

    def workspace_size(self, sub, cfg):
        return self._plan(sub, cfg)[1]

    def build(self, sub, cfg, ctx):
        steps, ws = self._plan(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)


@register
class BnBwdWeightsEngine(_PerChannelEngine):
    name = "bn_bwd_weights"
    kinds = ("bn_bwd_weights",)

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.nodes[0]
        st, why = io_dtypes_ok(node)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        return self._channels_ok(node, ("MEAN",))

    def _plan(self, sub, cfg):
        node = sub.nodes[0]
        i, o = node.inputs, node.outputs
        x = i["X"]
        C = x.dims[1]
        count = x.numel // C
        scratch = Scratch()
        tensors = {"dy_sum": i["DY_SUM"], "dyx_sum": i["DY_X_SUM"], "mean": i["MEAN"], "inv": i["INV_STD"],
                   "scale": i["SCALE"]}
        for port, name in (("DSCALE", "dscale"), ("DBIAS", "dbias"), ("EQ_DY_SCALE", "eq_dy"),
                           ("EQ_X_SCALE", "eq_x"), ("EQ_BIAS", "eq_b")):
            t = written(sub, o[port])
            tensors[name] = t if t is not None else ("scratch", scratch.take(C, "float32"), "float32")
        step = bwd_weights_step(tensors, C, C, count, block=cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128))
        return [step], scratch.size

    def workspace_size(self, sub, cfg):
        return self._plan(sub, cfg)[1]

    def build(self, sub, cfg, ctx):
        steps, ws = self._plan(sub, cfg)
        return MemPlan(self, sub, cfg, steps, ws)
