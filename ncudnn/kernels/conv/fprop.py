"""Convolution forward as implicit GEMM: M = N*O*P*Q, N = K/G, K = C/G*T*R*S, one GEMM per group.

``ConvFprop(cfg, dtypes, epilogue, order, a_fast, b_fast, precomp)`` specialises the GEMM block
kernel with the x gather loader (A) and the filter loader (B); ``run(g, x, w, y, ...)`` launches it
for a :class:`~ncudnn.kernels.conv.geometry.ConvGeometry`. ``precomp=True`` is
IMPLICIT_PRECOMP_GEMM (needs ``make_table(g)`` uploaded; ``table_size(g)`` bytes, exact),
``precomp=False`` is IMPLICIT_GEMM (no table). Knobs: ``order`` "crs" (NCHW/KCRS) or "rsc"
(NHWC/KRSC); ``a_fast`` "outer" (x contiguous along spatial: NCHW) or "k" (contiguous along the
reduction: NHWC with "rsc"); ``b_fast`` likewise for w.
"""
import numpy as np

from ..pointwise import epilogue as ep
from ..gemm.launch import BlockKernels, launch
from . import common, operands
from .table import build_table, table_bytes

_KERNELS = {}


class ConvFprop:
    def __init__(self, cfg, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs",
                 a_fast="outer", b_fast="k", precomp=True):
        self.cfg, self.order, self.precomp = cfg, order, precomp
        self.dtypes, self.ftype, self.spec, bias_dt, res_dt = common.normalize(dtypes, epilogue)
        A = operands.fprop_x(self.dtypes[0], self.ftype, a_fast, order, precomp)
        B = operands.filter_operand(self.dtypes[1], self.ftype, b_fast, order, precomp)
        self.bk = BlockKernels(cfg, A, B, operands.activation_output(), self.spec, bias_dt, res_dt)

    def table_size(self, g):
        return table_bytes(g.Cg, g.taps) if self.precomp else 0

    def make_table(self, g):
        return build_table(g, "fprop", self.order)

    def workspace_size(self, g):
        """Bytes of split-K workspace (``ftype``), exact."""
        M, N, _ = g.gemm_fprop()
        return self.bk.workspace_elems(M, N, g.G) * np.dtype(self.ftype).itemsize

    def run(self, g, x, w, y, *, table=None, alpha=1.0, beta=0.0, bias=None, bias_stride=1,
            residual=None, residual_strides=None, workspace=None, stream=0):
        packed = self.pack(g, x, w, y, table=table, bias=bias, bias_stride=bias_stride,
                           residual=residual, residual_strides=residual_strides)
        launch(self.bk, *packed, alpha, beta, workspace, stream)

    def pack(self, g, x, w, y, *, table=None, bias=None, bias_stride=1, residual=None,
             residual_strides=None):
        """Checked (M, N, K, groups, a_args, b_args, o_args, bias_args, r_args) for ``launch``."""
        M, N, K = g.gemm_fprop()
        D, H, W = g.DHW
        O, P, Q = g.OPQ
        T, R, S = g.TRS
        common.check_tensor("x", x, (g.N, g.C) + g.DHW, g.x_strides)
        common.check_tensor("w", w, (g.K, g.Cg) + g.TRS, g.w_strides)
        common.check_tensor("y", y, (g.N, g.K) + g.OPQ, g.y_strides)
        if self.precomp:
            common.check_table(table, self.table_size(g) // 4)
        elif table is None:
            table = common.dummy("int32")
        sx, sw, sy = g.x_strides, g.w_strides, g.y_strides
        a_args = (x, table, sx[0], sx[1], sx[2], sx[3], sx[4], D, H, W, O, P, Q, *g.stride, *g.pad,
                  g.Cg, T, R, S, *g.dil)
        b_args = (w, table, sw[0], sw[0], sw[1], sw[2], sw[3], sw[4], g.Cg, T, R, S, int(g.flip), g.Kg)
        o_args = (y, sy[0], sy[1], sy[2], sy[3], sy[4], O, P, Q, g.Kg)
        res = common.need_residual(self, residual)
        sr = tuple(residual_strides) if residual is not None and residual_strides else sy
        if residual is not None:
            common.check_tensor("residual", residual, (g.N, g.K) + g.OPQ, sr)
        r_args = (res, sr[0], sr[1], sr[2], sr[3], sr[4], O, P, Q, g.Kg)
        bias_args = common.bias_args(self, bias, g.Kg, bias_stride)
        return M, N, K, g.G, a_args, b_args, o_args, bias_args, r_args


def make_conv_fprop(cfg, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs",
                    a_fast="outer", b_fast="k", precomp=True):
    key = (cfg, tuple(dtypes), epilogue, order, a_fast, b_fast, precomp)
    if key not in _KERNELS:
        _KERNELS[key] = ConvFprop(cfg, dtypes, epilogue, order, a_fast, b_fast, precomp)
    return _KERNELS[key]
