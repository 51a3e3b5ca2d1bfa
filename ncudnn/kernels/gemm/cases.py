"""GPU-size GEMM configurations registered with the sm_90 compile check (no spills, no local memory).

Imported by ``python -m ncudnn.kernels.runtime.compile_check`` (it walks ncudnn/kernels/); registering only
builds the kernel objects and their signature text, nothing is compiled here.
"""
import numpy as np

from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from .config import CONFIGS, FAST_SKINNY, FAST_SMALL
from .gemm import gemm_args, make_gemm
from .launch import kernel_args, signature
from .transpose import make_pixels_last

try:
    from ..runtime.compile_check import register_compile_case
except ImportError:            # the registry is optional: without it nothing is registered
    register_compile_case = None

#: (case name, config, a_layout, b_layout, dtypes, epilogue)
def case_name(c):
    """Compile-case name of a config of CONFIGS ("gemm_f32_[fast_]BMxBNxBK_tTMxTN_vVEC")."""
    fast = "fast_" if c.MAINLOOP == "fast" else ""
    return f"gemm_f32_{fast}{c.BLOCK_M}x{c.BLOCK_N}x{c.BLOCK_K}_t{c.THREAD_M}x{c.THREAD_N}_v{c.VEC}"


FAST = next(c for c in CONFIGS if c.MAINLOOP == "fast")

GEMM_CASES = (
    [(case_name(c), c, "mk", "kn", ("float32",) * 3, ep.EpilogueSpec()) for c in CONFIGS]
    + [("gemm_fast_128x128_km_nk", FAST, "km", "nk", ("float32",) * 3, ep.EpilogueSpec()),
       ("gemm_fast_128x128_bias_relu_residual", FAST, "mk", "kn", ("float32",) * 3,
        ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))),
       ("gemm_fast_128x128_splitk4", FAST.replace(SPLIT_K=4), "mk", "kn", ("float32",) * 3,
        ep.EpilogueSpec())]
    + [("gemm_f32_128x128_km_nk", CONFIGS[0], "km", "nk", ("float32",) * 3, ep.EpilogueSpec()),
       ("gemm_f32_128x128_bias_relu_residual", CONFIGS[0], "mk", "kn", ("float32",) * 3,
        ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))),
       ("gemm_f32_128x128_gelu", CONFIGS[0], "mk", "kn", ("float32",) * 3,
        ep.EpilogueSpec((ep.pointwise(104),))),
       ("gemm_bf16_128x128", CONFIGS[0], "mk", "kn", ("bfloat16",) * 3, ep.EpilogueSpec()),
       ("gemm_f16_in_f32_out_128x128", CONFIGS[0], "mk", "nk", ("float16", "float16", "float32"),
        ep.EpilogueSpec()),
       ("gemm_f32_128x128_splitk4", CONFIGS[0].replace(SPLIT_K=4), "mk", "kn", ("float32",) * 3,
        ep.EpilogueSpec((ep.bias("col"), ep.relu()))),
       ("gemm_f32_128x128_splitk4_atomic", CONFIGS[0].replace(SPLIT_K=4, SPLIT_MODE="atomic"), "mk",
        "kn", ("float32",) * 3, ep.EpilogueSpec()),
       ("gemm_f64_64x64_t4x4", CONFIGS[5], "mk", "kn", ("float64",) * 3, ep.EpilogueSpec())]
    # the skinny-matmul fast tiles (engines/gemm/common.FAST_SKINNY_TILES) on row-major A and B
    + [(f"gemm_fast_{c.BLOCK_M}x{c.BLOCK_N}_t{c.THREAD_M}x{c.THREAD_N}_mk_kn", c, "mk", "kn", ("float32",) * 3,
        ep.EpilogueSpec()) for c in FAST_SKINNY]
    + [("gemm_fast_128x64_mk_kn_splitk4", FAST_SKINNY[0].replace(SPLIT_K=4, SWIZZLE=8), "mk", "kn",
        ("float32",) * 3, ep.EpilogueSpec()),
       ("gemm_fast_64x64_t8x4_mk_kn_splitk8", FAST_SKINNY[3].replace(SPLIT_K=8), "mk", "kn", ("float32",) * 3,
        ep.EpilogueSpec())])


#: 1x1 conv wgrad (engines/conv/gemm_1x1.py): NHWC one GEMM with both operands outer-fast ("km", "kn"),
#: NCHW per-image GEMMs (both k-fast: "mk", "nk") summed over the batch (sum_batch)
WGRAD_CASES = (
    [(f"gemm_fast_{c.BLOCK_M}x{c.BLOCK_N}_t{c.THREAD_M}x{c.THREAD_N}_km_kn", c, "km", "kn", False)
     for c in FAST_SMALL]
    + [("gemm_fast_64x64_mk_nk_sumbatch", FAST_SMALL[2], "mk", "nk", True),
       ("gemm_fast_128x128_km_kn_splitk", FAST.replace(SPLIT_K=2), "km", "kn", False)])


def _zeros(dtype):
    return np.zeros(1, dt.storage_dtype(dtype))


def register_gemm_cases():
    for name, cfg, al, bl, dts, spec in GEMM_CASES:
        kern = make_gemm(cfg, al, bl, dts, spec)
        packed = gemm_args(kern, _zeros(dts[0]), _zeros(dts[1]), _zeros(dts[2]), M=1, N=1, K=1,
                           a_strides=(1, 1), b_strides=(1, 1), c_strides=(1, 1),
                           bias=_zeros(dts[2]), residual=_zeros(dts[2]))
        ws = np.zeros(1, kern.ftype)
        register_block_cases(name, kern.bk, packed, ws)
    for name, cfg, al, bl, sum_batch in WGRAD_CASES:
        kern = make_gemm(cfg, al, bl, ("float32",) * 3, ep.EpilogueSpec(), sum_batch=sum_batch)
        z = _zeros("float32")
        packed = gemm_args(kern, z, z, z, M=1, N=1, K=1, a_strides=(1, 1), b_strides=(1, 1), c_strides=(1, 1),
                           bias=z, residual=z)
        register_block_cases(name, kern.bk, packed, np.zeros(1, kern.ftype))
    z = _zeros("float32")
    register_compile_case("pixels_last_f32", _owned(make_pixels_last(), __name__),
                          signature((z, z, 1, 1, 1, 1, 1, 1, 1)), max_registers=255)


def _owned(kernel, owner):
    """The compile check re-imports a case's module (taken from its function) in a fresh process to
    find the case: generated kernels are credited to the module that registers them."""
    getattr(kernel, "py_func", kernel).__module__ = owner
    return kernel


def register_block_cases(name, bk, packed, ws, owner=__name__):
    """Register a BlockKernels' main kernel (and its split-K reduce / prescale kernel)."""
    for k in (bk.kernel, getattr(bk, "reduce", None), getattr(bk, "reduce_wide", None),
              getattr(bk, "prescale", None)):
        if k is not None:
            _owned(k, owner)
    args = kernel_args(bk, *packed, 1.0, 0.0, ws)
    register_compile_case(name, bk.kernel, signature(args), max_registers=255,
                          max_local_bytes=bk.local_bytes)
    M, N, K, nb, a_args, b_args, o_args, bias_args, r_args = packed
    f = np.dtype(bk.ftype).type
    if bk.split and not bk.atomic:
        red_sig = signature((ws, 1, o_args, bias_args, r_args, 1, 1, 1, f(1), f(0)))
        register_compile_case(name + "_reduce", bk.reduce, red_sig, max_registers=255)
        register_compile_case(name + "_reduce_wide", bk.reduce_wide, red_sig, max_registers=255)
    elif bk.atomic:
        register_compile_case(name + "_prescale", bk.prescale, signature((o_args, 1, 1, 1, f(0))),
                              max_registers=255)


if register_compile_case is not None:
    register_gemm_cases()
