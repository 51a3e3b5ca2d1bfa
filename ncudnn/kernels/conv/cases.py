"""GPU-size implicit-GEMM convolution configurations registered with the sm_90 compile check."""
import numpy as np

from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from ..gemm.cases import register_block_cases, register_compile_case
from ..gemm.config import CONFIGS
from .dgrad import make_conv_dgrad
from .fprop import make_conv_fprop
from .geometry import geometry
from .wgrad import make_conv_wgrad

BIG = CONFIGS[0]
BIAS_RELU_RES = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))


def _zeros(n, dtype="float32"):
    return np.zeros(n, dt.storage_dtype(dtype))


def register_conv_cases():
    g = geometry((1, 1, 1, 1), (1, 1, 1, 1))
    tab = np.zeros(5, np.int32)
    one = _zeros(1)
    fprop = {
        "conv_fprop_f32_nchw_precomp": make_conv_fprop(BIG),
        "conv_fprop_f32_nchw_implicit": make_conv_fprop(BIG, precomp=False),
        "conv_fprop_f32_nhwc_precomp": make_conv_fprop(BIG, order="rsc", a_fast="k"),
        "conv_fprop_f32_nhwc_bias_relu_residual": make_conv_fprop(BIG, epilogue=BIAS_RELU_RES,
                                                                  order="rsc", a_fast="k"),
        "conv_fprop_f32_nchw_128x64": make_conv_fprop(CONFIGS[2]),
        "conv_fprop_bf16_nhwc": make_conv_fprop(BIG, ("bfloat16",) * 3, order="rsc", a_fast="k"),
        "conv_fprop_f32_splitk4": make_conv_fprop(BIG.replace(SPLIT_K=4)),
    }
    for name, k in fprop.items():
        z = _zeros(1, k.dtypes[0])
        packed = k.pack(g, z, _zeros(1, k.dtypes[1]), _zeros(1, k.dtypes[2]), table=tab,
                        bias=one, residual=one)
        register_block_cases(name, k.bk, packed, one, __name__)
    dgrad = {
        "conv_dgrad_f32_nchw_s1": make_conv_dgrad(BIG, (1, 1, 1)),
        "conv_dgrad_f32_nchw_s2": make_conv_dgrad(BIG, (1, 2, 2)),
        "conv_dgrad_f32_nhwc_s1": make_conv_dgrad(BIG, (1, 1, 1), order="rsc", a_fast="k"),
    }
    for name, k in dgrad.items():
        gd = geometry((1, 1, 3, 3), (1, 1, 1, 1), stride=k.stride[1:])
        packed = k.pack(gd, _zeros(9), one, _zeros(9), table=tab, bias=one, residual=_zeros(9))
        register_block_cases(name, k.bk, packed, one, __name__)
    wgrad = {
        "conv_wgrad_f32_nchw": make_conv_wgrad(BIG),
        "conv_wgrad_f32_nchw_implicit": make_conv_wgrad(BIG, precomp=False),
        "conv_wgrad_f32_nchw_splitk8": make_conv_wgrad(BIG.replace(SPLIT_K=8)),
        "conv_wgrad_f32_nhwc_splitk8": make_conv_wgrad(BIG.replace(SPLIT_K=8), order="rsc",
                                                       a_fast="outer", b_fast="outer"),
    }
    for name, k in wgrad.items():
        register_block_cases(name, k.bk, k.pack(g, one, one, one, tab), one, __name__)


if register_compile_case is not None:
    register_conv_cases()
