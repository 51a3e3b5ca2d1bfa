"""Engine "data_movement": concat, reshape (which covers transposes: same dims, other strides) and
slice as strided copy kernels (:mod:`ncudnn.kernels.datamove.strided_copy`), with a dtype cast where the
output's dtype differs.

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
  SLICE    Y = X[start:limit:stride per dim]: one copy reading X at an element offset
           (sum start_i * xstride_i) with strides xstride_i * stride_i.
Both reshape dim lists are merged where row-major contiguous on that side, then split into one
common shape (a dim of one side must divide the other's at each step, else NOT_SUPPORTED_SHAPE).

Copies whose runs are whole 16-byte pieces are built with 16-byte accesses; when, at execution, X
or Y (plus its offset) is not 16-byte aligned, the copy's 8-byte twin runs instead, and where it is not
8-byte aligned either, an element-by-element twin (each compiled the first time it is needed).

Aliasing (checked per set of buffer addresses, before any launch): a copy whose source and
destination byte ranges overlap would race (threads read elements others already overwrote).
A VIEW_ONLY reshape that is not a true view stages through the workspace (X copied packed into it,
then to Y: ``workspace_size`` = X's element count x its element size, the only workspace this engine
asks for); any other overlapping copy (concat input outside its in-place slab, logical reshape,
slice, a view-only reshape onto a shifted address) is refused with CUDNN_STATUS_BAD_PARAM naming
the node and the two tensors. No knobs.
"""
import dataclasses
import math

from ...errors import BadParamError
from ...ir.tensor import packed_strides
from ...kernels.datamove import strided_copy as kdm
from ...types import cudnnBackendReshapeMode_t as RM, cudnnStatus_t
from ..base import OK, Engine
from ..membound.common import Arg, MemPlan, Step, abi_dtype, array_type, extent, kdtype, src_key, steps_time
from ..registry import register

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
        from ...kernels.runtime.launch import ArgView

        v = views[self.t.uid]
        st = abi_dtype(kdtype(self.t))
        words = max(1, extent(self.t.dims, self.t.strides) * st.itemsize // 8)
        w = abi_dtype("int64")
        return ArgView(v.ptr, (words,), (8,), 8, w)


def _tensor_arg(t, word):
    if not word:
        return Arg.tensor(t)
    return _WordArg("tensor", t=t, dtype="int64", nbtype=array_type("int64"))


def _scratch_arg(n, dtype, word):
    """The staging area (workspace offset 0) holding ``n`` elements of ``dtype`` (as words if ``word``)."""
    if not word:
        return Arg.scratch(0, n, dtype)
    return Arg.scratch(0, n * abi_dtype(dtype).itemsize // 8, "int64")


def _copy_step(x, y, spec, name, vec=True, word=True):
    """One copy launch; ``x`` / ``y`` are tensor descriptors, or ``None`` for the staging area.
    ``vec``: 16-byte accesses where the spec allows (``step.vec16``; needs aligned addresses);
    ``word``: 8-byte words where the spec allows (``step.word``; needs 8-byte aligned addresses)."""
    ck = kdm.build_copy(spec, vec, word)
    xo, yo = ck.offsets()
    # offsets are launch arguments: pieces differing only in offsets share one compiled kernel
    key = f"data_movement:{name}:" + src_key(dataclasses.replace(ck.spec, x_offset=0, y_offset=0), ck.source, ck.word)
    n = math.prod(spec.dims)
    isz = [abi_dtype(spec.x_dtype).itemsize, abi_dtype(spec.y_dtype).itemsize]
    xa = _tensor_arg(x, ck.word) if x is not None else _scratch_arg(n, spec.x_dtype, ck.word)
    ya = _tensor_arg(y, ck.word) if y is not None else _scratch_arg(n, spec.y_dtype, ck.word)
    step = Step(key, lambda: ck.kernel, ck.grid, ck.block, [xa, ya, Arg.const(xo), Arg.const(yo)],
                nbytes=n * sum(isz))
    step.vec16 = ck.vec16
    step.word = bool(ck.word) and not ck.vec16
    step.copy = (x, y, spec, name)
    return step


def _aligned(step, views, scratch, nbytes):
    """Whether both sides of ``step`` start ``nbytes``-aligned at these addresses."""
    x, y, spec, _ = step.copy
    for t, off, dt in ((x, spec.x_offset, spec.x_dtype), (y, spec.y_offset, spec.y_dtype)):
        base = views[t.uid].ptr if t is not None else scratch.ptr
        if (base + off * abi_dtype(dt).itemsize) % nbytes:
            return False
    return True


class _Copy:
    """What one launch reads and writes: the tensors and the element ranges the spec touches."""

    def __init__(self, x, y, spec):
        self.x, self.y, self.spec = x, y, spec

    def ranges(self, views):
        """((x start, x end), (y start, y end)) in bytes at ``views``' addresses."""
        sp = self.spec
        out = []
        for t, strides, off in ((self.x, sp.x_strides, sp.x_offset), (self.y, sp.y_strides, sp.y_offset)):
            isz = t.itemsize
            lo = views[t.uid].ptr + off * isz
            out.append((lo, lo + extent(sp.dims, strides) * isz))
        return out


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


@register
class DataMovementEngine(Engine):
    name = "data_movement"
    kinds = ("concat", "reshape", "slice")
    fallback = True

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if len(sub.nodes) != 1:
            return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, \
                f"{self.name}: one concat / reshape / slice node per subgraph"
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
        """(copies, skips, staged): copies are :class:`_Copy` s, one launch each; skips are (copy index,
        x uid, y uid, y byte offset) for copies that are no-ops when X's address is Y's plus the
        offset; staged is the (x -> workspace, workspace -> y) copy pair of a VIEW_ONLY reshape that
        is not a true view (run instead when X and Y overlap), else None."""
        node = sub.nodes[0]
        y = node.outputs["Y"]
        if node.OP == "slice":
            x = node.inputs["X"]
            spec = kdm.CopySpec(tuple(y.dims), node.x_view_strides(), tuple(y.strides), kdtype(x), kdtype(y),
                                node.x_offset(), 0)
            return [_Copy(x, y, spec)], [], None
        if node.OP == "reshape":
            x = node.inputs["X"]
            (dims, sx, sy), _ = common_shape(x.dims, x.strides, y.dims, y.strides)
            spec = kdm.CopySpec(dims, sx, sy, kdtype(x), kdtype(y))
            skip, staged = [], None
            if int(node.mode) == int(RM.CUDNN_RESHAPE_VIEW_ONLY):
                if sx == sy and x.itemsize == y.itemsize and kdtype(x) == kdtype(y):
                    skip.append((0, x.uid, y.uid, 0))
                else:
                    packed = packed_strides(dims)
                    staged = (kdm.CopySpec(dims, sx, packed, kdtype(x), kdtype(x)),
                              kdm.CopySpec(dims, packed, sy, kdtype(x), kdtype(y)))
            return [_Copy(x, y, spec)], skip, staged
        ax = int(node.axis)
        copies, skip, start = [], [], 0
        for k, x in enumerate(node.xs()):
            off = start * int(y.strides[ax])
            spec = kdm.CopySpec(tuple(x.dims), tuple(x.strides), tuple(y.strides), kdtype(x), kdtype(y), 0, off)
            if node.in_place_index is not None and int(node.in_place_index) == k and \
                    tuple(x.strides) == tuple(y.strides) and kdtype(x) == kdtype(y):
                skip.append((len(copies), x.uid, y.uid, off * y.itemsize))
            copies.append(_Copy(x, y, spec))
            start += int(x.dims[ax])
        return copies, skip, None

    def workspace_size(self, sub, cfg):
        _, _, staged = self._plan(sub)
        if staged is None:
            return 0
        x = sub.nodes[0].inputs["X"]
        return math.prod(x.dims) * abi_dtype(kdtype(x)).itemsize

    def cost(self, sub, cfg, device):
        copies, _, _ = self._plan(sub)
        return steps_time(device, [_copy_step(c.x, c.y, c.spec, sub.kind) for c in copies], flops_per_byte=0.0)

    def build(self, sub, cfg, ctx):
        copies, skip, staged = self._plan(sub)
        return DataMovementPlan(self, sub, cfg, copies, skip, staged, self.workspace_size(sub, cfg))


class DataMovementPlan(MemPlan):
    """The copy launches, less those whose source already is the destination (in-place concat input,
    view-only reshape onto its own storage), decided per set of buffer addresses; overlapping source
    and destination stage through the workspace (view-only reshape) or are refused (BAD_PARAM)."""

    def __init__(self, engine, sub, cfg, copies, skip, staged, workspace_size):
        name = sub.kind
        steps = [_copy_step(c.x, c.y, c.spec, name) for c in copies]
        if staged is not None:
            steps += [_copy_step(copies[0].x, None, staged[0], name), _copy_step(None, copies[0].y, staged[1], name)]
        super().__init__(engine, sub, cfg, steps, workspace_size)
        self.copies, self.skip, self.staged = copies, skip, staged is not None
        self._narrow = {}

    def _skipped(self, views):
        return {i for i, xu, yu, off in self.skip if views[xu].ptr == views[yu].ptr + off}

    def _chosen(self, views):
        """Indices of the steps to launch at ``views``' addresses (raises on a racing overlap)."""
        drop = self._skipped(views)
        node = self.sub.nodes[0]
        n = len(self.copies)
        for i, c in enumerate(self.copies):
            if i in drop:
                continue
            xr, yr = c.ranges(views)
            if not _overlap(xr, yr):
                continue
            if self.staged:
                return [n, n + 1]
            xport = next(p for p, t in node.inputs.items() if t is c.x)
            raise BadParamError(
                f"node '{node.name}' ({node.OP}): {xport} (uid {c.x.uid}) and Y (uid {c.y.uid}) overlap in memory "
                f"(bytes [{xr[0]:#x}, {xr[1]:#x}) and [{yr[0]:#x}, {yr[1]:#x})): the copy would race; give Y its "
                f"own buffer (in place run only: a view-only reshape, a true view at X's address, a concat "
                f"input at its slab named by in_place_index)", S.CUDNN_STATUS_BAD_PARAM)
        return [i for i in range(n) if i not in drop]

    def selected(self, views, scratch):
        """(step, compiled) per launch at these addresses: a 16-byte step whose addresses are not
        16-byte aligned is swapped for its 8-byte twin, and an 8-byte step whose addresses are not 8-byte
        aligned for its element-by-element twin (each compiled on first need)."""
        out = []
        for i in self._chosen(views):
            step, ck = self.steps[i], self.compiled[i]
            if step.vec16 and not _aligned(step, views, scratch, kdm.VEC):
                step, ck = self._twin(i, step, "w8")
            if step.word and not _aligned(step, views, scratch, kdm.WORD):
                step, ck = self._twin(i, step, "elem")
            out.append((step, ck))
        return out

    def _twin(self, i, step, kind):
        if (i, kind) not in self._narrow:
            twin = _copy_step(*step.copy, vec=False, word=kind == "w8")
            self._narrow[(i, kind)] = (twin, twin.compile())
        return self._narrow[(i, kind)]

    def launches(self, views, scratch):
        out = []
        for step, ck in self.selected(views, scratch):
            args = tuple(a.bind(views, scratch) for a in step.args)
            out.append(ck.prepare(step.grid, step.block, args, step.shared))
        return out

    def prepare(self, views, scratch):
        launches = self.launches(views, scratch)
        runs = [p.run for p in launches]

        def run(stream):
            for r in runs:
                r(None, stream)
        return run
