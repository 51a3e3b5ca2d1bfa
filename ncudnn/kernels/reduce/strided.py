"""Deterministic strided reductions: cudnnReduceTensorOp_t over any set of axes, and GENSTATS.

The core is :class:`ReduceSpec`: one or more input tensors of a common ``shape`` (any strides,
0 for broadcast), an ``out_shape`` (keepdims: extent 1 on reduced axes, or a divisor for cuDNN's
grouped axes), and *terms*: each term is an elementwise pre-expression over the input registers
``v0, v1, ...`` (numba source text, f32 or f64) plus a combine (``sum``, ``prod``, ``max``, ``min``)
and a finalize expression over ``acc`` and the element count ``cnt``. Several terms share one read
of the inputs (GENSTATS = sum x and sum x*x in one pass; batch-norm backward = sum dy, sum dy*x).

Generated kernels (one per spec, cached; compile-time shapes and strides):

* **row** (the innermost memory axis is reduced, at least ``ROW_MIN_REDUCED`` elements per output,
  or a full reduction): one block per output element (grid.x), threads
  stride over the reduced elements with ``UNROLL`` loads in flight, then warp-shuffle + shared
  memory block combine in a fixed order;
* **column** (otherwise: the innermost memory axis is kept, or few elements per output): a
  32 x ``BY`` block, x over 32 consecutive outputs (coalesced when the innermost axis is kept),
  y over slices of the reduced elements, then a fixed-order combine over y.

* **vector row** (``vec`` != 1 and the reduced elements of each output are one contiguous run, e.g.
  the rows of a row-major tensor or a whole tensor): 16-byte vector loads, a warp per row (``rows``
  rows a block) or a block per row, ``unroll`` vectors in flight per thread; a split grid has
  ``ctas`` blocks per SM (one wave), each over a contiguous chunk.

When there are too few outputs to fill the GPU, the reduced range is split over ``grid.y`` blocks:
each writes its partial accumulators to a float32/float64 workspace, and a second kernel combines
the partials in split order (few outputs: a block per output, its threads over the partials, then
a fixed butterfly). No atomics anywhere: results are bitwise reproducible run to run.

Entry points: :func:`reduce_tensor` (cuDNN ops), :func:`genstats`, and the generic
:func:`build_reduce` / :func:`run_reduce`. The spec, its layout and launch-shape choices: spec.py; the
kernel source: codegen.py.
"""
import hashlib
import math

import numpy as np
from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, dtype_name, loader, placeholder, storage_dtype, storer
from ..pointwise.vector_io import to_compute, vector_load
from ..primitives.warp import SIM, launch, shfl_xor
from ...types import cudnnReduceTensorOp_t as RO
from .codegen import bcombine_source, col_source, combine_source, row_source, vrow_source
from .spec import (BLOCK_COMBINE_MAX_OUT, ReduceSpec, Term, bcombine_threads, choose, choose_vec, layout, numel,
                   vec_width)

__all__ = ["ReduceSpec", "Term", "build_reduce", "run_reduce", "reduce_spec", "reduce_tensor",
           "genstats_spec", "genstats", "workspace_elems", "vec_width"]


# --------------------------------------------------------------------------------------------
# build / launch

class ReduceKernel:
    """Compiled reduction: ``main`` (+ ``combine`` when split > 1), sources and launch shape.

    ``vec`` > 1: the vector row kernel (16-byte loads); its buffers must be aligned to one vector
    (:meth:`aligned`), else :meth:`launch` runs the ``vec=1`` twin."""

    def __init__(self, spec):
        self.spec = spec
        kept, red = layout(spec)
        self.n_out, self.n_red = numel(kept), numel(red)
        self.ctype = spec.acc or compute_type([d for d, _ in spec.inputs] + [d for d, _ in spec.outputs])
        self.vec = vec_width(spec, kept, red) if spec.vec != 1 else 1
        if spec.vec > 1:
            self.vec = min(self.vec, spec.vec)
        self.rows = 1
        if self.vec > 1:
            self.row = True
            self.block, self.rows, self.split, self.unroll = choose_vec(spec, kept, red, self.vec)
            self.source = vrow_source(spec, kept, red, self.vec, self.block, self.rows, self.split,
                                       self.unroll, self.ctype)
            self.grid, self.threads = (math.ceil(self.n_out / self.rows), self.split), self.block
        else:
            self.row, self.block, self.split = choose(spec)
            self.unroll = 4 if SIM or not self.row else 8
            if self.row:
                self.source = row_source(spec, kept, red, self.block, self.split, self.ctype,
                                          unroll=self.unroll)
                self.grid, self.threads = (self.n_out, self.split), self.block
            else:
                self.source = col_source(spec, kept, red, self.block, self.split, self.ctype)
                self.grid, self.threads = (math.ceil(self.n_out / 32), self.split), (32, self.block)
        ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, shfl_xor=shfl_xor, min=min)
        for i, (dt, _) in enumerate(spec.inputs):
            ns[f"ld{i}"] = loader(dt, self.ctype)
            if self.vec > 1:
                ns[f"ldv{i}"] = vector_load(self.vec)
                ns[f"cin{i}"] = to_compute(dtype_name(dt), self.ctype)
        for j, (dt, _) in enumerate(spec.outputs):
            ns[f"st{j}"] = storer(dt)
        key = hashlib.sha1(repr(spec).encode()).hexdigest()[:12]
        exec(compile(self.source, f"<reduce {key}>", "exec"), ns)
        self.main = cuda.jit(ns["kernel"])
        self.combine = None
        if self.split > 1:
            if self.n_out <= BLOCK_COMBINE_MAX_OUT:
                self.combine_source = bcombine_source(spec, kept, self.split, self.ctype)
                self.combine_grid, self.combine_threads = self.n_out, bcombine_threads(self.split)
            else:
                self.combine_source = combine_source(spec, kept, self.split, self.ctype)
                self.combine_grid, self.combine_threads = math.ceil(self.n_out / 128), 128
            exec(compile(self.combine_source, f"<reduce-combine {key}>", "exec"), ns)
            self.combine = cuda.jit(ns["combine"])

    def workspace_elems(self):
        return len(self.spec.terms) * self.split * self.n_out if self.split > 1 else 0

    def aligned(self, pointers):
        """True when input buffers at ``pointers`` (None: unknown) suit this kernel's vectors."""
        if self.vec == 1:
            return True
        return all(p is None or p % (self.vec * storage_dtype(dt).itemsize) == 0
                   for p, (dt, _) in zip(pointers, self.spec.inputs))

    def scalar_twin(self):
        """The same reduction with element loads (for misaligned buffers); same split."""
        from dataclasses import replace
        return build_reduce(replace(self.spec, vec=1, split=self.split))

    def launch(self, inputs, outputs, workspace=None, stream=0):
        flat_in = [a.reshape(a.size) for a in inputs]
        flat_out = [a.reshape(a.size) for a in outputs]
        if not self.aligned([getattr(getattr(a, "device_ctypes_pointer", None), "value", None)
                             for a in flat_in]):
            return self.scalar_twin().launch(inputs, outputs, workspace, stream)
        need = self.workspace_elems()
        if need:
            if workspace is None:
                workspace = cuda.device_array(need, dtype=np.dtype(self.ctype), stream=stream)
            elif workspace.size < need or workspace.dtype != np.dtype(self.ctype):
                raise ValueError(f"workspace needs {need} {self.ctype} elements")
            ws = workspace.reshape(workspace.size)
        else:
            ws = placeholder(self.ctype) if workspace is None else workspace.reshape(workspace.size)
        launch(self.main, self.grid, self.threads, stream, *flat_in, *flat_out, ws)
        if self.combine is not None:
            launch(self.combine, self.combine_grid, self.combine_threads, stream, ws, *flat_out)


_CACHE = {}


def build_reduce(spec):
    """The cached :class:`ReduceKernel` for ``spec``."""
    k = _CACHE.get(spec)
    if k is None:
        k = _CACHE[spec] = ReduceKernel(spec)
    return k


def workspace_elems(spec):
    """Workspace (elements of the compute type) :func:`run_reduce` needs for ``spec``."""
    return build_reduce(spec).workspace_elems()


def run_reduce(spec, inputs, outputs, workspace=None, stream=0):
    """Run ``spec`` on numba device arrays (storage dtypes, flat layout given by the spec strides).

    ``workspace`` (optional): a device array of at least :func:`workspace_elems` compute-type
    elements; allocated when omitted. Asynchronous on ``stream``.
    """
    build_reduce(spec).launch(inputs, outputs, workspace, stream)


# --------------------------------------------------------------------------------------------
# cuDNN ops

_OP_TERMS = {
    RO.CUDNN_REDUCE_TENSOR_ADD: Term("v0", "sum"),
    RO.CUDNN_REDUCE_TENSOR_MUL: Term("v0", "prod"),
    RO.CUDNN_REDUCE_TENSOR_MIN: Term("v0", "min"),
    RO.CUDNN_REDUCE_TENSOR_MAX: Term("v0", "max"),
    RO.CUDNN_REDUCE_TENSOR_AMAX: Term("abs(v0)", "max", init=0.0),
    RO.CUDNN_REDUCE_TENSOR_AVG: Term("v0", "sum", "acc / cnt"),
    RO.CUDNN_REDUCE_TENSOR_NORM1: Term("abs(v0)", "sum"),
    RO.CUDNN_REDUCE_TENSOR_NORM2: Term("v0 * v0", "sum", "math.sqrt(acc)"),
    RO.CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS: Term("(v0 if v0 != 0 else ONE)", "prod"),
}


def reduce_spec(mode, shape, x_dtype, x_strides, out_shape, out_dtype, out_strides, block=0,
                split=0, vec=1, rows=0, unroll=0, ctas=0):
    """The :class:`ReduceSpec` of cuDNN reduction ``mode`` (cudnnReduceTensorOp_t); ``vec`` ...
    ``ctas``: the vector row kernel's knobs (see :class:`ReduceSpec`)."""
    term = _OP_TERMS[RO(mode)]
    ctype = compute_type([x_dtype, out_dtype])
    if "ONE" in term.pre:
        term = Term(term.pre.replace("ONE", po.lit(1.0, ctype)), term.combine, term.final,
                    term.init)
    return ReduceSpec(tuple(shape), ((x_dtype, tuple(x_strides)),), tuple(out_shape), (term,),
                      ((out_dtype, tuple(out_strides)),), block, split, vec, rows, unroll, ctas)


def reduce_tensor(mode, x, y, shape, x_dtype, x_strides, out_shape, out_dtype, out_strides,
                  workspace=None, stream=0, block=0, split=0, **knobs):
    """y = reduction ``mode`` of x over the axes where ``out_shape`` is 1 (or a group divisor).

    x, y: numba device arrays in storage dtype, flat layout by their strides (elements).
    Accumulates in float32 (float64 for all-fp64 I/O); NaN propagates; deterministic.
    """
    spec = reduce_spec(mode, shape, x_dtype, x_strides, out_shape, out_dtype, out_strides,
                       block, split, **knobs)
    run_reduce(spec, [x], [y], workspace, stream)


def genstats_spec(shape, x_dtype, x_strides, channel_axis=1, out_dtype="float32", block=0,
                  split=0):
    """GENSTATS (SUM_SQSUM): per-channel sum and sum of squares, outputs [1, C, 1, ...] dense."""
    ca = channel_axis % len(shape)
    out_shape = tuple(n if d == ca else 1 for d, n in enumerate(shape))
    out_strides = tuple(1 if d == ca else 0 for d in range(len(shape)))
    return ReduceSpec(tuple(shape), ((x_dtype, tuple(x_strides)),), out_shape,
                      (Term("v0", "sum"), Term("v0 * v0", "sum")),
                      ((out_dtype, out_strides), (out_dtype, out_strides)), block, split)


def genstats(x, sum_out, sqsum_out, shape, x_dtype, x_strides, channel_axis=1,
             out_dtype="float32", workspace=None, stream=0, block=0, split=0):
    """One pass over x (NCHW, NHWC, any strides): per-channel sum x and sum x*x (C values each)."""
    spec = genstats_spec(shape, x_dtype, x_strides, channel_axis, out_dtype, block, split)
    run_reduce(spec, [x], [sum_out, sqsum_out], workspace, stream)


def _signatures(k):
    from ..runtime.dtypes import array_sig
    spec = k.spec
    ins = [array_sig(d) for d, _ in spec.inputs]
    outs = [array_sig(d) for d, _ in spec.outputs]
    ws = f"{k.ctype}[::1]"
    return ("void(" + ", ".join(ins + outs + [ws]) + ")",
            "void(" + ", ".join([ws] + outs) + ")")
