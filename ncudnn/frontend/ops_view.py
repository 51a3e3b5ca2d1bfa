"""``slice`` and ``transpose`` of pygraph.

A slice or transpose of a graph *input* is lowered as an IDENTITY pointwise node (a real copy kernel,
which can fuse with pointwise consumers) reading a hidden *view* tensor: the input's memory seen with
the sliced / permuted dims and strides (and an element offset for slices). At execute the view is
bound to the input's buffer (offset applied). A slice of an intermediate (virtual or produced) tensor
is the IR :class:`~ncudnn.ir.Slice` node (:class:`FeSlice`: the Python slices are resolved against
the input's dims once they are inferred). A transpose of an intermediate tensor into a graph output that no
other node reads is the IR's LOGICAL :class:`~ncudnn.ir.Reshape` (:class:`FeTranspose`: a strided copy)
into a hidden view of the output, seen with the input's dims and the permuted strides, bound to the output's
buffer at execute; a transpose of an intermediate into a virtual tensor, or one another node reads, is
refused with NOT_SUPPORTED naming the node.

* ``transpose(input, permutation) -> Y``: Y dims are ``[input.dim[p] for p in permutation]``;
* ``slice(input, slices) -> Y``: ``slices`` is one Python ``slice`` per dim (steps >= 1).
Y is packed row-major unless its strides are set; its data type is the input's.
"""
from ..ir import Reshape, Slice
from ..ir.tensor import packed_strides
from ..types import cudnnBackendReshapeMode_t, cudnnPointwiseMode_t, cudnnStatus_t
from .builder import op_method
from .errors import graph_error
from .ops_pointwise import FePointwise
from .tensor import USER_DIMS, USER_DTYPE, USER_STRIDES

S = cudnnStatus_t


def _transpose_geometry(rec, d):
    perm = [int(p) for p in rec.params.get("permutation") or []]
    if sorted(perm) != list(range(d.ndim)):
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' (transpose): permutation {perm} is not "
                          f"a permutation of 0..{d.ndim - 1}")
    return [d.dims[p] for p in perm], [d.strides[p] for p in perm], 0


def _resolve_slices(name, sls, dims):
    """(start, stop, step) per dim of ``dims`` from Python slices (missing trailing dims: whole; an int
    i: i:i+1; negative indices count from the end); BAD_PARAM for too many slices or an empty one,
    NOT_SUPPORTED for a step < 1."""
    sls = list(sls or [])
    if len(sls) > len(dims):
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{name}' (slice): {len(sls)} slices for "
                          f"{len(dims)} dims")
    sls += [slice(None)] * (len(dims) - len(sls))
    out = []
    for i, (sl, n) in enumerate(zip(sls, dims)):
        if not isinstance(sl, slice):
            sl = slice(*sl) if isinstance(sl, (list, tuple)) else slice(int(sl), int(sl) + 1)
        if sl.step is not None and sl.step < 1:
            raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{name}' (slice): dim {i}: step {sl.step} "
                              "(only positive steps)")
        start, stop, step = sl.indices(int(n))
        if len(range(start, stop, step)) < 1:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{name}' (slice): dim {i}: {sl} is empty")
        out.append((start, stop, step))
    return out


def _slice_geometry(rec, d):
    dims, strides, offset = [], [], 0
    for (start, stop, step), st in zip(_resolve_slices(rec.name, rec.params.get("slices"), d.dims), d.strides):
        dims.append(len(range(start, stop, step)))
        strides.append(st * step)
        offset += start * st
    return dims, strides, offset


class FeSlice(Slice):
    """The IR slice node built from pygraph's Python slices, resolved when the input's dims are known."""

    def __init__(self, name, inputs, outputs, compute_dtype, slices):
        super().__init__(name, inputs, outputs, compute_dtype, start_indices=(), limit_indices=())
        self.slices = list(slices or [])

    def pre_validate(self, ctx):
        x = self.inputs.get("X")
        if x is not None and x.dims is not None:
            r = _resolve_slices(self.name, self.slices, x.dims)
            self.start_indices = tuple(a for a, _, _ in r)
            self.limit_indices = tuple(b for _, b, _ in r)
            self.strides = tuple(k for _, _, k in r)
        super().pre_validate(ctx)


def _lower_slice(graph, rec):
    src = rec.tensors["input"]
    produced = {t.get_uid() for r in graph._records for t in r.outputs if t is not None}
    if src.desc.is_virtual or src.get_uid() in produced:
        return FeSlice(rec.name, {"X": src.desc}, {"Y": rec.outputs[0].desc}, graph._compute_dtype(rec),
                       rec.params.get("slices"))
    return _lower_view(_slice_geometry)(graph, rec)


class FeTranspose(Reshape):
    """Y = X with dims permuted, as a LOGICAL reshape X -> ``view`` (X's dims, Y's strides permuted back): the
    output's dims, strides and data type are settled once X's dims are inferred."""

    def __init__(self, name, x, view, out, compute_dtype, perm):
        super().__init__(name, {"X": x}, {"Y": view}, compute_dtype, mode=cudnnBackendReshapeMode_t.CUDNN_RESHAPE_LOGICAL)
        self.perm, self.out = list(perm), out

    def pre_validate(self, ctx):
        x, v, out = self.inputs["X"], self.outputs["Y"], self.out
        if x.dims is not None:
            if sorted(self.perm) != list(range(len(x.dims))):
                self.fail(S.CUDNN_STATUS_BAD_PARAM, "permutation", f"{self.perm} is not a permutation of "
                          f"0..{len(x.dims) - 1}")
            dims = [x.dims[p] for p in self.perm]
            if not out.meta.get(USER_DIMS):
                out.dims = tuple(dims)
            elif list(out.dims) != dims:
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "Y", f"dims {list(out.dims)}, the permuted input "
                          f"has {dims}")
            if not out.meta.get(USER_STRIDES) or out.strides is None:
                out.strides = packed_strides(out.dims)
            if not out.meta.get(USER_DTYPE) and x.dtype is not None:
                out.dtype = x.dtype
            strides = [0] * len(self.perm)
            for k, p in enumerate(self.perm):
                strides[p] = out.strides[k]
            v.dims, v.strides, v.dtype = tuple(x.dims), tuple(strides), out.dtype
        super().pre_validate(ctx)


def _lower_transpose(graph, rec):
    src, out = rec.tensors["input"], rec.outputs[0]
    produced = {t.get_uid() for r in graph._records for t in r.outputs if t is not None}
    if not (src.desc.is_virtual or src.get_uid() in produced):
        return _lower_view(_transpose_geometry)(graph, rec)
    read = any(t is not None and t.get_uid() == out.get_uid() for r in graph._records for t in r.tensors.values()
               if hasattr(t, "get_uid"))
    if out.desc.is_virtual or read:
        raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{rec.name}' (transpose): input '{src.get_name()}' is "
                          f"an intermediate tensor and output '{out.get_name()}' is "
                          f"{'virtual' if out.desc.is_virtual else 'read by another node'}: a transpose between "
                          "intermediate tensors is not supported (mark the output with set_output(True))")
    view = rec.extra.get("view")
    if view is None:
        view = rec.extra["view"] = graph._new_tensor(name=f"{rec.name}::view")
        view.desc.meta["hidden"] = True
    view.desc.meta.update({USER_DIMS: True, USER_STRIDES: True, USER_DTYPE: True})
    graph._views[view] = (out, 0)
    return FeTranspose(rec.name, src.desc, view.desc, out.desc, graph._compute_dtype(rec),
                       rec.params.get("permutation") or [])


def _lower_view(geometry):
    def lower(graph, rec):
        src = rec.tensors["input"]
        d = src.desc
        produced = {t.get_uid() for r in graph._records for t in r.outputs if t is not None}
        if d.is_virtual or src.get_uid() in produced:
            raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{rec.name}' ({rec.kind}): input "
                              f"'{src.get_name()}' is an intermediate tensor; only graph inputs can be "
                              f"{rec.kind}d until the IR has a {rec.kind} node")
        if d.dims is None or d.strides is None:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' ({rec.kind}): input dims/strides not set")
        dims, strides, offset = geometry(rec, d)
        view = rec.extra.get("view")
        if view is None:
            view = rec.extra["view"] = graph._new_tensor(name=f"{rec.name}::view")
            view.desc.meta["hidden"] = True
        v = view.desc
        v.dims, v.strides, v.dtype = tuple(dims), tuple(strides), d.dtype
        v.meta.update({USER_DIMS: True, USER_STRIDES: True, USER_DTYPE: True})
        graph._views[view] = (src, offset)
        out = rec.outputs[0].desc
        if not out.meta.get(USER_DIMS):
            out.dims = tuple(dims)
        if not out.meta.get(USER_STRIDES):
            out.strides = packed_strides(out.dims)
        if not out.meta.get(USER_DTYPE):
            out.dtype = d.dtype
        return FePointwise(rec.name, {"X": v}, {"Y": out}, graph._compute_dtype(rec),
                           mode=cudnnPointwiseMode_t.CUDNN_POINTWISE_IDENTITY)
    return lower


def view_value(value, src, view, offset):
    """The buffer of ``view`` inside ``value``, the buffer given for ``src`` (a DeviceView)."""
    from ..ir import numpy_dtype
    from ..memory import as_view

    dt = numpy_dtype(src.dtype)
    base = as_view(value, dims=src.dims, strides=src.strides, dtype=dt)
    return base.sub(offset * dt.itemsize, shape=view.dims, strides=view.strides)


class ViewOps:
    transpose = op_method("transpose", ("input",), ("permutation",), ("OUT_0",), _lower_transpose,
                          required=("input", "permutation"),
                          doc="transpose(input, permutation) -> Y (see the module docstring)")
    slice = op_method("slice", ("input",), ("slices",), ("OUT_0",), _lower_slice,
                      required=("input", "slices"),
                      doc="slice(input, slices) -> Y (see the module docstring)")
