"""Tensor-core conv fprop configurations registered with the sm_90 compile check (no spills, no local
memory): BF16 at mainloops v1 / v3 / v4, TF32 (FP32 x / w as uint16 halves, FP32 bias and output) at v4 and
the first config at v3. Imported by ``python -m ncudnn.kernels.runtime.compile_check``; registering compiles
nothing."""
from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from .fprop import CONV_CONFIGS, kernel_dtype, make_tc_conv_fprop

try:
    from ..runtime.compile_check import register_compile_case
except ImportError:            # the registry is optional: without it nothing is registered
    register_compile_case = None

_BIAS_RELU = ep.EpilogueSpec((ep.bias("col"), ep.relu()), "bfloat16")
#: (case name, config, in dtype, EpilogueSpec, bias dtype, residual dtype)
TC_CONV_CASES = tuple((f"tc_conv_bf16_bias_relu_{c.name}", c, "bfloat16", _BIAS_RELU, "bfloat16", "bfloat16")
                      for v in (1, 3, 4) for c in (x.replace(VERSION=v) for x in CONV_CONFIGS))
_BIAS_RELU_F32 = ep.EpilogueSpec((ep.bias("col"), ep.relu()), "float32")
#: the TF32 kernels the engine runs for FP32 graphs (v4 where C % 16 == 0: every ResNet layer but the stem)
TC_CONV_TF32_CASES = tuple((f"tc_conv_tf32_bias_relu_{c.name}", c, "float32", _BIAS_RELU_F32, "float32", "float32")
                           for c in [x.replace(VERSION=4) for x in CONV_CONFIGS] + [CONV_CONFIGS[0].replace(VERSION=3)])


def signature(in_dtype, epi, bias_dtype, res_dtype):
    arr = dt.array_sig
    in_dtype = kernel_dtype(in_dtype)     # FP32 (TF32): x / w storage as uint16 halves
    return (f"void({arr(in_dtype)}, {arr(in_dtype)}, {arr(epi.out_dtype)}, {arr(bias_dtype)}, {arr(res_dtype)}, "
            + ", ".join(["int32"] * 16) + ", " + ", ".join(["int64"] * 9) + ", float32, float32)")


def register_pad_case():
    from .pad import make_pad_channels
    kern = make_pad_channels()
    kern.py_func.__module__ = __name__
    register_compile_case("tc_conv_pad_channels_bf16", kern, "void(uint16[::1], uint16[::1], int64, int64, int64)",
                          max_registers=64, max_local_bytes=0)


def register_tc_conv_cases():
    for name, cfg, ind, epi, bias_dt, res_dt in TC_CONV_CASES + TC_CONV_TF32_CASES:
        kern = make_tc_conv_fprop(cfg, ind, epi, bias_dt, res_dt)
        kern.kernel.py_func.__module__ = __name__
        register_compile_case(name, kern.kernel, signature(ind, epi, bias_dt, res_dt), max_registers=255,
                              max_local_bytes=0)


if register_compile_case is not None:
    register_tc_conv_cases()
    register_pad_case()
