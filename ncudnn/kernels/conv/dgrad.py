"""Convolution data gradient as implicit GEMM over dy: M = N*D*H*W, N = C/G, K = K/G*T*R*S.

Gather form: dx[n, c, d, h, w] = sum over (k, t, r, s) of dy[n, k, o, p, q] * w[k, c, t, r, s]
with o = (d + pad_d - t*dil_d) / stride_d where that is an integer in [0, O) (likewise p, q); exact
for every stride, with no scatter and no atomics. The stride is compile-time (the divisibility
test is a shift / multiply). Knobs as in fprop.py; ``order`` walks (k, t, r, s).
"""
import numpy as np

from ..pointwise import epilogue as ep
from ..gemm.launch import BlockKernels, launch
from . import common, operands
from .table import build_table, table_bytes

_KERNELS = {}


class ConvDgrad:
    def __init__(self, cfg, stride, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs",
                 a_fast="outer", b_fast="k", precomp=True):
        self.cfg, self.order, self.precomp = cfg, order, precomp
        self.stride = tuple(int(s) for s in stride)
        if len(self.stride) != 3:
            raise ValueError("stride: 3 values (pad 1-D / 2-D problems with leading 1s)")
        self.dtypes, self.ftype, self.spec, bias_dt, res_dt = common.normalize(dtypes, epilogue)
        A = operands.dgrad_dy(self.dtypes[0], self.ftype, a_fast, order, precomp, self.stride)
        B = operands.filter_operand(self.dtypes[1], self.ftype, b_fast, order, precomp)
        self.bk = BlockKernels(cfg, A, B, operands.activation_output(), self.spec, bias_dt, res_dt)

    def table_size(self, g):
        return table_bytes(g.Kg, g.taps) if self.precomp else 0

    def make_table(self, g):
        return build_table(g, "dgrad", self.order)

    def workspace_size(self, g):
        M, N, _ = g.gemm_dgrad()
        return self.bk.workspace_elems(M, N, g.G) * np.dtype(self.ftype).itemsize

    def run(self, g, dy, w, dx, *, table=None, alpha=1.0, beta=0.0, bias=None, bias_stride=1,
            residual=None, residual_strides=None, workspace=None, stream=0):
        """dx = epilogue(alpha * dgrad(dy, w) + beta * dx); dy strides are g.y_strides, dx g.x_strides."""
        packed = self.pack(g, dy, w, dx, table=table, bias=bias, bias_stride=bias_stride,
                           residual=residual, residual_strides=residual_strides)
        launch(self.bk, *packed, alpha, beta, workspace, stream)

    def pack(self, g, dy, w, dx, *, table=None, bias=None, bias_stride=1, residual=None,
             residual_strides=None):
        """Checked (M, N, K, groups, a_args, b_args, o_args, bias_args, r_args) for ``launch``."""
        if tuple(g.stride) != self.stride:
            raise ValueError(f"kernel built for stride {self.stride}, problem has {g.stride}")
        M, N, K = g.gemm_dgrad()
        D, H, W = g.DHW
        O, P, Q = g.OPQ
        T, R, S = g.TRS
        common.check_tensor("dy", dy, (g.N, g.K) + g.OPQ, g.y_strides)
        common.check_tensor("w", w, (g.K, g.Cg) + g.TRS, g.w_strides)
        common.check_tensor("dx", dx, (g.N, g.C) + g.DHW, g.x_strides)
        if self.precomp:
            common.check_table(table, self.table_size(g) // 4)
        elif table is None:
            table = common.dummy("int32")
        sx, sw, sy = g.x_strides, g.w_strides, g.y_strides
        a_args = (dy, table, sy[0], sy[1], sy[2], sy[3], sy[4], O, P, Q, D, H, W, *g.pad,
                  g.Kg, T, R, S, *g.dil)
        b_args = (w, table, sw[1], sw[0], sw[0], sw[2], sw[3], sw[4], g.Kg, T, R, S, int(g.flip), g.Kg)
        o_args = (dx, sx[0], sx[1], sx[2], sx[3], sx[4], D, H, W, g.Cg)
        res = common.need_residual(self, residual)
        sr = tuple(residual_strides) if residual is not None and residual_strides else sx
        if residual is not None:
            common.check_tensor("residual", residual, (g.N, g.C) + g.DHW, sr)
        r_args = (res, sr[0], sr[1], sr[2], sr[3], sr[4], D, H, W, g.Cg)
        bias_args = common.bias_args(self, bias, g.Cg, bias_stride)
        return M, N, K, g.G, a_args, b_args, o_args, bias_args, r_args


def make_conv_dgrad(cfg, stride, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs",
                    a_fast="outer", b_fast="k", precomp=True):
    key = (cfg, tuple(stride), tuple(dtypes), epilogue, order, a_fast, b_fast, precomp)
    if key not in _KERNELS:
        _KERNELS[key] = ConvDgrad(cfg, stride, dtypes, epilogue, order, a_fast, b_fast, precomp)
    return _KERNELS[key]
