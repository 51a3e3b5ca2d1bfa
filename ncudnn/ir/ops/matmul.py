"""Batched matmul: C[..., M, N] = A[..., M, K] @ B[..., K, N]; batch dims broadcast (size 1 / stride 0);
transposes are strides. Optional M/N/K override tensors (per-batch sizes) and a padding value for the
rows/columns past an override, as CUDNN_BACKEND_MATMUL_DESCRIPTOR documents."""
from ...types import cudnnStatus_t
from ..node import Node
from .pointwise import broadcast_dims

S = cudnnStatus_t


class Matmul(Node):
    OP = "matmul"
    INPUTS = ("A", "B")
    OPTIONAL_INPUTS = ("M_OVERRIDE", "N_OVERRIDE", "K_OVERRIDE")
    OUTPUTS = ("C",)
    ATTRS = {"padding_value": 0.0, "irregularly_strided_batch_count": None}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        a, b = self.inputs["A"], self.inputs["B"]
        if a.ndim < 2 or b.ndim < 2:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "A/B", "need at least 2 dims")
        if a.ndim != b.ndim:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "B", f"rank {b.ndim} differs from A's {a.ndim}")
        self.check_float("A")
        self.check_float("B")

    def infer(self, ctx):
        a, b = self.inputs["A"], self.inputs["B"]
        if a.dims[-1] != b.dims[-2]:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "B",
                      f"K mismatch: A is {a.dims}, B is {b.dims}")
        batch = broadcast_dims([a.dims[:-2] or (1,), b.dims[:-2] or (1,)], self.fail)[:a.ndim - 2]
        self.infer_output("C", (*batch, a.dims[-2], b.dims[-1]), ctx, like=a)

    def mnk(self):
        a, b = self.inputs["A"], self.inputs["B"]
        return a.dims[-2], b.dims[-1], a.dims[-1]

    def flops(self):
        import math
        c = self.outputs["C"]
        return 2 * math.prod(c.dims) * self.inputs["A"].dims[-1]
