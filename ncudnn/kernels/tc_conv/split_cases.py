"""Split-K tensor-core conv partial kernels (fp32 workspace output, kernels/tc_conv/splitk.py) registered
with the sm_90 compile check (no spills, no local memory): conv_tc's tiles with the v4 mainloop, the first with v3,
and the first v4 tile as TF32 (FP32 x / w as uint16 halves). Imported
by ``python -m ncudnn.kernels.runtime.compile_check``; registering compiles nothing."""
from ..pointwise import epilogue as ep
from .cases import _BIAS_RELU, _BIAS_RELU_F32, signature
from .fprop import CONV_CONFIGS, make_tc_conv_fprop

try:
    from ..runtime.compile_check import register_compile_case
except ImportError:            # the registry is optional: without it nothing is registered
    register_compile_case = None

#: (case name, config, in dtype, EpilogueSpec, bias dtype, residual dtype); and the vector reduce
#: (tc_conv_splitk_reduce_vec_bf16_bias_relu)
TC_CONV_SPLIT_CASES = tuple((f"tc_conv_splitk_{c.BLOCK_M}x{c.BLOCK_N}_w{c.WARPS_M}x{c.WARPS_N}_ver{c.VERSION}",
                             c.replace(SPLIT_K=2), "bfloat16", _BIAS_RELU, "bfloat16", "bfloat16")
                            for c in [x.replace(VERSION=4) for x in CONV_CONFIGS] + [CONV_CONFIGS[0].replace(VERSION=3)])
TC_CONV_SPLIT_CASES += ((f"tc_conv_splitk_tf32_{CONV_CONFIGS[0].BLOCK_M}x{CONV_CONFIGS[0].BLOCK_N}_ver4",
                         CONV_CONFIGS[0].replace(VERSION=4, SPLIT_K=2), "float32", _BIAS_RELU_F32, "float32",
                         "float32"),)


def register_split_cases():
    for name, cfg, ind, epi, bias_dt, res_dt in TC_CONV_SPLIT_CASES:
        kern = make_tc_conv_fprop(cfg, ind, epi, bias_dt, res_dt)
        kern.kernel.py_func.__module__ = __name__
        # the partial kernel's output, bias and residual arrays are the fp32 workspace
        register_compile_case(name, kern.kernel, signature(ind, ep.EpilogueSpec(epi.steps, "float32"), "float32",
                                                           "float32"), max_registers=255, max_local_bytes=0)


def register_reduce_case():
    from ..runtime import dtypes as dt
    from .splitk import make_split_reduce_vec
    kern = make_split_reduce_vec(_BIAS_RELU, "bfloat16", "bfloat16")
    kern.py_func.__module__ = __name__
    arr = dt.array_sig
    sig = (f"void({arr('float32')}, int32, {arr('bfloat16')}, {arr('bfloat16')}, {arr('bfloat16')}, int32, int32, "
           + ", ".join(["int64"] * 5) + ", float32, float32)")
    register_compile_case("tc_conv_splitk_reduce_vec_bf16_bias_relu", kern, sig, max_registers=64, max_local_bytes=0)


if register_compile_case is not None:
    register_split_cases()
    register_reduce_case()
