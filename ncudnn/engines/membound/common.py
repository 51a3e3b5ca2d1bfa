"""Shared machinery of the memory-bound engines (reduction, norms, resample, softmax, RNG).

A memory-bound subgraph runs as a short, fixed sequence of kernel launches. Each launch is a
:class:`Step`: a kernel-cache key and a factory for the ``cuda.jit`` dispatcher (compiled once
through :func:`ncudnn.kernels.runtime.kcache.get_or_compile`), a grid / block, and its arguments as
:class:`Arg` records that say where each value comes from when the plan is bound:

* ``Arg.tensor(t)``: the tensor's storage as a flat 1-D array (the kernels index it with the
  descriptor's element strides, compiled in);
* ``Arg.scratch(offset, n, dtype)``: ``n`` elements of the plan's workspace at a byte offset;
* ``Arg.scalar(t, nbtype, conv)``: a by-value tensor's value (the variant pack may override it);
* ``Arg.const(value, nbtype)``: a value fixed at build time;
* ``Arg.dummy(dtype)``: a one-element placeholder array for an unused slot.

:class:`MemPlan` binds the steps once per set of buffer addresses (``prepare``) into
``kernels.runtime.launch.PreparedLaunch`` objects; ``run(stream)`` is then one ``cuLaunchKernel`` per step.
"""
import functools
import hashlib
import math

import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support

from ... import memory
from ...kernels.runtime import kcache
from ...kernels.runtime.dtypes import dtype_name, placeholder, storage_dtype
from ...kernels.runtime.launch import ArgView
from ...types import cudnnStatus_t
from .. import heuristics as H
from ..base import SubPlan

S = cudnnStatus_t
#: byte alignment of workspace slices
WS_ALIGN = 256
_U8 = np.dtype(np.uint8)


def kdtype(t):
    """Kernel dtype name of a tensor descriptor ("float32", "bfloat16", ...), None if it has none."""
    return _kdtype(t.dtype)


@functools.lru_cache(maxsize=None)
def _kdtype(dt):
    try:
        return dtype_name(memory.numpy_dtype(dt))
    except Exception:
        return None


def abi_dtype(name):
    """The array dtype a kernel is compiled / launched with (booleans travel as uint8)."""
    st = storage_dtype(name)
    return _U8 if st == np.bool_ else st


@functools.lru_cache(maxsize=None)
def array_type(name):
    return types.Array(numpy_support.from_dtype(abi_dtype(name)), 1, "C")


def extent(dims, strides):
    """Elements a tensor's strides reach from element 0 (at least 1)."""
    if any(int(d) == 0 for d in dims):
        return 1
    return max(1, 1 + sum((int(d) - 1) * int(s) for d, s in zip(dims, strides)))


def src_key(*parts):
    """A kernel-cache key from anything with a stable repr (spec objects, source text, dtypes)."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()


class Arg:
    """Where one kernel argument comes from at bind time (see the module docstring)."""

    __slots__ = ("kind", "t", "offset", "n", "dtype", "nbtype", "value", "conv")

    def __init__(self, kind, t=None, offset=0, n=0, dtype=None, nbtype=None, value=None, conv=None):
        self.kind, self.t, self.offset, self.n = kind, t, offset, n
        self.dtype, self.nbtype, self.value, self.conv = dtype, nbtype, value, conv

    @classmethod
    def tensor(cls, t):
        name = kdtype(t)
        return cls("tensor", t=t, dtype=name, nbtype=array_type(name))

    @classmethod
    def scratch(cls, offset, n, dtype):
        return cls("scratch", offset=offset, n=n, dtype=dtype, nbtype=array_type(dtype))

    @classmethod
    def scalar(cls, t, nbtype=types.float64, conv=float):
        return cls("scalar", t=t, nbtype=nbtype, conv=conv)

    @classmethod
    def const(cls, value, nbtype=types.int64):
        return cls("const", value=value, nbtype=nbtype)

    @classmethod
    def device(cls, provider, n, dtype):
        """A device array the engine owns beyond any one execution (``provider()`` returns it, e.g.
        :func:`ncudnn.kernels.primitives.grid_sync.device_counter`), bound as its first ``n`` elements of ``dtype``."""
        return cls("device", value=provider, n=n, dtype=dtype, nbtype=array_type(dtype))

    @classmethod
    def dummy(cls, dtype="float32"):
        return cls("dummy", dtype=dtype, nbtype=array_type(dtype))

    def bind(self, views, scratch):
        k = self.kind
        if k == "tensor":
            v = views[self.t.uid]
            st = abi_dtype(self.dtype)
            if self.t.is_by_value:  # a by-value scalar read as a one-element array: a device copy of it
                from numba import cuda

                v = self.t.value if v is None else v
                host = np.array([np.asarray(v).reshape(-1)[0]]).astype(memory.numpy_dtype(self.t.dtype))
                return cuda.to_device(host.view(st))  # kept alive by the prepared launch
            return ArgView(v.ptr, (extent(self.t.dims, self.t.strides),), (st.itemsize,), st.itemsize, st)
        if k == "scratch":
            st = abi_dtype(self.dtype)
            return ArgView(scratch.ptr + self.offset, (max(self.n, 1),), (st.itemsize,), st.itemsize, st)
        if k == "scalar":
            v = views.get(self.t.uid, self.t.value)
            return self.conv(np.asarray(v).reshape(-1)[0].item() if not isinstance(v, (int, float)) else v)
        if k == "const":
            return self.value
        if k == "device":
            st = abi_dtype(self.dtype)
            return ArgView(memory.as_view(self.value()).ptr, (self.n,), (st.itemsize,), st.itemsize, st)
        return placeholder(self.dtype)


class Scratch:
    """Carves the engine's workspace into aligned slices (bytes; the total is ``size``)."""

    def __init__(self):
        self.size = 0

    def take(self, n, dtype):
        off = self.size
        nbytes = max(int(n), 1) * abi_dtype(dtype).itemsize
        self.size = off + -(-nbytes // WS_ALIGN) * WS_ALIGN
        return Arg.scratch(off, int(n), dtype)


class Step:
    """One kernel launch of a plan: cache key, dispatcher factory, geometry, argument sources."""

    def __init__(self, key, factory, grid, block, args, shared=0, nbytes=0, name=""):
        self.key, self.factory = key, factory
        self.grid, self.block, self.shared = grid, block, shared
        self.args = tuple(args)
        self.nbytes = nbytes          # DRAM bytes this launch moves (cost model)
        self.name = name or key.split(":", 1)[0]
        self.inflight = 0             # bytes a thread keeps in flight (cost model; 0: unknown)
        self.fallback = None          # a Step (or a list of Steps) run instead when an ``align`` argument is misaligned
        self.align = {}               # argument index -> byte alignment this step's kernel needs
        self.cooperative = False      # launched with cuLaunchCooperativeKernel (co-residency checked by the driver)

    def signature(self):
        return tuple(a.nbtype for a in self.args)

    def compile(self):
        ck = kcache.get_or_compile(self.key, self.factory, self.signature())
        if self.cooperative:
            ck.cooperative = True
        return ck


def _prepare(step, ck, views, scratch, out):
    """Append ``step``'s prepared launch to ``out``, or its fallback's when an ``align`` argument is
    misaligned (the element-load twin, or a list of steps that replaces it; compiled on first need)."""
    args = tuple(a.bind(views, scratch) for a in step.args)
    if step.align and any(getattr(args[k], "ptr", None) is not None and args[k].ptr % n
                          for k, n in step.align.items()):
        alts = step.fallback if isinstance(step.fallback, (list, tuple)) else [step.fallback]
        for alt in alts:
            _prepare(alt, alt.compile(), views, scratch, out)
        return
    out.append(ck.prepare(step.grid, step.block, args, step.shared))


class MemPlan(SubPlan):
    """A SubPlan of :class:`Step` s: compiled at build, bound per buffer set, run in order."""

    def __init__(self, engine, sub, config, steps, workspace_size=0):
        super().__init__(engine, sub, config, workspace_size)
        self.steps = list(steps)
        self.compiled = [s.compile() for s in self.steps]

    def launches(self, views, scratch):
        out = []
        for step, ck in zip(self.steps, self.compiled):
            _prepare(step, ck, views, scratch, out)
        return out

    def prepare(self, views, scratch):
        launches = self.launches(views, scratch)
        if len(launches) == 1:
            return functools.partial(launches[0].run, None)
        runs = [functools.partial(p.run, None) for p in launches]

        def run(stream):
            for r in runs:
                r(stream)
        return run

    def execute(self, buffers, workspace, stream):
        views = {u: (memory.as_view(a) if not isinstance(a, (int, float)) else a) for u, a in buffers.items()}
        ws = memory.as_view(workspace) if workspace is not None else None
        self.prepare(views, ws)(stream)


def steps_time(device, steps, flops_per_byte=0.25, threads=256, regs=40):
    """Predicted seconds of a step sequence: bytes over bandwidth plus launch overheads."""
    nbytes = sum(s.nbytes for s in steps)
    return H.kernel_time(device, flops=nbytes * flops_per_byte, nbytes=nbytes, threads=threads, regs=regs,
                         launches=max(1, len(steps)))


def tensor_bytes(*ts):
    return sum(math.prod(t.dims) * t.itemsize for t in ts if t is not None and not t.is_by_value)


def by_value_only(node, ports):
    """(status, reason) refusing scalar ports given as device tensors (the kernels take them as launch
    parameters: reading them would need a device-to-host copy per execution)."""
    for p in ports:
        t = node.inputs.get(p)
        if t is not None and not t.is_by_value:
            return S.CUDNN_STATUS_NOT_SUPPORTED, \
                f"node '{node.name}': {p}: given as a device tensor; this engine takes it by value only"
    return S.CUDNN_STATUS_SUCCESS, ""


def io_dtypes_ok(node, allowed=("float32", "float16", "bfloat16", "float64")):
    """(status, reason): every non-virtual, non-scalar tensor of ``node`` has a kernel dtype in ``allowed``."""
    for port, t in list(node.inputs.items()) + list(node.outputs.items()):
        if t.is_by_value:
            continue
        name = kdtype(t)
        if name not in allowed:
            return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, \
                f"node '{node.name}': {port}: data type {t.dtype.name} is not one of {allowed}"
        if t.vector_count != 1 or int(t.reordering) != 0 or t.ragged_offset is not None:
            return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, \
                f"node '{node.name}': {port}: vectorized, reordered or ragged tensors are not supported"
        if any(int(s) < 0 for s in t.strides):
            return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"node '{node.name}': {port}: negative strides"
    return S.CUDNN_STATUS_SUCCESS, ""


# ------------------------------------------------------------------ kernels.reduce.strided as steps

def reduce_steps(spec, scratch, in_args, out_args, name="reduce"):
    """Steps running :class:`ncudnn.kernels.reduce.strided.ReduceSpec` ``spec``: the main kernel and, when
    the launcher splits the reduced range, the fixed-order combine (partials in ``scratch``). A
    vector kernel's main step carries its element-load twin as ``fallback`` (misaligned inputs)."""
    from ...kernels.reduce import strided as kr

    rk = kr.build_reduce(spec)  # source generated; numba compiles only on a kernel-cache miss
    ws = scratch.take(rk.workspace_elems(), rk.ctype) if rk.workspace_elems() else Arg.dummy(rk.ctype)
    steps = _reduce_kernel_steps(rk, ws, in_args, out_args, name)
    if rk.vec > 1:
        twin = rk.scalar_twin()
        fb = _reduce_kernel_steps(twin, ws, in_args, out_args, name)
        steps[0].fallback = fb[0]
        steps[0].align = {k: rk.vec * storage_dtype(dt).itemsize for k, (dt, _) in enumerate(spec.inputs)}
    return steps


def _reduce_kernel_steps(rk, ws, in_args, out_args, name):
    spec = rk.spec
    key = src_key(spec, rk.source)
    in_bytes = sum(extent(spec.shape, st) * storage_dtype(dt).itemsize for dt, st in spec.inputs)
    out_bytes = rk.n_out * sum(storage_dtype(dt).itemsize for dt, _ in spec.outputs)
    steps = [Step(f"{name}:main:{key}", lambda: rk.main, rk.grid, rk.threads, list(in_args) + list(out_args) + [ws],
                  nbytes=in_bytes + (out_bytes if rk.split == 1 else 0))]
    # bytes each thread keeps in flight (cost model): its unrolled loads of every input
    per_load = 16 if rk.vec > 1 else max(storage_dtype(dt).itemsize for dt, _ in spec.inputs)
    steps[0].inflight = rk.unroll * per_load * len(spec.inputs)
    if rk.combine is not None:
        steps.append(Step(f"{name}:combine:{key}", lambda: rk.combine, rk.combine_grid, rk.combine_threads,
                          [ws] + list(out_args), nbytes=out_bytes + rk.workspace_elems() * 4))
        steps[-1].inflight = 4 * len(spec.terms)
    return steps


def grid_steps_time(device, steps, regs=32):
    """Predicted seconds of a step sequence, each step by its grid: bytes over bandwidth or over what
    its resident threads keep in flight (``Step.inflight`` bytes a thread), waves of blocks, launches."""
    t = 0.0
    for s in steps:
        g = s.grid if isinstance(s.grid, tuple) else (s.grid,)
        b = s.block if isinstance(s.block, tuple) else (s.block,)
        blocks, threads = math.prod(g), math.prod(b)
        per_sm = H.blocks_per_sm(device, threads, regs)
        resident = min(blocks, device.sm_count * max(per_sm, 1)) * threads
        t += H.kernel_time(device, flops=s.nbytes * 0.25, nbytes=s.nbytes, blocks=blocks, threads=threads, regs=regs,
                           per_sm=per_sm, bytes_in_flight=resident * (s.inflight or 4))
    return t


# ------------------------------------------------------------- kernels.pointwise.fused as a step

#: pointwise node attributes passed to the generator (as the pointwise_fused engine passes them)
PW_PARAMS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "elu_alpha", "softplus_beta",
             "swish_beta", "axis", "alpha1", "alpha2", "nan_propagation")


def bcast_strides(t, shape):
    """Element strides of ``t`` over ``shape`` (0 where ``t`` broadcasts)."""
    return tuple(0 if (d == 1 and n != 1) else s for d, s, n in zip(t.dims, t.strides, shape))


class PointwiseBuilder:
    """Collects a fused pointwise kernel over ``shape``: inputs (Arg, dtype, strides), nodes
    (NodeSpec over refs), outputs (ref, Arg, dtype, strides); :meth:`step` makes its Step."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.inputs, self.nodes, self.outputs = [], [], []

    def add_input(self, arg, dtype, strides):
        self.inputs.append((arg, dtype, tuple(strides)))
        return len(self.inputs) - 1

    def add_tensor(self, t):
        return self.add_input(Arg.tensor(t), kdtype(t), bcast_strides(t, self.shape))

    def node(self, mode, *operands, **params):
        from ...kernels.pointwise.fused import NodeSpec

        self.nodes.append(NodeSpec.make(int(mode), operands, **params))
        return len(self.nodes) - 1   # a node ref is finalized in :meth:`step` (n_inputs + index)

    def add_output(self, node_index, arg, dtype, strides):
        self.outputs.append((node_index, arg, dtype, tuple(strides)))

    def add_ir_nodes(self, nodes, value_of):
        """Append IR pointwise nodes; ``value_of`` maps uid -> ("in", k) / ("node", j) and is updated
        with each node's output; tensors not in it become inputs. Returns the last node index."""
        j = None
        for n in nodes:
            ports, _ = n.operand_ports()
            ops = []
            for p in ports:
                t = n.inputs[p]
                if t.uid not in value_of:
                    value_of[t.uid] = ("in", self.add_tensor(t))
                ops.append(value_of[t.uid])
            params = {}
            for p in PW_PARAMS:
                v = getattr(n, p, None)
                if v is not None:
                    params[p] = int(v) if p in ("axis", "nan_propagation") else float(v)
            j = self.node(n.mode, *ops, **params)
            for t in n.outputs.values():
                value_of[t.uid] = ("node", j)
        return j

    def spec(self, block=256):
        from ...kernels.pointwise import fused as kpw

        n_in = len(self.inputs)

        def ref(r):
            if isinstance(r, tuple):
                return r[1] if r[0] == "in" else n_in + r[1]
            return r

        nodes = tuple(kpw.NodeSpec(nd.mode, tuple(ref(r) for r in nd.operands), nd.params) for nd in self.nodes)
        ins = tuple(kpw.TensorSpec(dt, st) for _, dt, st in self.inputs)
        outs = tuple(kpw.OutputSpec(n_in + j if not isinstance(j, tuple) else ref(j), dt, st)
                     for j, _, dt, st in self.outputs)
        return kpw.PointwiseSpec(self.shape, ins, nodes, outs, block=block)

    def step(self, name="pointwise", block=256):
        from ...kernels.pointwise import fused as kpw

        spec = self.spec(block)
        meta = kpw.PointwiseKernel(spec, None, None)
        args = [a for a, _, _ in self.inputs] + [a for _, a, _, _ in self.outputs] + [Arg.const(meta.numel)]
        nbytes = sum(e * st.itemsize for e, st in zip(meta.extents, meta.storage))
        return Step(f"{name}:{kpw.cache_key(spec)}", lambda: kpw.build_pointwise(spec).kernel, meta.grid(),
                    spec.block, args, nbytes=nbytes)


def written(sub, t):
    """``t`` when the subgraph must write it (non-virtual, or materialized for another part), else None."""
    if t is None or (t.is_virtual and t.uid not in getattr(sub, "materialize", ())):
        return None
    return t
