"""Data-movement nodes: concatenation and reshape (view-only or logical, which covers transposes
and slices expressed through strides)."""
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
