"""The Winograd wgrad kernels (wgrad.py) registered with the sm_90 compile check: dy / x transforms of
F(3x3, 2x2) and F(3x3, 4x4) for NCHW and NHWC, the output transforms (fp32; any dw / KCRS-packed) (``wgrad_f3r*``), and the
batched GEMM in the wgrad layouts (mk x nk for NCHW, km x kn for NHWC) on the engine's 128x128x16
VEC=4 tile and the fast-mainloop 128x128x8 tile (``wgrad_gemm_*``)."""
import numpy as np

from ..pointwise import epilogue as ep
from ..gemm.cases import register_block_cases, register_compile_case
from ..gemm.config import GemmConfig
from ..gemm.gemm import gemm_args, make_gemm
from ..gemm.launch import signature
from . import wgrad as ww

MAX_REGS = 255


def _z():
    return np.zeros(1, np.float32)


def _own(kernel):
    getattr(kernel, "py_func", kernel).__module__ = __name__
    return kernel


def register_wgrad_cases():
    f = np.float32
    for r in (2, 4):
        for cfast in (False, True):
            lay = "nhwc" if cfast else "nchw"
            register_compile_case(f"wgrad_f3r{r}_dy_{lay}", _own(ww.make_dy(r, "float32", cfast)),
                                  signature((_z(), _z()) + (1,) * 11), max_registers=MAX_REGS)
            register_compile_case(f"wgrad_f3r{r}_x_{lay}", _own(ww.make_x(r, "float32", cfast)),
                                  signature((_z(), _z()) + (1,) * 13), max_registers=MAX_REGS)
        for packed in (False, True):
            register_compile_case(f"wgrad_f3r{r}_out" + ("_packed" if packed else ""), _own(ww.make_out(r, "float32", packed)),
                                  signature((_z(), _z()) + (1,) * 8 + (f(1), f(0))), max_registers=MAX_REGS)

    big = GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=16, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4)
    fast = big.replace(BLOCK_K=8, MAINLOOP="fast", MAX_REGS=128)
    for label, cfg in (("128x128x16", big), ("fast_128x128x8", fast)):
        for la, lb in (("mk", "nk"), ("km", "kn")):
            kern = make_gemm(cfg, la, lb, ("float32",) * 3, ep.EpilogueSpec())
            packed = gemm_args(kern, _z(), _z(), _z(), M=1, N=1, K=1, a_strides=(1, 1, 1, 1), b_strides=(1, 1, 1, 1),
                               c_strides=(1, 1, 1, 1), batch=(1, 1), bias=_z(), residual=_z())
            register_block_cases(f"wgrad_gemm_{label}_{la}_{lb}", kern.bk, packed, _z(), __name__)


if register_compile_case is not None:
    register_wgrad_cases()
