"""GPU-size Winograd kernels registered with the sm_90 compile check: the transform kernels of
F(2x2, 3x3) and F(4x4, 3x3) (NCHW / NHWC, fp32 / bf16, bias + relu epilogue), the batched GEMM
with the channels-last V operand ("mk" x "nk", 128x128x16 VEC=4) the non-fused engine runs, and the
fused F(2x2, 3x3) kernel at its two GPU block shapes."""
import numpy as np

from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from ..gemm.cases import register_block_cases, register_compile_case
from ..gemm.config import GemmConfig
from ..gemm.gemm import gemm_args, make_gemm
from ..gemm.launch import signature
from . import kernels as wk
from .fused import FusedConfig, make_fused

#: the engine's first tile (engines.gemm.tiles.BIG_TILES[0]): 128x128x16, 8x8 per thread, VEC=4
BIG = GemmConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=16, THREAD_M=8, THREAD_N=8, WARP_M=32, WARP_N=64, VEC=4,
                 UNROLL_K=2)
BIAS_RELU = ep.EpilogueSpec((ep.bias("col"), ep.relu()))
#: transform kernels: straight-line code, one tile per thread, no local memory
MAX_REGS = 255


def _z(dtype="float32"):
    return np.zeros(1, dt.storage_dtype(dtype))


def _own(kernel):
    getattr(kernel, "py_func", kernel).__module__ = __name__
    return kernel


def register_winograd_cases():
    f = np.float32
    for m in (2, 4):
        for wdt in ("float32", "bfloat16"):
            k = _own(wk.make_filter(m, wdt))
            register_compile_case(f"wino{m}_filter_{wdt}", k, signature((_z(wdt), _z(), 1, 1, 1, 0, 1, 1, 1, 1, 1)),
                                  max_registers=MAX_REGS)
        for cfast in (False, True):
            lay = "nhwc" if cfast else "nchw"
            k = _own(wk.make_input(m, "float32", cfast))
            register_compile_case(f"wino{m}_input_f32_{lay}", k,
                                  signature((_z(), _z(), 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)), max_registers=MAX_REGS)
            built = ep.build(BIAS_RELU, "float32", "float32")
            k = _own(wk.make_output(m, built, cfast))
            register_compile_case(f"wino{m}_output_f32_{lay}_bias_relu", k, signature(
                (_z(), _z(), _z(), _z(), 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, f(1), f(0))),
                max_registers=MAX_REGS)
    k = _own(wk.make_filter(2, "float32", kfast=True))
    register_compile_case("wino2_filter_float32_kfast", k, signature((_z(), _z(), 1, 1, 1, 0, 1, 1, 1, 1, 1)),
                          max_registers=MAX_REGS)
    built = ep.build(BIAS_RELU, "float32", "float32")
    for label, fc in (("32x32x8", FusedConfig(BK=32, BT=32, BC=8, TK=8, TT=8, IP=4)),
                      ("64x16x8", FusedConfig(BK=64, BT=16, BC=8, TK=8, TT=8, IP=2))):
        for cfast in (False, True):
            k = _own(make_fused(fc, "float32", built, cfast))
            register_compile_case(f"wino2_fused_{label}_f32_{'nhwc' if cfast else 'nchw'}_bias_relu", k, signature(
                (_z(), _z(), _z(), _z(), _z()) + (1,) * 11 + (1,) * 4 + (1,) * 4 + (1,) + (1,) * 4 + (f(1), f(0))),
                max_registers=255)
    kern = make_gemm(BIG, "mk", "nk", ("float32",) * 3, ep.EpilogueSpec())
    packed = gemm_args(kern, _z(), _z(), _z(), M=1, N=1, K=1, a_strides=(1, 1), b_strides=(1, 1),
                       c_strides=(1, 1), bias=_z(), residual=_z())
    register_block_cases("wino_gemm_f32_128x128x16_mk_nk", kern.bk, packed, _z(), __name__)


if register_compile_case is not None:
    register_winograd_cases()
