"""Data gradient of a strided convolution as one stride-1 implicit GEMM per output phase (sub-pixel
decomposition): no zero tap is multiplied.

dx positions ``h = ph + stride*i`` of phase ``ph`` receive exactly the taps ``r`` with
``(ph + pad - r*dil) % stride == 0``, from ``dy[i + c_r]``, ``c_r = (ph + pad - r*dil) // stride``.
So phase ``(pd, ph, pw)`` is an fprop-style gather of dy with stride 1 over its own valid taps:
M = N*Dp*Hp*Wp, N = C/G, K = K/G * taps(phase). Each phase reuses the fprop x loader on dy
(IMPLICIT_PRECOMP table rows ``[k*sdy_k + shifted offsets, pack3(c_t + B_d, c_r + B_h, c_s + B_w),
w_delta]``; the bias ``B`` keeps packed coordinates non-negative and is the loader's "padding")
and the fprop/dgrad filter loader; the output rows step by the stride from the phase's first pixel.
A 2x2-strided 3x3 dgrad does 9 tap-GEMM columns instead of 36 (4 phases x 9 taps, 3/4 zeros).

``ConvDgradPhased(cfg, dtypes, epilogue, order, a_fast, b_fast)``: ``table_size(g)``,
``make_table(g)`` (all phases, concatenated), ``packs(g, dy, w, dx, ...)`` -> one launch tuple per
phase, ``run(...)`` launches them in order. SPLIT_K must be 1.
"""
import numpy as np

from ..pointwise import epilogue as ep
from ..gemm.launch import BlockKernels, launch
from . import common, operands
from .table import ENTRY, LIMIT, pack3

_KERNELS = {}


def _dim_phases(size, stride, pad, dil, taps):
    """Per phase of one spatial dim: (phase, count of dx positions, [(tap, shift c)], bias)."""
    out = []
    for ph in range(stride):
        n = -(-(size - ph) // stride) if ph < size else 0
        valid = [(t, (ph + pad - t * dil) // stride) for t in range(taps) if (ph + pad - t * dil) % stride == 0]
        bias = max([0] + [-c for _, c in valid])
        out.append((ph, n, valid, bias))
    return out


def phases(g):
    """[(offsets (pd, ph, pw), sizes (Dp, Hp, Wp), taps [((t, r, s), (ct, cr, cs))], biases)] of
    every phase with dx positions."""
    per = [_dim_phases(g.DHW[i], g.stride[i], g.pad[i], g.dil[i], g.TRS[i]) for i in range(3)]
    out = []
    for a in per[0]:
        for b in per[1]:
            for c in per[2]:
                if not (a[1] and b[1] and c[1]):
                    continue
                taps = [((t, r, s), (ct, cr, cs)) for t, ct in a[2] for r, cr in b[2] for s, cs in c[2]]
                out.append(((a[0], b[0], c[0]), (a[1], b[1], c[1]), taps, (a[3], b[3], c[3])))
    return out


def _phase_table(g, order, taps, bias):
    Kg, sy, sw = g.Kg, g.y_strides, g.w_strides
    T, R, S = g.TRS
    if not taps:
        return np.zeros(0, np.int32)
    k = np.arange(Kg, dtype=np.int64)
    tap_i = np.arange(len(taps))
    kk, ti = np.meshgrid(k, tap_i, indexing="ij")        # "crs": k slowest
    if order == "rsc":
        kk, ti = kk.T, ti.T                              # taps slowest, k fastest
    elif order != "crs":
        raise ValueError(order)
    kk, ti = kk.reshape(-1), ti.reshape(-1)
    trs = np.array([t for t, _ in taps], np.int64)[ti]
    c = np.array([c for _, c in taps], np.int64)[ti] + np.array(bias, np.int64)
    if c.size and c.max() >= LIMIT:
        raise ValueError("conv offsets do not pack into the phased dgrad table")
    f = (np.array([T - 1, R - 1, S - 1]) - trs) if g.flip else trs
    tab = np.stack([kk * sy[1] + c[:, 0] * sy[2] + c[:, 1] * sy[3] + c[:, 2] * sy[4],
                    pack3(c[:, 0], c[:, 1], c[:, 2]),
                    kk * sw[0] + f[:, 0] * sw[2] + f[:, 1] * sw[3] + f[:, 2] * sw[4]], axis=1)
    if np.abs(tab).max(initial=0) >= 2 ** 31:
        raise ValueError("conv offsets do not fit the int32 table")
    return tab.astype(np.int32).reshape(-1)


def _offset(arr, k):
    """``arr`` viewed from element ``k`` (numba device arrays slice; Flat-like buffers move their pointer)."""
    if k == 0:
        return arr
    if hasattr(arr, "strides_bytes") and hasattr(arr, "ptr"):
        return type(arr)(arr.ptr + k * arr.itemsize, arr.shape[0] - k, arr.dtype)
    return arr[k:]


class ConvDgradPhased:
    def __init__(self, cfg, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs", a_fast="outer",
                 b_fast="k"):
        if cfg.SPLIT_K != 1:
            raise ValueError("phased dgrad: SPLIT_K must be 1")
        self.cfg, self.order, self.precomp = cfg, order, True
        self.dtypes, self.ftype, self.spec, bias_dt, res_dt = common.normalize(dtypes, epilogue)
        A = operands.fprop_x(self.dtypes[0], self.ftype, a_fast, order, True)
        B = operands.filter_operand(self.dtypes[1], self.ftype, b_fast, order, True)
        self.bk = BlockKernels(cfg, A, B, operands.activation_output(), self.spec, bias_dt, res_dt)

    def table_size(self, g):
        return sum(ENTRY * 4 * g.Kg * len(p[2]) for p in phases(g))

    def make_table(self, g):
        parts = [_phase_table(g, self.order, p[2], p[3]) for p in phases(g)]
        tab = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        return np.ascontiguousarray(tab if tab.size else np.zeros(1, np.int32))

    def workspace_size(self, g):
        return 0

    def packs(self, g, dy, w, dx, *, table=None, bias=None, bias_stride=1, residual=None, residual_strides=None):
        """One checked (M, N, K, groups, a_args, b_args, o_args, bias_args, r_args) per phase."""
        common.check_tensor("dy", dy, (g.N, g.K) + g.OPQ, g.y_strides)
        common.check_tensor("w", w, (g.K, g.Cg) + g.TRS, g.w_strides)
        common.check_tensor("dx", dx, (g.N, g.C) + g.DHW, g.x_strides)
        common.check_table(table, max(self.table_size(g) // 4, 1))
        res = common.need_residual(self, residual)
        sr = tuple(residual_strides) if residual is not None and residual_strides else g.x_strides
        if residual is not None:
            common.check_tensor("residual", residual, (g.N, g.C) + g.DHW, sr)
        bias_args = common.bias_args(self, bias, g.Cg, bias_stride)
        sx, sw, sy = g.x_strides, g.w_strides, g.y_strides
        O, P, Q = g.OPQ
        out, row = [], 0
        for (pd, ph, pw), (Dp, Hp, Wp), taps, (bd, bh, bw) in phases(g):
            n_rows = g.Kg * len(taps)
            tab = _offset(table, row * ENTRY) if n_rows else table
            row += n_rows
            a_args = (dy, tab, sy[0], sy[1], sy[2], sy[3], sy[4], O, P, Q, Dp, Hp, Wp, 1, 1, 1, bd, bh, bw,
                      g.Kg, 1, 1, 1, 1, 1, 1)
            b_args = (w, tab, sw[1], sw[0], sw[0], sw[2], sw[3], sw[4], g.Kg, 1, 1, 1, 0, g.Kg)
            base = pd * sx[2] + ph * sx[3] + pw * sx[4]
            o_args = (_offset(dx, base), sx[0], sx[1], g.stride[0] * sx[2], g.stride[1] * sx[3],
                      g.stride[2] * sx[4], Dp, Hp, Wp, g.Cg)
            rbase = pd * sr[2] + ph * sr[3] + pw * sr[4]
            r_args = (_offset(res, rbase) if residual is not None else res, sr[0], sr[1], g.stride[0] * sr[2],
                      g.stride[1] * sr[3], g.stride[2] * sr[4], Dp, Hp, Wp, g.Cg)
            out.append((g.N * Dp * Hp * Wp, g.Cg, n_rows, g.G, a_args, b_args, o_args, bias_args, r_args))
        return out

    def run(self, g, dy, w, dx, *, table=None, alpha=1.0, beta=0.0, bias=None, bias_stride=1, residual=None,
            residual_strides=None, workspace=None, stream=0):
        for packed in self.packs(g, dy, w, dx, table=table, bias=bias, bias_stride=bias_stride,
                                 residual=residual, residual_strides=residual_strides):
            launch(self.bk, *packed, alpha, beta, None, stream)


def make_conv_dgrad_phased(cfg, dtypes=("float32",) * 3, epilogue=ep.EpilogueSpec(), order="crs", a_fast="outer",
                           b_fast="k"):
    key = (cfg, tuple(dtypes), epilogue, order, a_fast, b_fast)
    if key not in _KERNELS:
        _KERNELS[key] = ConvDgradPhased(cfg, dtypes, epilogue, order, a_fast, b_fast)
    return _KERNELS[key]
