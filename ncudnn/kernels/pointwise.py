"""Runtime pointwise fusion: one generated numba.cuda kernel for a whole DAG of pointwise ops.

A :class:`PointwiseSpec` describes the DAG: every tensor has the output ``shape`` (broadcast
operands use stride 0), inputs and outputs carry a dtype and element strides, nodes are
cudnnPointwiseMode_t ops over earlier values. :func:`build_pointwise` writes Python source for one
kernel (each input loaded once per element, each output stored once, all math in float32
registers, or float64 when every I/O tensor is float64), execs it, ``cuda.jit``-s it and caches it
by :func:`cache_key`. :func:`run_pointwise` launches it.

Two code shapes:

* **dense** — every non-scalar tensor has the same strides and they pack densely (any layout, not
  only row-major): a 1-D grid-stride loop over memory order, ``UNROLL`` elements per thread with all
  loads issued before any math or store; the element count is a run-time argument, so one kernel
  serves every size. With ``pack=2`` (all-bf16 tensors) each access moves a 32-bit word holding
  two elements (an odd count or a misaligned buffer falls back to ``pack=1`` at launch).
* **general** — arbitrary strides (broadcast, permuted, padded): adjacent dims that every tensor
  walks contiguously are merged first, then each element's coordinates are decomposed from its flat
  index with compile-time shape/strides (constant divisors).

All-zero-stride inputs (scalars) are loaded once per thread, before the loop.

Refs: operand ``r`` of a node (or the ``ref`` of an output) is input ``r`` when
``r < len(inputs)``, else node ``r - len(inputs)``.
"""
import hashlib
import math
from dataclasses import dataclass, replace

import numpy as np
from numba import cuda

from . import pointwise_ops as po
from .dtypes import compute_type, dtype_name, loader, loader2, storage_dtype, storer, storer2
from .primitives import SIM, launch, sm_count
from ..types import cudnnPointwiseMode_t as PM

__all__ = ["TensorSpec", "NodeSpec", "OutputSpec", "PointwiseSpec", "build_pointwise",
           "run_pointwise", "cache_key", "contiguous_strides", "PointwiseKernel"]


@dataclass(frozen=True)
class TensorSpec:
    """An input: dtype name and element strides (0 where broadcast) over the output shape."""
    dtype: str
    strides: tuple


@dataclass(frozen=True)
class NodeSpec:
    """One op: ``mode`` over ``operands`` (refs), ``params`` as a sorted tuple of (name, value)."""
    mode: int
    operands: tuple
    params: tuple = ()

    @staticmethod
    def make(mode, operands, **params):
        return NodeSpec(int(mode), tuple(operands), tuple(sorted(params.items())))


@dataclass(frozen=True)
class OutputSpec:
    """An output: which value (ref), its dtype and element strides. ``saturate`` for fp8 stores."""
    ref: int
    dtype: str
    strides: tuple
    saturate: bool = False


@dataclass(frozen=True)
class PointwiseSpec:
    shape: tuple
    inputs: tuple
    nodes: tuple
    outputs: tuple
    block: int = 256
    unroll: int = 0         # elements per thread per pass; 0: 8 for <= 2-byte I/O, else 4
    pack: int = 1           # 2: dense bf16 tensors moved as 32-bit words (two elements per access)

    def __post_init__(self):
        if not self.unroll:
            small = all(storage_dtype(t.dtype).itemsize <= 2 for t in self.inputs + self.outputs)
            object.__setattr__(self, "unroll", 8 if small else 4)
        _validate(self)


def contiguous_strides(shape):
    """Row-major element strides of ``shape``."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= int(n)
    return tuple(reversed(strides))


def _validate(spec):
    nd = len(spec.shape)
    n_in = len(spec.inputs)
    for t in spec.inputs + spec.outputs:
        if len(t.strides) != nd:
            raise ValueError(f"strides {t.strides} do not match rank {nd}")
        dtype_name(t.dtype)
    for j, node in enumerate(spec.nodes):
        if PM(node.mode) not in po.SUPPORTED_MODES:
            raise ValueError(f"node {j}: unsupported mode {node.mode}")
        if len(node.operands) != po.arity(node.mode):
            raise ValueError(f"node {j}: {PM(node.mode).name} takes {po.arity(node.mode)} operands")
        for r in node.operands:
            if not 0 <= r < n_in + j:
                raise ValueError(f"node {j}: operand ref {r} is not an input or an earlier node")
    if not spec.outputs:
        raise ValueError("a pointwise kernel needs at least one output")
    for o in spec.outputs:
        if not 0 <= o.ref < n_in + len(spec.nodes):
            raise ValueError(f"output ref {o.ref} out of range")
    if spec.block % 32 or not 32 <= spec.block <= 1024 or spec.unroll < 1:
        raise ValueError("block must be a multiple of 32 in [32, 1024], unroll >= 1")
    if spec.pack not in (1, 2):
        raise ValueError("pack must be 1 or 2")
    if spec.pack == 2 and not packable(spec):
        raise ValueError("pack=2 needs the dense path with every non-scalar tensor bfloat16")


def packable(spec):
    """True when ``spec`` can use ``pack=2`` (dense, every non-scalar tensor bfloat16)."""
    from .dtypes import PACKABLE
    tensors = [t for t in spec.inputs if not _is_scalar(t)] + list(spec.outputs)
    return _is_dense(spec) and all(dtype_name(t.dtype) in PACKABLE for t in tensors) and \
        not any(o.saturate for o in spec.outputs)


def cache_key(spec):
    """A stable string naming the generated kernel (for the in-memory and a later on-disk cache)."""
    if _is_dense(spec):   # the dense kernel depends on neither shape nor strides
        layout = ("dense", tuple((t.dtype, _is_scalar(t)) for t in spec.inputs),
                  tuple((o.ref, o.dtype, o.saturate) for o in spec.outputs))
    else:
        layout = (spec.shape, spec.inputs, spec.outputs)
    text = repr((layout, spec.nodes, spec.block, spec.unroll, spec.pack, "sim" if SIM else "gpu", 1))
    return hashlib.sha1(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# layout analysis

def _is_scalar(t):
    return all(s == 0 for s in t.strides)


def _packed(shape, strides):
    dims = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: strides[d])
    expect = 1
    for d in dims:
        if strides[d] != expect:
            return False
        expect *= shape[d]
    return True


def _gen_index_axes(spec):
    return {po.gen_index_axis(dict(n.params), len(spec.shape))
            for n in spec.nodes if n.mode == PM.CUDNN_POINTWISE_GEN_INDEX}


def _is_dense(spec):
    if _gen_index_axes(spec):
        return False
    tensors = [t for t in spec.inputs if not _is_scalar(t)] + list(spec.outputs)
    strides = {tuple(s for s, n in zip(t.strides, spec.shape) if n != 1) for t in tensors}
    return len(strides) == 1 and _packed(spec.shape, tensors[0].strides)


def _collapse(spec):
    """(shape, per-tensor strides, {orig axis: new axis or None}) with mergeable dims merged."""
    keep = _gen_index_axes(spec)
    tensors = list(spec.inputs) + list(spec.outputs)
    dims = [d for d in range(len(spec.shape)) if spec.shape[d] != 1 or d in keep]
    shape = [spec.shape[d] for d in dims]
    strides = [[t.strides[d] for d in dims] for t in tensors]
    origin = [[d] for d in dims]
    i = len(shape) - 2
    while i >= 0:
        mergeable = (not (set(origin[i]) | set(origin[i + 1])) & keep and
                     all(s[i] == s[i + 1] * shape[i + 1] for s in strides))
        if mergeable:
            shape[i] *= shape.pop(i + 1)
            for s in strides:
                s[i] = s.pop(i + 1)
            origin[i] += origin.pop(i + 1)
        i -= 1
    axis_map = {d: k for k, ds in enumerate(origin) for d in ds}
    return tuple(shape), [tuple(s) for s in strides], axis_map


# --------------------------------------------------------------------------------------------
# source generation

def _node_exprs(spec, ctype, regs, suffix, coord_names):
    """Lines computing every node for one element; ``regs`` maps ref -> (register name, kind)."""
    lines = []
    n_in = len(spec.inputs)
    for j, node in enumerate(spec.nodes):
        mode = PM(node.mode)
        params = dict(node.params)
        if mode == PM.CUDNN_POINTWISE_GEN_INDEX:
            axis = po.gen_index_axis(params, len(spec.shape))
            args = [coord_names.get(axis, "0")]
        else:
            args = []
            for r, want in zip(node.operands, po.operand_kinds(mode)):
                name, kind = regs[r]
                args.append(f"{ctype}({name})" if want == "float" and kind != "float" else name)
        name = f"t{j}{suffix}"
        lines.append(f"{name} = {po.expr(mode, args, params, ctype)}")
        regs[n_in + j] = (name, po.result_kind(mode))
    return lines


def _element(spec, ctype, suffix, offsets, coord_names, scalar_regs):
    """(load lines, compute lines, store lines) for one element."""
    loads, regs = [], dict(scalar_regs)
    for k, t in enumerate(spec.inputs):
        if k in scalar_regs:
            continue
        loads.append(f"x{k}{suffix} = ld{k}(a{k}, {offsets[k]})")
        regs[k] = (f"x{k}{suffix}", "float")
    compute = _node_exprs(spec, ctype, regs, suffix, coord_names)
    stores = []
    for m, o in enumerate(spec.outputs):
        stores.append(f"st{m}(o{m}, {offsets[len(spec.inputs) + m]}, {regs[o.ref][0]})")
    return loads, compute, stores


def _element_packed(spec, ctype, suffix, word, scalar_regs):
    """(load, compute, store) lines for the element pair held by 32-bit word ``word``."""
    loads, comp, halves = [], [], []
    for half in ("a", "b"):
        regs = dict(scalar_regs)
        for k in range(len(spec.inputs)):
            if k not in scalar_regs:
                regs[k] = (f"x{k}{suffix}{half}", "float")
        comp += _node_exprs(spec, ctype, regs, f"{suffix}{half}", {})
        halves.append(regs)
    for k in range(len(spec.inputs)):
        if k not in scalar_regs:
            loads.append(f"x{k}{suffix}a, x{k}{suffix}b = ld{k}(a{k}, {word})")
    stores = [f"st{m}(o{m}, {word}, {halves[0][o.ref][0]}, {halves[1][o.ref][0]})"
              for m, o in enumerate(spec.outputs)]
    return loads, comp, stores


def _indent(lines, n):
    return [" " * n + ln for ln in lines]


def _offset_expr(strides, coords):
    terms = []
    for s, c in zip(strides, coords):
        if s == 0:
            continue
        terms.append(c if s == 1 else f"{c} * {s}")
    return " + ".join(terms) if terms else "0"


def _decompose(shape, suffix, flat):
    """Lines turning flat row-major index ``flat`` into coordinates c{d}{suffix}."""
    nd = len(shape)
    if nd == 0:
        return [], []
    lines, names = [f"r{suffix} = {flat}"], [f"c{d}{suffix}" for d in range(nd)]
    for d in range(nd - 1, 0, -1):
        lines.append(f"c{d}{suffix} = r{suffix} % {shape[d]}")
        lines.append(f"r{suffix} = r{suffix} // {shape[d]}")
    lines.append(f"c0{suffix} = r{suffix}")
    return lines, names


def generate_source(spec):
    """Python source of the kernel for ``spec`` (function name ``kernel``)."""
    ctype = compute_type([t.dtype for t in spec.inputs + spec.outputs])
    n_in, n_out = len(spec.inputs), len(spec.outputs)
    dense = _is_dense(spec)
    block, unroll = spec.block, spec.unroll
    args = [f"a{k}" for k in range(n_in)] + [f"o{m}" for m in range(n_out)] + ["n"]
    body = []
    scalar_regs = {}
    for k, t in enumerate(spec.inputs):
        if _is_scalar(t):
            body.append(f"x{k} = ld{k}(a{k}, 0)")
            scalar_regs[k] = (f"x{k}", "float")
    chunk = block * unroll
    body += [f"base = cuda.blockIdx.x * {chunk} + cuda.threadIdx.x",
             f"step = cuda.gridDim.x * {chunk}",
             "while base < n:"]
    if spec.pack == 2:   # n counts 32-bit words (element pairs)
        per = []
        for u in range(unroll):
            e = f"base + {u * block}" if u else "base"
            per.append(([f"e{u} = {e}"], _element_packed(spec, ctype, f"_{u}", f"e{u}",
                                                         scalar_regs)))
    elif dense:
        per = []
        for u in range(unroll):
            e = f"base + {u * block}" if u else "base"
            per.append(([f"e{u} = {e}"], _element(spec, ctype, f"_{u}", [f"e{u}"] * (n_in + n_out),
                                                  {}, scalar_regs)))
    else:
        shape, strides, axis_map = _collapse(spec)
        per = []
        for u in range(unroll):
            e = f"base + {u * block}" if u else "base"
            dec, coords = _decompose(shape, f"_{u}", f"e{u}")
            offsets = [_offset_expr(s, coords) for s in strides]
            coord_names = {d: coords[k] for d, k in axis_map.items()}
            per.append(([f"e{u} = {e}"] + dec,
                        _element(spec, ctype, f"_{u}", offsets, coord_names, scalar_regs)))
    # full chunk: every load, then every op, then every store (memory-level parallelism)
    body.append(f"    if base + {(unroll - 1) * block} < n:")
    full = []
    for idx, _ in per:
        full += idx
    for _, (ld, _c, _s) in per:
        full += ld
    for _, (_l, comp, _s) in per:
        full += comp
    for _, (_l, _c, st) in per:
        full += st
    body += _indent(full, 8)
    body.append("    else:")
    for idx, (ld, comp, st) in per:
        body += _indent(idx[:1], 8)
        body.append(f"        if {idx[0].split(' = ')[0]} < n:")
        body += _indent(idx[1:] + ld + comp + st, 12)
    body.append("    base += step")
    return "def kernel(" + ", ".join(args) + "):\n" + "\n".join(_indent(body, 4)) + "\n"


# --------------------------------------------------------------------------------------------
# build / cache / launch

class PointwiseKernel:
    """A compiled fused pointwise kernel: ``spec``, ``source``, ``kernel`` and :meth:`launch`."""

    def __init__(self, spec, source, kernel):
        self.spec, self.source, self.kernel = spec, source, kernel
        self.dense = _is_dense(spec)
        self.numel = int(np.prod(spec.shape, dtype=np.int64))
        tensors = list(spec.inputs) + list(spec.outputs)
        self.extents = [1 + sum((n - 1) * s for n, s in zip(spec.shape, t.strides))
                        if self.numel else 0 for t in tensors]
        self.storage = [storage_dtype(t.dtype) for t in tensors]

    def grid(self):
        chunk = self.spec.block * self.spec.unroll * self.spec.pack
        return max(1, min(math.ceil(self.numel / chunk), _max_blocks(self.spec.block)))

    def launch(self, *arrays, stream=0):
        n_t = len(self.spec.inputs) + len(self.spec.outputs)
        if len(arrays) != n_t:
            raise ValueError(f"kernel takes {n_t} arrays (inputs then outputs), got {len(arrays)}")
        flat = []
        for k, (a, ext, st) in enumerate(zip(arrays, self.extents, self.storage)):
            if a.dtype != st:
                raise TypeError(f"array {k}: dtype {a.dtype}, kernel expects {st}")
            if a.size < ext:
                raise ValueError(f"array {k}: {a.size} elements, strides reach {ext}")
            flat.append(a.reshape(a.size) if a.ndim != 1 else a)
        if self.numel == 0:
            return
        if self.spec.pack == 2:
            if self.numel % 2 or not all(_aligned(a, 4) for a in flat):
                build_pointwise(replace(self.spec, pack=1)).launch(*arrays, stream=stream)
                return
            flat = [a if k < len(self.spec.inputs) and _is_scalar(self.spec.inputs[k])
                    else a.view(np.uint32) for k, a in enumerate(flat)]
            launch(self.kernel, self.grid(), self.spec.block, stream, *flat, self.numel // 2)
            return
        launch(self.kernel, self.grid(), self.spec.block, stream, *flat, self.numel)


_CACHE = {}


def _aligned(a, nbytes):
    ptr = getattr(getattr(a, "device_ctypes_pointer", None), "value", None)
    return ptr is None or ptr % nbytes == 0


def _max_blocks(block):
    if SIM:
        return 4
    return sm_count() * max(1, 2048 // block) * 4


def build_pointwise(spec):
    """The :class:`PointwiseKernel` for ``spec`` (generated, exec-ed and jitted once per key)."""
    key = cache_key(spec)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit if hit.spec == spec else PointwiseKernel(spec, hit.source, hit.kernel)
    source = generate_source(spec)
    ctype = compute_type([t.dtype for t in spec.inputs + spec.outputs])
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda)
    wide = spec.pack == 2
    for k, t in enumerate(spec.inputs):
        ns[f"ld{k}"] = loader2(t.dtype, ctype) if wide and not _is_scalar(t) else \
            loader(t.dtype, ctype)
    for m, o in enumerate(spec.outputs):
        ns[f"st{m}"] = storer2(o.dtype) if wide else storer(o.dtype, o.saturate)
    exec(compile(source, f"<pointwise {key[:12]}>", "exec"), ns)
    pk = PointwiseKernel(spec, source, cuda.jit(ns["kernel"]))
    _CACHE[key] = pk
    return pk


def run_pointwise(kernel_spec, *arrays, stream=0):
    """Run the fused kernel for ``kernel_spec`` on numba device arrays (inputs, then outputs).

    Each array is C-contiguous storage (see :func:`ncudnn.kernels.dtypes.storage_dtype`) whose
    flat element ``sum(coord[d] * strides[d])`` is the tensor element at ``coord``; broadcast
    inputs may be smaller (only the elements their strides reach). Asynchronous on ``stream``.
    """
    build_pointwise(kernel_spec).launch(*arrays, stream=stream)


def kernel_signature(spec):
    """The numba signature the launcher's arrays give the kernel of ``spec``."""
    from .dtypes import array_sig
    arrays = [array_sig(t.dtype) for t in spec.inputs + spec.outputs]
    if spec.pack == 2:
        arrays = [a if k < len(spec.inputs) and _is_scalar(spec.inputs[k]) else "uint32[::1]"
                  for k, a in enumerate(arrays)]
    return "void(" + ", ".join(arrays + ["int64"]) + ")"


def _register_compile_cases():
    try:
        from .compile_check import register_compile_case
    except ImportError:
        return
    nchw = (32, 64, 56, 56)
    cs_ = contiguous_strides(nchw)
    cases = {
        "pointwise_dense_bf16_add_relu_scale": PointwiseSpec(
            nchw, (TensorSpec("bfloat16", cs_), TensorSpec("bfloat16", cs_),
                   TensorSpec("float32", (0, 0, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (3,)),
             NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (4, 2))),
            (OutputSpec(5, "bfloat16", cs_),)),
        "pointwise_nchw_bias_gelu_fp16": PointwiseSpec(
            nchw, (TensorSpec("float16", cs_), TensorSpec("float32", (0, 1, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_GELU_FWD, (2,))),
            (OutputSpec(3, "float16", cs_),)),
        "pointwise_dense_f64_swish_bwd": PointwiseSpec(
            (1 << 20,), (TensorSpec("float64", (1,)), TensorSpec("float64", (1,))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_SWISH_BWD, (0, 1)),),
            (OutputSpec(2, "float64", (1,)),)),
        "pointwise_packed_bf16_add_relu_scale": PointwiseSpec(
            nchw, (TensorSpec("bfloat16", cs_), TensorSpec("bfloat16", cs_),
                   TensorSpec("float32", (0, 0, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (3,)),
             NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (4, 2))),
            (OutputSpec(5, "bfloat16", cs_),), pack=2),
        "pointwise_dense_fp8_cast": PointwiseSpec(
            (1 << 20,), (TensorSpec("float32", (1,)),),
            (NodeSpec.make(PM.CUDNN_POINTWISE_IDENTITY, (0,)),),
            (OutputSpec(1, "float8_e4m3fn", (1,), saturate=True),)),
    }
    for name, spec in cases.items():
        register_compile_case(name, build_pointwise(spec).kernel, kernel_signature(spec),
                              max_registers=64, max_local_bytes=0)


_register_compile_cases()
