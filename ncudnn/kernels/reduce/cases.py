"""The strided reduction kernels' sm_90 compile cases (row, column, full and genstats reductions, scalar and
vectorized, with their combine kernels).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing.
"""
from ...types import cudnnReduceTensorOp_t as RO
from ..pointwise.spec import contiguous_strides as cs
from ..runtime.compile_check import register_compile_case
from .strided import _signatures, build_reduce, genstats_spec, reduce_spec


def register_cases():
    rows = (64, 4096)
    specs = {
        "reduce_row_add_f32": reduce_spec(RO.CUDNN_REDUCE_TENSOR_ADD, rows, "float32", cs(rows),
                                          (64, 1), "float32", (1, 0), block=512, split=2),
        "reduce_row_norm2_bf16": reduce_spec(RO.CUDNN_REDUCE_TENSOR_NORM2, rows, "bfloat16",
                                             cs(rows), (64, 1), "float32", (1, 0), block=256,
                                             split=1),
        "reduce_col_max_fp16": reduce_spec(RO.CUDNN_REDUCE_TENSOR_MAX, (4096, 64), "float16",
                                           cs((4096, 64)), (1, 64), "float16", (0, 1), block=8,
                                           split=32),
        "genstats_nchw_fp16": genstats_spec((32, 64, 56, 56), "float16", cs((32, 64, 56, 56)),
                                            block=512, split=16),
        "genstats_nhwc_bf16": genstats_spec((32, 56, 56, 64), "bfloat16", cs((32, 56, 56, 64)),
                                            channel_axis=3, block=8, split=256),
    }
    big = (8192, 32768)
    for name, (mode, out, kw) in {
        "reduce_vrow_add_f32_block": (RO.CUDNN_REDUCE_TENSOR_ADD, (8192, 1), dict(block=256, unroll=4, split=1)),
        "reduce_vrow_add_f32_warp": (RO.CUDNN_REDUCE_TENSOR_ADD, (8192, 1), dict(block=128, rows=4, unroll=4, split=1)),
        "reduce_vrow_add_f32_warp_u8": (RO.CUDNN_REDUCE_TENSOR_ADD, (8192, 1), dict(block=128, rows=4, unroll=8, split=1)),
        "reduce_vfull_amax_f32": (RO.CUDNN_REDUCE_TENSOR_AMAX, (1, 1), dict(block=256, unroll=4, split=528)),
        "reduce_vfull_amax_f32_u8": (RO.CUDNN_REDUCE_TENSOR_AMAX, (1, 1), dict(block=512, unroll=8, split=528)),
    }.items():
        specs[name] = reduce_spec(mode, big, "float32", cs(big), out, "float32", cs(out), vec=4, **kw)
    specs["reduce_vrow_norm2_bf16"] = reduce_spec(RO.CUDNN_REDUCE_TENSOR_NORM2, rows, "bfloat16", cs(rows),
                                                  (64, 1), "float32", (1, 0), vec=0, block=256, split=1)
    for name, spec in specs.items():
        k = build_reduce(spec)
        main_sig, comb_sig = _signatures(k)
        threads = k.threads if isinstance(k.threads, int) else k.threads[0] * k.threads[1]
        register_compile_case(name, k.main, main_sig, max_registers=min(255, 65536 // threads))
        if k.combine is not None:
            register_compile_case(name + "_combine", k.combine, comb_sig,
                                  max_registers=min(64, 65536 // k.combine_threads))


register_cases()
