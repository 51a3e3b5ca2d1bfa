"""Data-movement nodes: concatenation, reshape (view-only or logical, which covers transposes) and
slice (a strided window per dim)."""
from ...types import cudnnBackendReshapeMode_t, cudnnStatus_t
from ..node import REQUIRED, Node

S = cudnnStatus_t


class Concat(Node):
    OP = "concat"
    INPUTS = ()
    OUTPUTS = ("Y",)
    ATTRS = {"axis": REQUIRED, "in_place_index": None}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        xs = self.xs()
        if len(xs) < 1:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "X", "needs at least one input (ports X0, X1, ...)")

    def xs(self):
        return [self.inputs[k] for k in sorted(self.inputs, key=lambda p: int(p[1:]))]

    def infer(self, ctx):
        xs = self.xs()
        ax = int(self.axis)
        base = list(xs[0].dims)
        if not 0 <= ax < len(base):
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "axis", f"{ax} out of range")
        total = 0
        for i, t in enumerate(xs):
            d = list(t.dims)
            if len(d) != len(base) or any(a != b for j, (a, b) in enumerate(zip(d, base)) if j != ax):
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, f"X{i}", f"dims {t.dims} vs {xs[0].dims}")
            total += d[ax]
        base[ax] = total
        self.infer_output("Y", base, ctx, like=xs[0])


# input ports of a concat are X0..Xn
Concat.OPTIONAL_INPUTS = tuple(f"X{i}" for i in range(64))


class Reshape(Node):
    OP = "reshape"
    INPUTS = ("X",)
    OUTPUTS = ("Y",)
    ATTRS = {"mode": cudnnBackendReshapeMode_t.CUDNN_RESHAPE_VIEW_ONLY}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.mode = cudnnBackendReshapeMode_t(int(self.mode))
        if self.outputs["Y"].dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "Y", "dims must be given")

    def infer(self, ctx):
        x, y = self.inputs["X"], self.outputs["Y"]
        if x.numel != y.numel:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "Y", f"{y.numel} elements, X has {x.numel}")
        self.infer_output("Y", y.dims, ctx, like=None, dtype=x.dtype)


class Slice(Node):
    """``Y = X[start_0:limit_0:stride_0, ...]`` (cudnn-frontend / backend SLICE semantics): per dim a
    half-open window ``[start, limit)`` of X taken every ``stride`` elements; Y's extent along dim i is
    ``ceil((limit_i - start_i) / stride_i)``. The three lists have one entry per dim of X (``strides``
    unset: all 1). Refused with BAD_PARAM naming the field: a list of another length, a start < 0, a
    limit > X's extent, an empty window (start >= limit), a stride < 1. Y's dtype defaults to X's (a
    given other dtype is a cast), its strides to packed in X's stride order."""
    OP = "slice"
    INPUTS = ("X",)
    OUTPUTS = ("Y",)
    ATTRS = {"start_indices": REQUIRED, "limit_indices": REQUIRED, "strides": None}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        x = self.inputs["X"]
        if x.dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "X", "dims not known")
        n = x.ndim
        if self.strides is None:
            self.strides = (1,) * n
        for field in ("start_indices", "limit_indices", "strides"):
            v = getattr(self, field)
            try:
                v = tuple(int(e) for e in v)
            except (TypeError, ValueError):
                self.fail(S.CUDNN_STATUS_BAD_PARAM, field, f"{v!r} is not a list of integers")
            if len(v) != n:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, field, f"{len(v)} entries, X has {n} dims")
            setattr(self, field, v)
        for i, (a, b, s, d) in enumerate(zip(self.start_indices, self.limit_indices, self.strides, x.dims)):
            if s < 1:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, "strides", f"dim {i}: stride {s} (must be >= 1)")
            if a < 0 or a >= d:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, "start_indices", f"dim {i}: start {a} outside [0, {d})")
            if b > d:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, "limit_indices", f"dim {i}: limit {b} > extent {d}")
            if b <= a:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, "limit_indices", f"dim {i}: limit {b} <= start {a} (empty)")

    def out_dims(self):
        return tuple(-(-(b - a) // s) for a, b, s in zip(self.start_indices, self.limit_indices, self.strides))

    def x_offset(self):
        """Element offset of Y's first element in X's storage."""
        return sum(a * int(st) for a, st in zip(self.start_indices, self.inputs["X"].strides))

    def x_view_strides(self):
        """X's element strides seen through the slice (one per dim of Y)."""
        return tuple(int(st) * s for st, s in zip(self.inputs["X"].strides, self.strides))

    def infer(self, ctx):
        x = self.inputs["X"]
        self.infer_output("Y", self.out_dims(), ctx, like=x, dtype=x.dtype)
