"""Tensor-core GEMM configurations registered with the sm_90 compile check (no spills, no local
memory). Imported by ``python -m ncudnn.kernels.runtime.compile_check``; registering compiles nothing."""
from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from ...types import cudnnPointwiseMode_t as PM
from .config import CONFIGS, TcGemmConfig
from .kernel import make_tc_gemm

try:
    from ..runtime.compile_check import register_compile_case
except ImportError:            # the registry is optional: without it nothing is registered
    register_compile_case = None

#: (case name, config, a_kmajor, b_kmajor, in dtype, out dtype)
TC_GEMM_CASES = (
    [(f"tc_gemm_bf16_{c.name}_mk_kn", c, True, False, "bfloat16", "bfloat16") for c in CONFIGS]
    + [("tc_gemm_bf16_128x128_mk_nk_f32out", CONFIGS[0], True, True, "bfloat16", "float32"),
       ("tc_gemm_f16_128x128_km_kn", CONFIGS[0], False, False, "float16", "float16"),
       ("tc_gemm_f16_128x128_km_nk_f32out", CONFIGS[0], False, True, "float16", "float32")]
    + [(f"tc_gemm_bf16_{c.name}_v3_mk_kn", c.replace(VERSION=3), True, False, "bfloat16", "bfloat16")
       for c in CONFIGS])


#: fused kernels (engine matmul_tc): (case name, config, a_kmajor, b_kmajor, in dtype, EpilogueSpec, bias, res)
_BIAS_RELU = ep.EpilogueSpec((ep.bias("col"), ep.relu()), "bfloat16")
_RES_GELU = ep.EpilogueSpec((ep.bias("row"), ep.pointwise(PM.CUDNN_POINTWISE_GELU_FWD), ep.residual()), "float16")
TC_FUSED_CASES = (
    [(f"tc_fused_bf16_bias_relu_{c.name}_mk_kn", c, True, False, "bfloat16", _BIAS_RELU, "bfloat16", "bfloat16")
     for c in CONFIGS[:4]]
    + [("tc_fused_f16_gelu_res_128x128_km_nk", CONFIGS[0], False, True, "float16", _RES_GELU, "float16",
        "float16"),
       ("tc_fused_bf16_linear_f32out_128x256_mk_nk", CONFIGS[1], True, True, "bfloat16",
        ep.EpilogueSpec((), "float32"), "float32", "float32"),
       ("tc_fused_tf32_bias_relu_128x128x16_mk_nk", CONFIGS[0].replace(BLOCK_K=16), True, True, "float32",
        ep.EpilogueSpec((ep.bias("col"), ep.relu()), "float32"), "float32", "float32")]
    + [(f"tc_fused_bf16_bias_relu_{c.name}_v3_mk_kn", c.replace(VERSION=3), True, False, "bfloat16", _BIAS_RELU,
        "bfloat16", "bfloat16") for c in CONFIGS[:4]]
    + [("tc_fused_tf32_bias_relu_128x128x16_v3_mk_nk", CONFIGS[0].replace(BLOCK_K=16, VERSION=3), True, True,
        "float32", ep.EpilogueSpec((ep.bias("col"), ep.relu()), "float32"), "float32", "float32")])

#: FP8 with the amax output: (case name, config (BLOCK_K in FP8 elements), fp8 dtype, EpilogueSpec)
TC_FP8_CASES = (
    ("tc_fused_e4m3_scale_amax_128x128x64_w2x4_mk_nk", TcGemmConfig(128, 128, 64, 2, 4, 4), "float8_e4m3fn",
     ep.EpilogueSpec((ep.scale(2.0),), "float8_e4m3fn")),
)


def fused_signature(in_dtype, epi, bias_dtype, res_dtype):
    arr = dt.array_sig
    return (f"void({arr(in_dtype)}, {arr(in_dtype)}, {arr(epi.out_dtype)}, {arr(bias_dtype)}, {arr(res_dtype)}, "
            "int32, int32, int32, " + ", ".join(["int64"] * 17) + ", float32, float32)")


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
    for name, cfg, ak, bk, ind, epi, bias_dt, res_dt in TC_FUSED_CASES:
        kern = make_tc_gemm(cfg, ak, bk, ind, epi=epi, bias_dtype=bias_dt, res_dtype=res_dt)
        kern.kernel.py_func.__module__ = __name__
        halves = "bfloat16" if ind == "float32" else ind     # TF32 operands arrive as 16-bit halves
        register_compile_case(name, kern.kernel, fused_signature(halves, epi, bias_dt, res_dt), max_registers=255,
                              max_local_bytes=0)
    for name, cfg, fp8, epi in TC_FP8_CASES:
        kern = make_tc_gemm(cfg, True, True, fp8, epi=epi, amax=True)
        kern.kernel.py_func.__module__ = __name__
        sig = fused_signature("bfloat16", epi, "float32", "float32")[:-1] + ", float32[::1])"
        register_compile_case(name, kern.kernel, sig, max_registers=255, max_local_bytes=0)


if register_compile_case is not None:
    register_tc_gemm_cases()
