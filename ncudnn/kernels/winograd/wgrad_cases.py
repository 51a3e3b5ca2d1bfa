"""The Winograd wgrad kernels (wgrad.py) registered with the sm_90 compile check: dy / x transforms of
F(3x3, 2x2) and F(3x3, 4x4) for NCHW and NHWC, and the output transforms (fp32). Named ``wgrad_*``."""
import numpy as np

from ..gemm.cases import register_compile_case
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
        register_compile_case(f"wgrad_f3r{r}_out", _own(ww.make_out(r)),
                              signature((_z(), _z()) + (1,) * 8 + (f(1), f(0))), max_registers=MAX_REGS)


if register_compile_case is not None:
    register_wgrad_cases()
