"""``slice`` and ``transpose`` of pygraph.

The IR has no slice / transpose node yet, so a slice or transpose of a graph *input* is lowered as an
IDENTITY pointwise node (a real copy kernel) reading a hidden *view* tensor: the input's memory seen
with the sliced / permuted dims and strides (and an element offset for slices). At execute the view is
bound to the input's buffer (offset applied). A slice or transpose of an intermediate (virtual) tensor
is refused with NOT_SUPPORTED until the IR has nodes for them.

* ``transpose(input, permutation) -> Y``: Y dims are ``[input.dim[p] for p in permutation]``;
* ``slice(input, slices) -> Y``: ``slices`` is one Python ``slice`` per dim (steps >= 1).
Y is packed row-major unless its strides are set; its data type is the input's.
"""
from ..ir.tensor import packed_strides
from ..types import cudnnPointwiseMode_t, cudnnStatus_t
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


def _slice_geometry(rec, d):
    sls = list(rec.params.get("slices") or [])
    if len(sls) > d.ndim:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' (slice): {len(sls)} slices for "
                          f"{d.ndim} dims")
    sls += [slice(None)] * (d.ndim - len(sls))
    dims, strides, offset = [], [], 0
    for i, (sl, n, st) in enumerate(zip(sls, d.dims, d.strides)):
        if not isinstance(sl, slice):
            sl = slice(*sl) if isinstance(sl, (list, tuple)) else slice(int(sl), int(sl) + 1)
        start, stop, step = sl.indices(int(n))
        if step < 1:
            raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{rec.name}' (slice): dim {i}: step {step} "
                              "(only positive steps)")
        size = len(range(start, stop, step))
        if size < 1:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"node '{rec.name}' (slice): dim {i}: {sl} is empty")
        dims.append(size)
        strides.append(st * step)
        offset += start * st
    return dims, strides, offset


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
    transpose = op_method("transpose", ("input",), ("permutation",), ("OUT_0",), _lower_view(_transpose_geometry),
                          required=("input", "permutation"),
                          doc="transpose(input, permutation) -> Y (of a graph input; see the module docstring)")
    slice = op_method("slice", ("input",), ("slices",), ("OUT_0",), _lower_view(_slice_geometry),
                      required=("input", "slices"),
                      doc="slice(input, slices) -> Y (of a graph input; see the module docstring)")
