"""Tensor-core GEMM configurations registered with the sm_90 compile check (no spills, no local
memory). Imported by ``python -m ncudnn.kernels.compile_check``; registering compiles nothing."""
from .. import dtypes as dt
from .config import CONFIGS
from .kernel import make_tc_gemm

try:
    from ..compile_check import register_compile_case
except ImportError:            # the registry is optional: without it nothing is registered
    register_compile_case = None

#: (case name, config, a_kmajor, b_kmajor, in dtype, out dtype)
TC_GEMM_CASES = (
    [(f"tc_gemm_bf16_{c.name}_mk_kn", c, True, False, "bfloat16", "bfloat16") for c in CONFIGS]
    + [("tc_gemm_bf16_128x128_mk_nk_f32out", CONFIGS[0], True, True, "bfloat16", "float32"),
       ("tc_gemm_f16_128x128_km_kn", CONFIGS[0], False, False, "float16", "float16"),
       ("tc_gemm_f16_128x128_km_nk_f32out", CONFIGS[0], False, True, "float16", "float32")])


def signature(in_dtype, out_dtype):
    arr_in, arr_out = dt.array_sig(in_dtype), dt.array_sig(out_dtype)
    return (f"void({arr_in}, {arr_in}, {arr_out}, int32, int32, int32, int64, int64, int64, int64, "
            "int64, int64, int64, float32)")


def register_tc_gemm_cases():
    for name, cfg, ak, bk, ind, outd in TC_GEMM_CASES:
        kern = make_tc_gemm(cfg, ak, bk, ind, outd)
        kern.kernel.py_func.__module__ = __name__
        register_compile_case(name, kern.kernel, signature(ind, outd), max_registers=255,
                              max_local_bytes=0)


if register_compile_case is not None:
    register_tc_gemm_cases()
