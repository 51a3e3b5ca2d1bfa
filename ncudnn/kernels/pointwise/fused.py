"""Runtime pointwise fusion: one generated numba.cuda kernel for a whole DAG of pointwise ops.

A :class:`~ncudnn.kernels.pointwise.spec.PointwiseSpec` describes the DAG (spec.py).
:func:`build_pointwise` writes Python source for one kernel (codegen.py: each input loaded once per
element, each output stored once, all math in float32 registers, or float64 when every I/O tensor is
float64), execs it, ``cuda.jit``-s it and caches it by :func:`cache_key`. :func:`run_pointwise` launches it.

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

The spec classes and layout queries are re-exported here, the module callers import the family from.
"""
import math
from dataclasses import replace

import numpy as np
from numba import cuda

from . import ops as po
from .codegen import generate_source
from .spec import (NodeSpec, OutputSpec, PointwiseSpec, TensorSpec, auto_vec, cache_key, contiguous_strides,
                   is_dense, is_scalar, packable, uses_vec_path, vec_unroll, vector_accessed)
from .vector_io import to_compute, to_storage, vector_load, vector_store
from ..runtime.dtypes import compute_type, dtype_name, loader, loader2, storage_dtype, storer, storer2
from ..primitives.warp import SIM, launch, sm_count

__all__ = ["TensorSpec", "NodeSpec", "OutputSpec", "PointwiseSpec", "build_pointwise",
           "run_pointwise", "cache_key", "contiguous_strides", "packable", "generate_source", "PointwiseKernel",
           "auto_vec", "vec_unroll", "uses_vec_path", "kernel_signature"]


def _vec_namespace(spec, ctype):
    """The converters and vector accessors the vector-path source refers to."""
    ns = {}
    for k, t in enumerate(spec.inputs):
        if not is_scalar(t):
            ns[f"cin{k}"] = to_compute(dtype_name(t.dtype), ctype)
            ns[f"ldv{k}"] = vector_load(spec.vec)
    for m, o in enumerate(spec.outputs):
        ns[f"cout{m}"] = to_storage(dtype_name(o.dtype), o.saturate)
        ns[f"stv{m}"] = vector_store(spec.vec)
    return ns


# --------------------------------------------------------------------------------------------
# build / cache / launch

class PointwiseKernel:
    """A compiled fused pointwise kernel: ``spec``, ``source``, ``kernel`` and :meth:`launch`."""

    def __init__(self, spec, source, kernel):
        self.spec, self.source, self.kernel = spec, source, kernel
        self.dense = is_dense(spec)
        self.numel = int(np.prod(spec.shape, dtype=np.int64))
        tensors = list(spec.inputs) + list(spec.outputs)
        self.extents = [1 + sum((n - 1) * s for n, s in zip(spec.shape, t.strides))
                        if self.numel else 0 for t in tensors]
        self.storage = [storage_dtype(t.dtype) for t in tensors]
        self._vector_flags = None

    def grid(self):
        spec = self.spec
        if uses_vec_path(spec):
            chunk = spec.block * vec_unroll(spec) * spec.vec
        else:
            chunk = spec.block * spec.unroll * spec.pack
        return max(1, min(math.ceil(self.numel / chunk), _max_blocks(spec.block, spec.waves)))

    def vec_ok(self, pointers):
        """True when the vector kernel can run on buffers at ``pointers`` (inputs then outputs; None
        for unknown): the element count is a multiple of ``vec`` and every non-scalar buffer is
        aligned to one vector. Always True for ``vec == 1``."""
        v = self.spec.vec
        if v == 1:
            return True
        if self.numel % v:
            return False
        if self._vector_flags is None:
            self._vector_flags = vector_accessed(self.spec)
        return all(not vf or p is None or p % (v * st.itemsize) == 0
                   for p, st, vf in zip(pointers, self.storage, self._vector_flags))

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
        if not self.vec_ok([_pointer(a) for a in flat]):
            build_pointwise(replace(self.spec, vec=1)).launch(*arrays, stream=stream)
            return
        if self.spec.pack == 2:
            if self.numel % 2 or not all(_aligned(a, 4) for a in flat):
                build_pointwise(replace(self.spec, pack=1)).launch(*arrays, stream=stream)
                return
            flat = [a if k < len(self.spec.inputs) and is_scalar(self.spec.inputs[k])
                    else a.view(np.uint32) for k, a in enumerate(flat)]
            launch(self.kernel, self.grid(), self.spec.block, stream, *flat, self.numel // 2)
            return
        launch(self.kernel, self.grid(), self.spec.block, stream, *flat, self.numel)


_CACHE = {}


def _pointer(a):
    return getattr(getattr(a, "device_ctypes_pointer", None), "value", None)


def _aligned(a, nbytes):
    ptr = _pointer(a)
    return ptr is None or ptr % nbytes == 0


def _max_blocks(block, waves=4):
    """Grid cap of the grid-stride loop: ``waves`` times the blocks of ``block`` threads an SM holds
    (by threads) on every SM; ``waves`` 0: no cap."""
    if SIM:
        return 4 if waves else 1 << 30
    if not waves:
        return 1 << 30
    return sm_count() * max(1, 2048 // block) * waves


def build_pointwise(spec):
    """The :class:`PointwiseKernel` for ``spec`` (generated, exec-ed and jitted once per key)."""
    key = cache_key(spec)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit if hit.spec == spec else PointwiseKernel(spec, hit.source, hit.kernel)
    source = generate_source(spec)
    ctype = compute_type([t.dtype for t in spec.inputs + spec.outputs])
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda)
    if uses_vec_path(spec):
        ns.update(_vec_namespace(spec, ctype))
    wide = spec.pack == 2
    for k, t in enumerate(spec.inputs):
        ns[f"ld{k}"] = loader2(t.dtype, ctype) if wide and not is_scalar(t) else \
            loader(t.dtype, ctype)
    for m, o in enumerate(spec.outputs):
        ns[f"st{m}"] = storer2(o.dtype) if wide else storer(o.dtype, o.saturate)
    exec(compile(source, f"<pointwise {key[:12]}>", "exec"), ns)
    if not SIM:   # the simulator's jit takes no launch bounds
        # the block size is a launch bound even with no min_blocks, so the compiler keeps a 1024-thread block
        # within the SM's 64K registers (without it a many-output chain failed to launch at BLOCK_SIZE 1024)
        kernel = cuda.jit(launch_bounds=(spec.block, max(spec.min_blocks, 1)))(ns["kernel"])
    else:
        kernel = cuda.jit(ns["kernel"])
    pk = PointwiseKernel(spec, source, kernel)
    _CACHE[key] = pk
    return pk


def run_pointwise(kernel_spec, *arrays, stream=0):
    """Run the fused kernel for ``kernel_spec`` on numba device arrays (inputs, then outputs).

    Each array is C-contiguous storage (see :func:`ncudnn.kernels.runtime.dtypes.storage_dtype`) whose
    flat element ``sum(coord[d] * strides[d])`` is the tensor element at ``coord``; broadcast
    inputs may be smaller (only the elements their strides reach). Asynchronous on ``stream``.
    """
    build_pointwise(kernel_spec).launch(*arrays, stream=stream)


def kernel_signature(spec):
    """The numba signature the launcher's arrays give the kernel of ``spec``."""
    from ..runtime.dtypes import array_sig
    arrays = [array_sig(t.dtype) for t in spec.inputs + spec.outputs]
    if spec.pack == 2:
        arrays = [a if k < len(spec.inputs) and is_scalar(spec.inputs[k]) else "uint32[::1]"
                  for k, a in enumerate(arrays)]
    return "void(" + ", ".join(arrays + ["int64"]) + ")"
