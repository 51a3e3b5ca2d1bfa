"""Engine "rng_philox": the RNG node (BERNOULLI, UNIFORM, NORMAL) as the Philox4x32-10 kernel of
:mod:`ncudnn.kernels.rng.philox`: a counter-based generator, so the output depends only on (seed, offset)
and never on the launch configuration (BLOCK_SIZE knob, grid size).

SEED and OFFSET come from the by-value SEED / OFFSET tensors (the variant pack may override them)
or the node's ``seed`` attribute; device-tensor seeds are refused (the kernel takes them as launch
parameters). Y must be packed row-major (element i of Y, row-major, is stream word offset + i: the
contract of reference/rng.py, which the kernel follows bit for bit).
"""
import math

import numpy as np
from numba.cuda import types

from ...kernels.rng import philox as krng
from ...kernels.primitives.warp import SIM, sm_count
from ...types import cudnnBackendKnobType_t, cudnnRngDistribution_t, cudnnStatus_t
from ..base import OK, Engine, KnobSpec
from ..membound.common import Arg, MemPlan, Step, by_value_only, kdtype, src_key, steps_time
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
RD = cudnnRngDistribution_t
_M32 = 0xFFFFFFFF


def _lo(v):
    return np.uint64(int(v) & _M32)


def _hi(v):
    return np.uint64((int(v) & 0xFFFFFFFFFFFFFFFF) >> 32)


def _params(node):
    d = RD(int(node.distribution))
    if d == RD.CUDNN_RNG_DISTRIBUTION_NORMAL:
        return float(node.normal_mean), float(node.normal_std)
    if d == RD.CUDNN_RNG_DISTRIBUTION_UNIFORM:
        return float(node.uniform_min), float(node.uniform_max)
    return float(node.bernoulli_probability), 0.0


@register
class RngPhiloxEngine(Engine):
    name = "rng_philox"
    kinds = ("rng",)
    fallback = True

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        node = sub.nodes[0]
        st, why = by_value_only(node, ("SEED", "OFFSET"))
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        y = node.outputs["Y"]
        if kdtype(y) not in ("float32", "float16", "bfloat16", "float64", "int8", "int32", "uint8"):
            return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': Y: data type {y.dtype.name}"
        if y.is_virtual:
            return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{node.name}': Y: virtual RNG output"
        if not y.is_contiguous():
            return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, \
                f"node '{node.name}': Y: strides {y.strides}: only packed row-major outputs"
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

    def _step(self, sub, cfg):
        node = sub.nodes[0]
        y = node.outputs["Y"]
        n = y.numel
        dist, dt = int(RD(int(node.distribution))), kdtype(y)
        block = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128)
        grid = max(1, min(math.ceil(n / 4 / block), 8 if SIM else sm_count() * 16))
        seed_t, off_t = node.inputs.get("SEED"), node.inputs.get("OFFSET")
        if seed_t is not None:
            k0, k1 = Arg.scalar(seed_t, types.uint64, _lo), Arg.scalar(seed_t, types.uint64, _hi)
        else:
            k0, k1 = Arg.const(_lo(node.seed), types.uint64), Arg.const(_hi(node.seed), types.uint64)
        if off_t is not None:
            o0, o1 = Arg.scalar(off_t, types.uint64, _lo), Arg.scalar(off_t, types.uint64, _hi)
        else:
            o0 = o1 = Arg.const(np.uint64(0), types.uint64)
        a, b = _params(node)
        args = [Arg.tensor(y), Arg.const(n), k0, k1, o0, o1, Arg.const(a, types.float64), Arg.const(b, types.float64)]
        return Step("rng_philox:" + src_key(dist, dt), lambda: krng._kernel(dist, dt), grid, block, args,
                    nbytes=n * y.itemsize)

    def cost(self, sub, cfg, device):
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128)
        return steps_time(device, [self._step(sub, cfg)], flops_per_byte=40.0, threads=b, regs=48) \
            * (1.0 + abs(b - 128) / 1e4)

    def build(self, sub, cfg, ctx):
        return MemPlan(self, sub, cfg, [self._step(sub, cfg)], 0)
