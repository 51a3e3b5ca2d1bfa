"""The strided-copy kernels' sm_90 compile cases (element and 16-byte word paths, within 64 registers).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing.
"""
from ..runtime.compile_check import register_compile_case
from ..runtime.dtypes import array_sig as a
from .strided_copy import CopySpec, build_copy


def register_cases():
    cases = {"memcpy_f32": CopySpec((8192, 8192), (8192, 1), (8192, 1)),
             "transpose_f32": CopySpec((8192, 8192), (8192, 1), (1, 8192)),
             "transpose_bf16_to_f32": CopySpec((64, 128, 256), (32768, 256, 1), (32768, 1, 128),
                                               "bfloat16", "float32"),
             "concat_piece_f16": CopySpec((64, 96, 1024), (96 * 1024, 1024, 1), (192 * 1024, 1024, 1),
                                          "float16", "float16", 0, 96 * 1024)}
    vec = {"memcpy16_f32": CopySpec((8192, 8192), (8192, 1), (8192, 1)),
           "slice16_bf16": CopySpec((64, 192, 4096), (256 * 4096, 4096, 1), (192 * 4096, 4096, 1),
                                    "bfloat16", "bfloat16", 32 * 4096, 0)}
    for name, spec in list(cases.items()) + list(vec.items()):
        ck = build_copy(spec, name in vec)
        xd = "int64" if ck.word else spec.x_dtype
        yd = "int64" if ck.word else spec.y_dtype
        register_compile_case(f"copy_{name}", ck.kernel, f"void({a(xd)}, {a(yd)}, int64, int64)",
                              max_registers=64)


register_cases()
