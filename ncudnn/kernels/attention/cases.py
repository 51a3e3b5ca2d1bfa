"""sm_90 compile checks of the attention kernels (registers, spills, stack frame): the default configs of
head dim 128 in BF16 (the bench's shape) and, at head dim 64, every option compiled in at once (each
specialisation the simulator cannot type-check: shared-array shapes, loaders, mask branches).

No spills are allowed. The stack frame may hold the accumulator arrays and nothing more: NVVM keeps
``cuda.local.array`` accumulators indexed by a loop counter in local memory (the loops over them are
not unrolled). The tensor-core forward, generated with named registers, has no local-memory budget."""
from ..runtime.dtypes import array_sig
from .bwd import dbias_kernel, dkdv_kernel, dot_kernel, dq_kernel
from .config import default_config
from .fwd import fwd_kernel
from .spec import AttnSpec
from .tc_bwd import tc_bwd_default, tc_dkdv_kernel, tc_dq_kernel
from .tc_fwd import tc_default, tc_fwd_kernel


#: the dropout arguments every SDPA kernel ends with: seed, rng offset, p_keep, drop_scale
DROPOUT_SIG = ("int64", "int64", "float64", "float32")


def _sig(arrays, n_int, tail_float=1, n_int_tail=2, dropout=True):
    return "void(" + ", ".join([*arrays, *["int64"] * n_int, *["float32"] * tail_float,
                                *["int64"] * n_int_tail, *(DROPOUT_SIG if dropout else ())]) + ")"


def _register():
    try:
        from ..runtime.compile_check import register_compile_case
    except ImportError:
        return
    bf, f32, i32 = array_sig("bfloat16"), array_sig("float32"), array_sig("int32")
    d = 128
    spec = AttnSpec(d, d, Q="bfloat16", K="bfloat16", V="bfloat16", O="bfloat16", DO="bfloat16", DQ="bfloat16",
                    DK="bfloat16", DV="bfloat16")
    cfg, bcfg = default_config(d, d), default_config(d, d, backward=True)
    register_compile_case("attn_fwd_d128_bf16", fwd_kernel(spec, cfg),
                          _sig([bf, bf, bf, bf, f32, f32, i32, i32, f32], 5 + 16 + 3 + 4), max_registers=255,
                          max_local_bytes=4 * cfg.BLOCK_M * d // cfg.THREADS)
    sig = _sig([bf, bf, bf, bf, f32, f32, f32, i32, i32, f32, bf, bf, f32], 5 + 16 + 3 + 4 + 8)
    register_compile_case("attn_bwd_dkdv_d128_bf16", dkdv_kernel(spec, bcfg), sig, max_registers=255,
                          max_local_bytes=4 * bcfg.BLOCK_N * 2 * d // bcfg.THREADS)
    register_compile_case("attn_bwd_dq_d128_bf16", dq_kernel(spec, bcfg), sig, max_registers=255,
                          max_local_bytes=4 * bcfg.BLOCK_M * d // bcfg.THREADS)

    # the tensor-core forward keeps every accumulator and fragment in registers: no local memory at all
    tc = tc_default(("bfloat16",) * 3, d, d)
    register_compile_case("attn_tc_fwd_d128_bf16", tc_fwd_kernel(spec, tc),
                          _sig([bf, bf, bf, bf, f32, f32, i32, i32, f32], 5 + 16 + 3 + 4), max_registers=255,
                          max_local_bytes=0)
    fp16 = AttnSpec(64, 64, Q="float16", K="float16", V="float16", O="float16")
    h16 = array_sig("float16")
    register_compile_case("attn_tc_fwd_d64_f16_wide", tc_fwd_kernel(fp16, tc.replace(WARPS=8, BLOCK_N=64)),
                          _sig([h16, h16, h16, h16, f32, f32, i32, i32, f32], 5 + 16 + 3 + 4), max_registers=255,
                          max_local_bytes=0)

    # the element-copy twin (rows not 16-byte aligned) in FP16: the value's bits through a packed pair
    register_compile_case("attn_tc_fwd_d64_f16_element_copy",
                          tc_fwd_kernel(fp16, tc_default(("float16",) * 3, 64, 64).replace(ASYNC=False)),
                          _sig([h16, h16, h16, h16, f32, f32, i32, i32, f32], 5 + 16 + 3 + 4), max_registers=255,
                          max_local_bytes=0)

    # the tensor-core backward's two passes: the bench's shape, and every option it takes at head dim 64 in FP16
    # with element copies
    tb = tc_bwd_default(("bfloat16",) * 3, d, d)
    sig = _sig([bf, bf, bf, bf, f32, f32, f32, i32, i32, f32, bf, bf, f32], 5 + 16 + 3 + 4 + 8)
    bwd16 = AttnSpec(d, d, Q="bfloat16", K="bfloat16", V="bfloat16", O="bfloat16", DO="bfloat16", DQ="bfloat16",
                     DK="bfloat16", DV="bfloat16", STATS=False, HAS_RIGHT=True)
    for want in ("dk", "dv"):     # head dim 128: one kernel a gradient (split_dkdv)
        register_compile_case(f"attn_tc_bwd_{want}_d128_bf16", tc_dkdv_kernel(bwd16, tb, want), sig, max_registers=255,
                              max_local_bytes=0)
    register_compile_case("attn_tc_bwd_dq_d128_bf16", tc_dq_kernel(bwd16, tb), sig, max_registers=255,
                          max_local_bytes=0)
    opts = AttnSpec(64, 64, Q="float16", K="float16", V="float16", O="float16", DO="float16", DQ="float16",
                    DK="float16", DV="float16", BIAS="float16", SEQ="int32", SCALE="float16", ALIBI=True,
                    HAS_LEFT=True, HAS_RIGHT=True, BOTTOM_RIGHT=True, STATS=False)
    tb = tc_bwd_default(("float16",) * 3, 64, 64).replace(ASYNC=False)
    sig = _sig([h16, h16, h16, h16, f32, f32, h16, i32, i32, h16, h16, h16, f32], 5 + 16 + 3 + 4 + 8)
    register_compile_case("attn_tc_bwd_dkdv_d64_f16_options", tc_dkdv_kernel(opts, tb), sig, max_registers=255,
                          max_local_bytes=0)
    register_compile_case("attn_tc_bwd_dq_d64_f16_options", tc_dq_kernel(opts, tb), sig, max_registers=255,
                          max_local_bytes=0)

    # every option at once (bias and its gradient, padding, the scale in memory, ALiBi, a bottom-right band,
    # dropout)
    spec = AttnSpec(64, 64, Q="bfloat16", K="bfloat16", V="bfloat16", O="bfloat16", DO="bfloat16", DQ="bfloat16",
                    DK="bfloat16", DV="bfloat16", BIAS="bfloat16", DBIAS="bfloat16", SEQ="int32", SCALE="bfloat16",
                    ALIBI=True, HAS_LEFT=True, HAS_RIGHT=True, BOTTOM_RIGHT=True, DROPOUT=True)
    cfg, bcfg = default_config(64, 64), default_config(64, 64, backward=True)
    register_compile_case("attn_fwd_d64_bf16_all_options", fwd_kernel(spec, cfg),
                          _sig([bf, bf, bf, bf, f32, bf, i32, i32, bf], 5 + 16 + 3 + 4), max_registers=255,
                          max_local_bytes=4 * cfg.BLOCK_M * 64 // cfg.THREADS)
    register_compile_case("attn_tc_fwd_d64_bf16_all_options", tc_fwd_kernel(spec, tc_default(("bfloat16",) * 3, 64, 64)),
                          _sig([bf, bf, bf, bf, f32, bf, i32, i32, bf], 5 + 16 + 3 + 4), max_registers=255,
                          max_local_bytes=0)
    sig = _sig([bf, bf, bf, bf, f32, f32, bf, i32, i32, bf, bf, bf, f32], 5 + 16 + 3 + 4 + 8)
    register_compile_case("attn_bwd_dkdv_d64_bf16_all_options", dkdv_kernel(spec, bcfg), sig, max_registers=255,
                          max_local_bytes=4 * bcfg.BLOCK_N * 128 // bcfg.THREADS)
    register_compile_case("attn_bwd_dq_d64_bf16_all_options", dq_kernel(spec, bcfg), sig, max_registers=255,
                          max_local_bytes=4 * bcfg.BLOCK_M * 64 // bcfg.THREADS)
    register_compile_case("attn_bwd_dot_d64_bf16_padding", dot_kernel(spec),
                          _sig([bf, bf, f32, i32, i32], 4 + 8, 0, 0, False), max_registers=64, max_local_bytes=0)
    register_compile_case("attn_bwd_dbias_bf16_band", dbias_kernel(spec),
                          _sig([f32, bf, i32, i32], 4 + 4 + 4 + 2, 0, 0, False), max_registers=64, max_local_bytes=0)


_register()
