"""Host launcher of the Winograd weight gradient (wgrad.py) over numba device arrays: the kernel-level
entry the tests and experiments/probe_wino_wgrad.py use (the engine launches the same kernels through the
kernel cache, conv_winograd_common).

``WgradShape`` fixes the problem (N, C, H, W, K, P, Q, padding, strides of x / dy / dw in elements,
layout) and the decomposition (r, S, TC) for a GEMM config; ``run_wgrad`` launches
dy transform -> x transform -> batched GEMM (alpha^2 x S) -> output transform on one stream.
"""
from numba import cuda
import numpy as np

from ..pointwise import epilogue as ep
from ..gemm import make_gemm
from ..gemm.gemm import run_gemm
from . import wgrad as ww


class WgradShape:
    def __init__(self, N, C, H, W, K, P, Q, pad, x_strides, dy_strides, dw_strides, r, gcfg,
                 cfast=False, flip=False, slots=132, splits=None):
        self.N, self.C, self.H, self.W, self.K, self.P, self.Q = N, C, H, W, K, P, Q
        self.pad, self.r, self.gcfg, self.cfast, self.flip = tuple(pad), r, gcfg, cfast, flip
        self.x_strides, self.dy_strides, self.dw_strides = tuple(x_strides), tuple(dy_strides), tuple(dw_strides)
        self.a2 = (r + 2) ** 2
        self.TH, self.TW, self.T = ww.tiles(P, Q, N, r)
        if splits is None:
            self.S, self.TC = ww.splits(K, C, self.T, self.a2, gcfg.BLOCK_M, gcfg.BLOCK_N, slots)
        else:
            self.S = splits
            self.TC = -(-(-(-self.T // splits)) // ww.CHUNK) * ww.CHUNK
        self.TPAD = self.S * self.TC
        self.sizes = ww.sizes(K, C, self.TPAD, self.S, r)
        self.a_st, self.b_st, self.c_st, self.layouts = ww.gemm_strides(K, C, self.TPAD, self.TC, self.S, r, cfast)

    @property
    def workspace_elems(self):
        return sum(self.sizes)

    def flops(self):
        """FLOPs of the direct wgrad (what effective TFLOP/s are quoted against)."""
        return 2.0 * self.N * self.K * self.P * self.Q * self.C * 9


def kernels(shape, x_dtype="float32", dy_dtype="float32", dw_dtype="float32"):
    """(dy kernel, x kernel, GemmKernel, out kernel) of a shape."""
    s = shape
    gk = make_gemm(s.gcfg, s.layouts[0], s.layouts[1], ("float32",) * 3, ep.EpilogueSpec())
    return (ww.make_dy(s.r, dy_dtype, s.cfast), ww.make_x(s.r, x_dtype, s.cfast), gk, ww.make_out(s.r, dw_dtype, ww.packed_dw(s.dw_strides, s.C)))


def run_wgrad(shape, x, dy, dw, workspace=None, alpha=1.0, beta=0.0, stream=0, dtypes=("float32",) * 3):
    """dw = alpha * wgrad(x, dy) + beta * dw on ``stream``; flat 1-D device arrays; ``workspace``: a
    float32 device array of ``shape.workspace_elems`` (allocated when None)."""
    s = shape
    kdy, kx, gk, kout = kernels(s, *dtypes)
    nu, nv, nm = s.sizes
    if workspace is None:
        workspace = cuda.device_array(s.workspace_elems, np.float32)
    u, v, mb = workspace[:nu], workspace[nu:nu + nv], workspace[nu + nv:nu + nv + nm]
    T = ww.THREADS
    kdy[ww.blocks(s.K * s.TPAD), T, stream](dy, u, s.K, s.P, s.Q, s.TH, s.TW, s.T, s.TPAD, *s.dy_strides)
    kx[ww.blocks(s.C * s.TPAD), T, stream](x, v, s.C, s.H, s.W, s.TH, s.TW, s.T, s.TPAD, s.pad[0], s.pad[1],
                                           *s.x_strides)
    run_gemm(gk, u, v, mb, M=s.K, N=s.C, K=s.TC, a_strides=s.a_st, b_strides=s.b_st, c_strides=s.c_st,
             batch=(s.a2, s.S), stream=stream)
    base, s_k, s_c, s_r, s_s = ww.dw_addressing(s.dw_strides, s.flip)
    kout[ww.blocks(s.K * s.C), T, stream](mb, dw, s.K, s.C, s.S, base, s_k, s_c, s_r, s_s,
                                          ww.f32(alpha), ww.f32(beta))
    return workspace
