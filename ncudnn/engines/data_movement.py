"""Engine "data_movement": concat and reshape (which covers transposes: same dims, other strides) as
strided copy kernels (:mod:`ncudnn.kernels.datamove_copy`), with a dtype cast where the output's
dtype differs.

Semantics:
  CONCAT   Y = the inputs X0, X1, ... laid end to end along ``axis``; each input is one copy launch
           into its slab of Y (Y's strides, an element offset). ``in_place_index`` k names an input
           that may already live in Y's memory at its slab: when, at execution, Xk's address is
           that slab's address and its strides are Y's, the copy of Xk is skipped (else it is copied
           like the others).
  RESHAPE  LOGICAL: Y's elements in row-major logical order are X's in row-major logical order, each
           side at its own strides (a transpose when the dims are equal and the strides are not).
           VIEW_ONLY: Y is X's storage seen with Y's dims and strides; its values are those of the
           logical reshape, so it runs the same copy, and nothing at all when Y's address is X's and
           the two layouts put every element at the same offset (a true view).
Both dim lists are merged where row-major contiguous on that side, then split into one common shape
(a dim of one side must divide the other's at each step, else NOT_SUPPORTED_SHAPE). No knobs, no
workspace.
"""
import dataclasses
import math

from ..kernels import datamove_copy as kdm
from ..types import cudnnBackendReshapeMode_t as RM, cudnnStatus_t
from .base import OK, Engine
from .membound_common import Arg, MemPlan, Step, abi_dtype, array_type, extent, kdtype, src_key, steps_time
from .registry import register

S = cudnnStatus_t


def _rowmajor_merge(dims, strides):
    """(dims, strides) with extent-1 dims dropped and row-major-contiguous neighbours merged."""
    out = []
    for d, s in zip(dims, strides):
        if d == 1:
            continue
        if out and out[-1][1] == s * d:
            out[-1] = (out[-1][0] * d, s)
        else:
            out.append((d, s))
    return out or [(1, 1)]


def common_shape(xd, xs, yd, ys):
    """(dims, x strides, y strides) over one shape visiting X and Y in row-major logical order, or
    (None, reason) when a dim of one side does not divide the other's."""
    a, b = _rowmajor_merge(xd, xs), _rowmajor_merge(yd, ys)
    dims, sx, sy = [], [], []
    i = j = 0
    (px, qx), (py, qy) = a[0], b[0]
    while True:
        if px == py:
            dims.append(px)
            sx.append(qx)
            sy.append(qy)
            i, j = i + 1, j + 1
            if i == len(a) or j == len(b):
                break
            (px, qx), (py, qy) = a[i], b[j]
        elif py % px == 0:      # Y's dim splits as (px, py / px)
            dims.append(px)
            sx.append(qx)
            sy.append(qy * (py // px))
            py //= px
            i += 1
            px, qx = a[i]
        elif px % py == 0:
            dims.append(py)
            sx.append(qx * (px // py))
            sy.append(qy)
            px //= py
            j += 1
            py, qy = b[j]
        else:
            return None, f"dims {tuple(xd)} -> {tuple(yd)}: extent {px} and {py} do not divide each other " \
                         f"(after merging contiguous dims)"
    return (tuple(dims), tuple(sx), tuple(sy)), ""


def _layout_ok(node, port, t):
    if kdtype(t) is None:
        return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': {port}: {t.dtype.name} has no kernel type"
    if t.vector_count != 1 or int(t.reordering) != 0 or t.ragged_offset is not None:
        return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, \
            f"node '{node.name}': {port}: vectorized, reordered or ragged tensors are not supported"
    if any(int(s) < 0 for s in t.strides):
        return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"node '{node.name}': {port}: negative strides"
    if t.is_by_value:
        return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': {port}: by-value scalar"
    return OK


class _WordArg(Arg):
    """A tensor passed to the word path re-typed as int64 (same address, 8-byte elements)."""

    def bind(self, views, scratch):
        from ..kernels.launch import ArgView

        v = views[self.t.uid]
        st = abi_dtype(kdtype(self.t))
        words = max(1, extent(self.t.dims, self.t.strides) * st.itemsize // 8)
        w = abi_dtype("int64")
        return ArgView(v.ptr, (words,), (8,), 8, w)


def _tensor_arg(t, word):
    if not word:
        return Arg.tensor(t)
    return _WordArg("tensor", t=t, dtype="int64", nbtype=array_type("int64"))


def _copy_step(x, y, spec, name):
    ck = kdm.build_copy(spec)
    xo, yo = ck.offsets()
    # offsets are launch arguments: pieces differing only in offsets share one compiled kernel
    key = f"data_movement:{name}:" + src_key(dataclasses.replace(ck.spec, x_offset=0, y_offset=0), ck.source, ck.word)
    nbytes = math.prod(spec.dims) * (x.itemsize + y.itemsize)
    return Step(key, lambda: ck.kernel, ck.grid, ck.block,
                [_tensor_arg(x, ck.word), _tensor_arg(y, ck.word), Arg.const(xo), Arg.const(yo)], nbytes=nbytes)


@register
class DataMovementEngine(Engine):
    name = "data_movement"
    kinds = ("concat", "reshape")
    fallback = True

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if len(sub.nodes) != 1:
            return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{self.name}: one concat / reshape node per subgraph"
        node = sub.nodes[0]
        for port, t in list(node.inputs.items()) + list(node.outputs.items()):
            st, why = _layout_ok(node, port, t)
            if st != S.CUDNN_STATUS_SUCCESS:
                return st, f"{self.name}: {why}"
        if node.OP == "reshape":
            x, y = node.inputs["X"], node.outputs["Y"]
            shape, why = common_shape(x.dims, x.strides, y.dims, y.strides)
            if shape is None:
                return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{self.name}: node '{node.name}': {why}"
        return OK

    def candidates_key(self, sub):
        return ()

    def _plan(self, sub):
        """(steps, skips): skips are (step index, x uid, y uid, y byte offset, x strides == y's)."""
        node = sub.nodes[0]
        y = node.outputs["Y"]
        if node.OP == "reshape":
            x = node.inputs["X"]
            (dims, sx, sy), _ = common_shape(x.dims, x.strides, y.dims, y.strides)
            spec = kdm.CopySpec(dims, sx, sy, kdtype(x), kdtype(y))
            skip = []
            if int(node.mode) == int(RM.CUDNN_RESHAPE_VIEW_ONLY) and sx == sy and x.itemsize == y.itemsize \
                    and kdtype(x) == kdtype(y):
                skip.append((0, x.uid, y.uid, 0))
            return [_copy_step(x, y, spec, "reshape")], skip
        ax = int(node.axis)
        steps, skip, start = [], [], 0
        for k, x in enumerate(node.xs()):
            off = start * int(y.strides[ax])
            spec = kdm.CopySpec(tuple(x.dims), tuple(x.strides), tuple(y.strides), kdtype(x), kdtype(y), 0, off)
            if node.in_place_index is not None and int(node.in_place_index) == k and \
                    tuple(x.strides) == tuple(y.strides) and kdtype(x) == kdtype(y):
                skip.append((len(steps), x.uid, y.uid, off * y.itemsize))
            steps.append(_copy_step(x, y, spec, "concat"))
            start += int(x.dims[ax])
        return steps, skip

    def cost(self, sub, cfg, device):
        steps, _ = self._plan(sub)
        return steps_time(device, steps, flops_per_byte=0.0)

    def build(self, sub, cfg, ctx):
        steps, skip = self._plan(sub)
        return DataMovementPlan(self, sub, cfg, steps, skip)


class DataMovementPlan(MemPlan):
    """The copy launches, less those whose source already is the destination (in-place concat input,
    view-only reshape onto its own storage), decided per set of buffer addresses."""

    def __init__(self, engine, sub, cfg, steps, skip):
        super().__init__(engine, sub, cfg, steps, 0)
        self.skip = skip

    def _skipped(self, views):
        return {i for i, xu, yu, off in self.skip if views[xu].ptr == views[yu].ptr + off}

    def launches(self, views, scratch):
        out = super().launches(views, scratch)
        drop = self._skipped(views)
        return [p for i, p in enumerate(out) if i not in drop]

    def prepare(self, views, scratch):
        launches = self.launches(views, scratch)
        runs = [p.run for p in launches]

        def run(stream):
            for r in runs:
                r(None, stream)
        return run
