"""Engine "pointwise_fused": a DAG of pointwise nodes (or one node) as ONE generated kernel.

The subgraph's nodes become a :class:`~ncudnn.kernels.pointwise.fused.PointwiseSpec`: tensors read from
outside are kernel inputs (broadcast dims get stride 0 over the output shape; by-value scalars are a
one-element device array), virtual tensors inside stay in registers, non-virtual (and materialized)
tensors written are kernel outputs. Knobs: BLOCK_SIZE (threads per block),
ARRAY_SIZE_PER_THREAD (elements per thread per loop trip, the generator's ``unroll``) and CTA_COUNT
(the grid-stride grid's cap in waves of resident blocks, ``PointwiseSpec.waves``; 0 = no cap, every
thread one trip). Default config: 128 threads, 2 elements (vectors) a trip, no cap; the cost model
ranks every other config 5% behind it. A vector kernel with a transcendental node (GELU, exp, tanh, ...)
gets launch bounds of HEAVY_THREADS resident threads an SM (see :func:`heavy_min_blocks`); capped grids
count the compiled kernel's resident blocks (:func:`resident_grid`).
"""
import functools
import math

import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support

from ... import memory
from ...kernels.runtime import kcache
from ...kernels.pointwise import fused as kpw
from ...kernels.runtime.launch import ArgView
from ...kernels.pointwise import ops as po
from ...kernels.runtime.dtypes import dtype_name
from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from .. import heuristics as H
from ..base import OK, Engine, KnobSpec, SubPlan
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
#: the default config, the fastest of the variants on the H200 (close to the copy bandwidth, where 256 threads,
#: 4 elements a trip and a 4-wave grid were not; dev/perf_notes.md, "memory-bound knobs measured"): threads per
#: block, elements per thread per trip, and the CTA_COUNT grid cap in waves of resident blocks (0: no cap, one
#: trip a thread)
BLOCK_DEFAULT, ASPT_DEFAULT, WAVES_DEFAULT = 128, 2, 0

#: node attributes passed to the generator as params (the lower-cased backend attribute names)
PARAMS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "elu_alpha", "softplus_beta",
          "swish_beta", "axis", "alpha1", "alpha2", "nan_propagation")


_DTYPE_NAMES = {}


def _kernel_dtype(t):
    """The generator's dtype name for a tensor's cudnnDataType_t (None: no kernel storage type)."""
    dt = t.dtype
    if dt not in _DTYPE_NAMES:
        try:
            _DTYPE_NAMES[dt] = dtype_name(memory.numpy_dtype(dt))
        except Exception:
            _DTYPE_NAMES[dt] = None
    return _DTYPE_NAMES[dt]


def _abi(storage):
    """The array dtype the kernel is compiled and launched with: booleans travel as uint8 (same bytes,
    0 / 1; the launch ABI sizes elements by bit width, which numba's boolean type lacks)."""
    return _U8 if storage == np.bool_ else storage


_U8 = np.dtype(np.uint8)


class _Layout:
    """How a pointwise subgraph maps onto a kernel: inputs, outputs, refs, shape."""

    def __init__(self, sub):
        materialized = getattr(sub, "materialize", frozenset())
        produced = {}
        for j, n in enumerate(sub.nodes):
            for t in n.outputs.values():
                produced[t.uid] = j
        self.inputs = [t for t in sub.inputs()]
        self.outputs = [t for n in sub.nodes for t in n.outputs.values()
                        if not t.is_virtual or t.uid in materialized]
        self.nodes = sub.nodes
        n_in = len(self.inputs)
        self.ref = {t.uid: k for k, t in enumerate(self.inputs)}
        self.ref.update({u: n_in + j for u, j in produced.items()})
        dims = [t.dims for n in sub.nodes for t in n.tensors()]
        rank = len(dims[0])
        self.rank_ok = all(len(d) == rank for d in dims)
        self.shape = tuple(max(d[i] for d in dims) for i in range(rank)) if self.rank_ok else ()
        self.numel = math.prod(self.shape) if self.shape else 0
        io = self.inputs + self.outputs
        self.nbytes = sum(math.prod(t.dims) * t.itemsize for t in io) if self.rank_ok else 0
        self.dense = len({self.strides(t) for t in io if any(self.strides(t))}) <= 1 if self.rank_ok else False

    def strides(self, t):
        return tuple(0 if (d == 1 and n != 1) else s for d, s, n in zip(t.dims, t.strides, self.shape))

    @property
    def vec(self):
        """Elements per vector access of the built kernels: the layout's widest (16 bytes), halved
        until it divides the element count; 1 when the layout does not fit the vector path."""
        v = self.__dict__.get("_vec")
        if v is None:
            try:
                v = kpw.auto_vec(self.spec(256, 4, vec=1)) if self.rank_ok and self.outputs else 1
            except (TypeError, ValueError):   # a layout check_support rejects: no vectors
                v = 1
            while v > 1 and self.numel % v:
                v //= 2
            self._vec = v
        return v

    @property
    def heavy(self):
        """True when a node is a transcendental (pointwise_ops.HEAVY_MODES)."""
        return any(int(n.mode) in po.HEAVY_MODES for n in self.nodes)

    def spec(self, block, unroll, vec=1, waves=4, min_blocks=0):
        ins = tuple(kpw.TensorSpec(_kernel_dtype(t), self.strides(t)) for t in self.inputs)
        nodes = []
        for n in self.nodes:
            ports, _ = n.operand_ports()
            params = {}
            for p in PARAMS:
                v = getattr(n, p, None)
                if v is not None:
                    params[p] = int(v) if p in ("axis", "nan_propagation") else float(v)
            nodes.append(kpw.NodeSpec.make(int(n.mode), [self.ref[n.inputs[p].uid] for p in ports], **params))
        outs = tuple(kpw.OutputSpec(self.ref[t.uid], _kernel_dtype(t), self.strides(t)) for t in self.outputs)
        return kpw.PointwiseSpec(self.shape, ins, tuple(nodes), outs, block=block, unroll=unroll, vec=vec,
                                 waves=waves, min_blocks=min_blocks)


def _layout(sub):
    lay = sub.__dict__.get("_pointwise_layout")
    if lay is None:
        lay = sub.__dict__["_pointwise_layout"] = _Layout(sub)
    return lay


@register
class PointwiseFusedEngine(Engine):
    name = "pointwise_fused"
    kinds = ("pointwise",)
    numerical_notes = ()
    fallback = True

    def __init__(self):
        self._static = {}  # (config, tensor count, device) -> per-config constants of the cost model

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        for n in sub.nodes:
            if int(n.mode) not in po.SUPPORTED_MODES:
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{n.name}': mode {n.mode.name} has no kernel expression"
            for port, t in list(n.inputs.items()) + list(n.outputs.items()):
                if t.is_virtual:
                    continue
                if _kernel_dtype(t) is None:
                    return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, \
                        f"node '{n.name}': {port}: data type {t.dtype.name} has no kernel storage type"
                if t.vector_count != 1 or int(t.reordering) != 0:
                    return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, \
                        f"node '{n.name}': {port}: vectorized / reordered tensors are not supported"
                if t.ragged_offset is not None:
                    return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, \
                        f"node '{n.name}': {port}: ragged offsets are not supported"
        lay = _layout(sub)
        if not lay.rank_ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, "tensors of different ranks in one pointwise DAG"
        if not lay.outputs:
            return S.CUDNN_STATUS_BAD_PARAM, "the pointwise DAG writes no tensor"
        for t in lay.outputs:
            if tuple(t.dims) != lay.shape:
                return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, \
                    f"{t.label}: written with dims {t.dims}, smaller than the DAG's {lay.shape}"
        return OK

    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, 1, 8, 1, ASPT_DEFAULT),
                KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128, 1024, 128, BLOCK_DEFAULT),
                KnobSpec(K.CUDNN_KNOB_TYPE_CTA_COUNT, 0, 8, 1, WAVES_DEFAULT))

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        for k in (K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_CTA_COUNT):
            v = cfg.get(k, WAVES_DEFAULT)
            if v & (v - 1):
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {k.name} = {v} is not a power of 2"
        return OK

    def candidates_key(self, sub):
        return ()  # the same knob space for every pointwise DAG

    def cost(self, sub, cfg, device):
        lay = _layout(sub)
        n_io = len(lay.inputs) + len(lay.outputs)
        key = (cfg, n_io, device)
        static = self._static.get(key)
        if static is None:
            unroll = cfg.get(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, ASPT_DEFAULT)
            block = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, BLOCK_DEFAULT)
            regs = min(255, 24 + unroll * n_io)  # sm_90: 40 at unroll 4, 4 tensors (compile check)
            per_sm = H.blocks_per_sm(device, block, regs)
            waves = _waves(cfg)
            static = self._static[key] = (unroll, block, regs, per_sm,
                                          device.sm_count * max(1, 2048 // block) * waves if waves else 1 << 40)
        unroll, block, regs, per_sm, max_blocks = static
        n, nbytes, vec = lay.numel, lay.nbytes, lay.vec
        # vector path: index math once per vector (none for dense); general path: per element and dim
        index_flops = 0 if lay.dense else (2 if vec > 1 else 4 * len(lay.shape))
        flops = n * (len(lay.nodes) + index_flops)
        per_thread = min(unroll, 16 // vec) * vec if vec > 1 else unroll
        chunk = block * per_thread
        blocks = max(1, min(-(-n // chunk), max_blocks))
        resident = min(blocks, device.sm_count * max(per_sm, 1)) * block
        t = H.kernel_time(device, flops=flops, nbytes=nbytes, blocks=blocks, threads=block, regs=regs,
                          bytes_in_flight=resident * per_thread * nbytes / max(n, 1), per_sm=per_sm)
        # a trip of the grid-stride loop processes block*unroll elements: idle lanes on the tail
        # every config but the default 5% more: the measured-best default ranks first
        return t / (n / (-(-n // chunk) * chunk)) ** 0.25 * (1.0 if cfg.knobs == _DEFAULT_KNOBS else 1.05)

    def build(self, sub, cfg, ctx):
        lay = _layout(sub)
        block = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, BLOCK_DEFAULT)
        spec = lay.spec(block, cfg.get(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, ASPT_DEFAULT),
                        vec=lay.vec, waves=_waves(cfg), min_blocks=heavy_min_blocks(lay, block))
        meta, compiled = _compiled(spec)
        if spec.min_blocks and (getattr(compiled, "attrs", None) or {}).get("local", 0):
            from dataclasses import replace   # the bounds made it spill: the unbounded kernel instead
            meta, compiled = _compiled(replace(spec, min_blocks=0))
        return PointwisePlan(self, sub, cfg, lay, meta, compiled)


_DEFAULT_KNOBS = tuple(sorted(((int(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD), ASPT_DEFAULT),
                              (int(K.CUDNN_KNOB_TYPE_BLOCK_SIZE), BLOCK_DEFAULT),
                              (int(K.CUDNN_KNOB_TYPE_CTA_COUNT), WAVES_DEFAULT))))


def heavy_min_blocks(lay, block):
    """Launch bounds of a vector kernel with a transcendental node and at most 3 tensors: 1536 resident threads
    an SM (a budget of 40 registers at 128 threads; a build that spills takes the unbounded kernel). Unbounded,
    ptxas schedules such a kernel's later vector loads after the first vector's math (sm_90: one 16-byte load in
    flight a thread, so bias + GELU ran slower than bias + ReLU; dev/perf_notes.md, "Pointwise"); with the budget
    every load of a trip is issued first (SASS checked)."""
    if not HEAVY_THREADS or not lay.heavy or lay.vec == 1 or len(lay.inputs) + len(lay.outputs) > 3:
        return 0
    return max(1, HEAVY_THREADS // block)


#: resident threads an SM the launch bounds of a heavy vector kernel ask for (0: no bounds)
HEAVY_THREADS = 1536


def resident_grid(meta, compiled):
    """The launch grid: a grid-stride config (``waves`` > 0) gets ``waves`` times the blocks that are
    resident at once on every SM, counted from the compiled kernel's registers (a 2048-thread
    estimate would make a 1-wave grid 1.3 waves at 40 registers); else one trip a thread."""
    spec, grid = meta.spec, meta.grid()
    regs = (getattr(compiled, "attrs", None) or {}).get("regs")
    if not spec.waves or not regs:
        return grid
    from ...kernels.primitives.warp import sm_count

    warps = spec.block // 32
    per_warp = -(-regs * 32 // 256) * 256           # registers are allocated per warp, 256 at a time
    per_sm = max(1, min(2048 // spec.block, 32, 65536 // (per_warp * warps)))
    return max(1, min(-(-meta.numel // _chunk(spec)), sm_count() * per_sm * spec.waves))


def _chunk(spec):
    if kpw.uses_vec_path(spec):
        return spec.block * kpw.vec_unroll(spec) * spec.vec
    return spec.block * spec.unroll * spec.pack


def _waves(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_CTA_COUNT, WAVES_DEFAULT)


def _compiled(spec):
    """(geometry, compiled kernel) of ``spec`` through the kernel cache: memory, then the cubin on disk
    (no JIT in a later process), then generate + compile."""
    meta = kpw.PointwiseKernel(spec, None, None)  # geometry only: no code generated yet
    sig = tuple(types.Array(numpy_support.from_dtype(_abi(st)), 1, "C") for st in meta.storage) + (types.int64,)
    ck = kcache.get_or_compile("pointwise_fused:" + kpw.cache_key(spec), lambda: kpw.build_pointwise(spec).kernel, sig)
    return meta, ck


class PointwisePlan(SubPlan):
    """One fused kernel. ``prepare`` packs the launch parameters once (flat storage views of the
    tensors, the element count); ``run`` is one ``cuLaunchKernel`` (kernels/runtime/launch.py). A vector
    kernel (``vec > 1``) whose buffers are not aligned to one vector runs its ``vec = 1`` twin
    (compiled on first need)."""

    def __init__(self, engine, sub, cfg, lay, meta, compiled):
        super().__init__(engine, sub, cfg, 0)
        self.lay, self.meta, self.compiled = lay, meta, compiled
        self.grid = resident_grid(meta, compiled)
        self.block = meta.spec.block
        self._scalar = None

    def _kernel_for(self, views):
        lay, meta = self.lay, self.meta
        ptrs = [None if t.is_by_value else views[t.uid].ptr for t in lay.inputs + lay.outputs]
        if meta.vec_ok(ptrs):
            return meta, self.compiled
        if self._scalar is None:
            from dataclasses import replace
            self._scalar = _compiled(replace(meta.spec, vec=1))
        return self._scalar

    def launches(self, views, scratch):
        from numba import cuda

        lay = self.lay
        meta, compiled = self._kernel_for(views)
        args = []
        for t, ext, st in zip(lay.inputs + lay.outputs, meta.extents, meta.storage):
            v = views[t.uid]
            if t.is_by_value:
                host = np.array([v], dtype=memory.numpy_dtype(t.dtype)).view(_abi(st))
                args.append(cuda.to_device(host))  # kept alive by the prepared launch
            else:
                args.append(ArgView(v.ptr, (max(ext, 1),), (st.itemsize,), st.itemsize, _abi(st)))
        return [compiled.prepare(resident_grid(meta, compiled), self.block, tuple(args) + (meta.numel,))]

    def prepare(self, views, scratch):
        (prepared,) = self.launches(views, scratch)
        return functools.partial(prepared.run, None)  # run(stream): one cuLaunchKernel

    def execute(self, buffers, workspace, stream):
        views = {u: (memory.as_view(a) if not isinstance(a, (int, float)) else a) for u, a in buffers.items()}
        self.prepare(views, None)(stream)
