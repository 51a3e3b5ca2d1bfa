"""The fused pointwise kernel's description (:class:`PointwiseSpec`) and the layout analysis that picks its
code shape: dense (one memory order shared by every tensor), general (per-element coordinates) or the
vector path (``vec`` elements per access).

A :class:`PointwiseSpec` describes a DAG of pointwise ops: every tensor has the output ``shape`` (broadcast
operands use stride 0), inputs and outputs carry a dtype and element strides, nodes are
cudnnPointwiseMode_t ops over earlier values. Refs: operand ``r`` of a node (or the ``ref`` of an output)
is input ``r`` when ``r < len(inputs)``, else node ``r - len(inputs)``.
"""
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from . import ops as po
from ..runtime.dtypes import dtype_name, storage_dtype
from ..primitives.warp import SIM
from ...types import cudnnPointwiseMode_t as PM

__all__ = ["TensorSpec", "NodeSpec", "OutputSpec", "PointwiseSpec", "contiguous_strides", "packable", "cache_key",
           "is_scalar", "is_dense", "gen_index_axes", "collapse", "vec_layout", "auto_vec", "vector_accessed",
           "vec_unroll", "uses_vec_path"]


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
    vec: int = 1            # > 1: elements per vector access on the vector path (see auto_vec)
    waves: int = 4          # grid cap: waves * (2048 // block) blocks an SM; 0: no cap (one trip a thread)
    min_blocks: int = 0     # > 0: launch bounds (block, min_blocks): a register budget of 64K / (block * min_blocks)

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
    if spec.min_blocks < 0 or spec.min_blocks * spec.block > 2048:
        raise ValueError("min_blocks * block must be at most 2048 threads")
    if spec.vec not in (1, 2, 4, 8, 16):
        raise ValueError("vec must be 1, 2, 4, 8 or 16")
    if spec.vec > 1 and spec.vec > auto_vec(spec):
        raise ValueError(f"vec={spec.vec}: the layout allows at most vec={auto_vec(spec)} "
                         "(16-byte accesses, dense outputs, simple broadcasts, no bool tensors)")


def packable(spec):
    """True when ``spec`` can use ``pack=2`` (dense, every non-scalar tensor bfloat16)."""
    from ..runtime.dtypes import PACKABLE
    tensors = [t for t in spec.inputs if not is_scalar(t)] + list(spec.outputs)
    return is_dense(spec) and all(dtype_name(t.dtype) in PACKABLE for t in tensors) and \
        not any(o.saturate for o in spec.outputs)


def cache_key(spec):
    """A stable string naming the generated kernel (for the in-memory and a later on-disk cache)."""
    if is_dense(spec):   # the dense kernel depends on neither shape nor strides
        layout = ("dense", tuple((t.dtype, is_scalar(t)) for t in spec.inputs),
                  tuple((o.ref, o.dtype, o.saturate) for o in spec.outputs))
    else:
        layout = (spec.shape, spec.inputs, spec.outputs)
    text = repr((layout, spec.nodes, spec.block, spec.unroll, spec.pack, spec.vec,
                 "sim" if SIM else "gpu", 2) + ((spec.min_blocks,) if spec.min_blocks else ()))
    return hashlib.sha1(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# layout analysis

def is_scalar(t):
    return all(s == 0 for s in t.strides)


def _packed(shape, strides):
    dims = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: strides[d])
    expect = 1
    for d in dims:
        if strides[d] != expect:
            return False
        expect *= shape[d]
    return True


def gen_index_axes(spec):
    return {po.gen_index_axis(dict(n.params), len(spec.shape))
            for n in spec.nodes if n.mode == PM.CUDNN_POINTWISE_GEN_INDEX}


def is_dense(spec):
    if gen_index_axes(spec):
        return False
    tensors = [t for t in spec.inputs if not is_scalar(t)] + list(spec.outputs)
    strides = {tuple(s for s, n in zip(t.strides, spec.shape) if n != 1) for t in tensors}
    return len(strides) == 1 and _packed(spec.shape, tensors[0].strides)


def collapse(spec):
    """(shape, per-tensor strides, {orig axis: new axis or None}) with mergeable dims merged."""
    keep = gen_index_axes(spec)
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
# vector path: ``vec`` elements per access (16 bytes for the widest tensor), broadcast operands
# addressed per vector without per-element index math
#
# Dims are put in the memory order of output 0 (its strides descending); every output must be
# packed in that order (the same strides), and every non-scalar input either has those strides
# ("full") or is packed over one run of consecutive dims [a, b) with stride 0 elsewhere (a per-
# channel bias in NCHW or NHWC, a row or a column vector): its element for flat output index e is
# ``(e // inner) % mid`` with inner = prod(shape[b:]), mid = prod(shape[a:b]). Per vector of VEC
# consecutive output elements starting at e (a multiple of VEC) such an operand is
#   * "inner" (inner == 1, mid % VEC == 0): VEC consecutive elements at e % mid: one vector load;
#   * "outer" (inner % VEC == 0): one element shared by the whole vector: one scalar load;
#   * otherwise per element ("elem"), VEC scalar loads (correct, slower).
# Divisions are by compile-time constants (shifts / masks for powers of two), once per vector.

def vec_layout(spec):
    """(shape in output-0 memory order, per input None (scalar) or (inner, mid)), or None when
    ``spec`` does not fit the vector path."""
    if spec.pack != 1 or gen_index_axes(spec):
        return None
    tensors = [t for t in spec.inputs if not is_scalar(t)] + list(spec.outputs)
    if any(storage_dtype(t.dtype) == np.bool_ for t in tensors):
        return None
    o0 = spec.outputs[0].strides
    dims = sorted((d for d in range(len(spec.shape)) if spec.shape[d] != 1), key=lambda d: -o0[d])
    shape = [int(spec.shape[d]) for d in dims]
    full = list(contiguous_strides(shape))
    if any([o.strides[d] for d in dims] != full for o in spec.outputs):
        return None
    total = math.prod(shape)
    ops = []
    for t in spec.inputs:
        if is_scalar(t):
            ops.append(None)
            continue
        s = [t.strides[d] for d in dims]
        nz = [i for i, v in enumerate(s) if v]
        if not nz:                      # only size-1 dims carry strides: one element
            ops.append((max(total, 1), 1))
            continue
        a, b = nz[0], nz[-1] + 1
        if nz != list(range(a, b)) or s[a:b] != list(contiguous_strides(shape[a:b])):
            return None
        ops.append((math.prod(shape[b:]), math.prod(shape[a:b])))
    return tuple(shape), ops


def auto_vec(spec):
    """The widest vector (elements per access) the layout of ``spec`` allows: 16 bytes of its
    widest non-scalar tensor (4 for float32, 8 for 16-bit types), or 1 when the layout does not
    fit the vector path. Alignment and ``numel % vec`` are checked at launch."""
    lay = vec_layout(spec)
    if lay is None:
        return 1
    # operands broadcast along the innermost dim (inner > 1) are read one element at a time
    tensors = [t for t, op in zip(spec.inputs, lay[1]) if op is not None and op[0] == 1]
    tensors += list(spec.outputs)
    return max(1, 16 // max(storage_dtype(t.dtype).itemsize for t in tensors))


def vector_accessed(spec):
    """Per tensor (inputs then outputs): True when the vector kernel reads / writes it with vector
    accesses (so its buffer must be aligned to one vector)."""
    lay = vec_layout(spec)
    shape, ops = lay
    total = math.prod(shape)
    flags = []
    for op in ops:
        if op is None:
            flags.append(False)
            continue
        inner, mid = op
        flags.append((inner == 1 and mid == total) or (inner == 1 and mid % spec.vec == 0))
    return flags + [True] * len(spec.outputs)


def vec_unroll(spec):
    """Vectors per thread per loop trip on the vector path (``unroll``, at most 16 // vec)."""
    return max(1, min(spec.unroll, 16 // spec.vec)) if spec.vec > 1 else spec.unroll


def uses_vec_path(spec):
    if spec.pack != 1:
        return False
    if spec.vec > 1:
        return True
    return not is_dense(spec) and vec_layout(spec) is not None
