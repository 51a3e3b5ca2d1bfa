"""Convolution weight gradient as implicit GEMM: M = K/G, N = C/G*T*R*S, K = N*O*P*Q per group.

dw[k, c, t, r, s] = sum over (n, o, p, q) of dy[n, k, o, p, q] * x[n, c, o*str - pad + t*dil, ...].
The long reduction over N*O*P*Q is split with the GEMM's split-K (cfg.SPLIT_K): "workspace" mode is
deterministic (partials + fixed-order reduce), "atomic" is not. ``order`` walks dw's (c, t, r, s)
columns; ``a_fast`` / ``b_fast``: "k" when dy / x are contiguous along (n, o, p, q) (NCHW),
"outer" when along channels (NHWC). ``precomp=True`` (default) reads a host-built (n, o, p, q)
offset table (``make_table(g)``, ``table_size(g)`` bytes, exact) instead of dividing in the loaders.
"""
import numpy as np

from ..pointwise import epilogue as ep
from ..gemm.launch import BlockKernels, launch
from . import common, operands
from .table import build_wgrad_table, table_bytes

_KERNELS = {}


class ConvWgrad:
    def __init__(self, cfg, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs",
                 a_fast="k", b_fast="k", precomp=True):
        self.cfg, self.order, self.precomp = cfg, order, precomp
        self.dtypes, self.ftype, self.spec, bias_dt, res_dt = common.normalize(dtypes, epilogue)
        if self.spec.bias_axis or self.spec.has_residual:
            raise ValueError("wgrad epilogue: alpha/beta and pointwise steps only")
        A = operands.wgrad_dy(self.dtypes[0], self.ftype, a_fast, precomp)
        B = operands.wgrad_x(self.dtypes[1], self.ftype, b_fast, order, precomp)
        self.bk = BlockKernels(cfg, A, B, operands.filter_output(order), self.spec, bias_dt, res_dt)

    def table_size(self, g):
        """Bytes of the (n, o, p, q) offset table (precomp), exact."""
        O, P, Q = g.OPQ
        return table_bytes(g.N, O * P * Q) if self.precomp else 0

    def make_table(self, g):
        return build_wgrad_table(g)

    def workspace_size(self, g):
        M, N, _ = g.gemm_wgrad()
        return self.bk.workspace_elems(M, N, g.G) * np.dtype(self.ftype).itemsize

    def run(self, g, x, dy, dw, *, table=None, alpha=1.0, beta=0.0, workspace=None, stream=0):
        """dw = epilogue(alpha * wgrad(x, dy) + beta * dw)."""
        launch(self.bk, *self.pack(g, x, dy, dw, table), alpha, beta, workspace, stream)

    def pack(self, g, x, dy, dw, table=None):
        """Checked (M, N, K, groups, a_args, b_args, o_args, bias_args, r_args) for ``launch``."""
        M, N, K = g.gemm_wgrad()
        D, H, W = g.DHW
        O, P, Q = g.OPQ
        T, R, S = g.TRS
        common.check_tensor("x", x, (g.N, g.C) + g.DHW, g.x_strides)
        common.check_tensor("dy", dy, (g.N, g.K) + g.OPQ, g.y_strides)
        common.check_tensor("dw", dw, (g.K, g.Cg) + g.TRS, g.w_strides)
        if self.precomp:
            common.check_table(table, self.table_size(g) // 4)
        elif table is None:
            table = common.dummy("int32")
        sx, sw, sy = g.x_strides, g.w_strides, g.y_strides
        a_args = (dy, sy[0], sy[1], sy[2], sy[3], sy[4], O, P, Q, g.Kg, table)
        b_args = (x, sx[0], sx[1], sx[2], sx[3], sx[4], D, H, W, O, P, Q, *g.stride, *g.pad,
                  g.Cg, T, R, S, *g.dil, table)
        o_args = (dw, sw[0], sw[1], sw[2], sw[3], sw[4], g.Kg, g.Cg, T, R, S, int(g.flip))
        return M, N, K, g.G, a_args, b_args, o_args, (dw, 0, 0), o_args


def make_conv_wgrad(cfg, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs",
                    a_fast="k", b_fast="k", precomp=True):
    key = (cfg, tuple(dtypes), epilogue, order, a_fast, b_fast, precomp)
    if key not in _KERNELS:
        _KERNELS[key] = ConvWgrad(cfg, dtypes, epilogue, order, a_fast, b_fast, precomp)
    return _KERNELS[key]
