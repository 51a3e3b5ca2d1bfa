"""The softmax kernels' sm_90 compile cases (GPU-size rows: no spills, registers within the occupancy budget).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing.
"""
from ..runtime.compile_check import register_compile_case
from ..runtime.dtypes import array_sig as a, storage_dtype
from . import axis, persist


def _axis():
    for outer, n, inner, dt in ((4096, 1024, 1, "float16"),
                                (8192, 32768, 1, "float32"),
                                (8, 4096, 1, "float32"), (32, 64, 3136, "float16"),
                                (65536, 128, 1, "bfloat16")):
        for log in (False, True):
            tag = f"{'log' if log else ''}softmax_{outer}x{n}x{inner}_{dt}"
            k, (_, threads, _), _ = axis._fwd_kernel(outer, n, inner, log, 0, dt, dt)
            register_compile_case(f"{tag}_fwd", k, f"void({a(dt)}, {a(dt)}, int64)",
                                  max_registers=persist._reg_budget(threads))
            k, (_, threads, _), _ = axis._bwd_kernel(outer, n, inner, log, 0, dt, dt, dt)
            register_compile_case(f"{tag}_bwd", k, f"void({a(dt)}, {a(dt)}, {a(dt)}, int64)",
                                  max_registers=persist._reg_budget(threads))


def _persist():
    for n, dt, log, prefetch in ((32768, "float32", False, True), (32768, "float32", True, True),
                                 (32768, "bfloat16", False, True), (32768, "float32", False, False)):
        vec = 16 // storage_dtype(dt).itemsize
        k, threads, _, _ = persist.persist_kernel(n, log, vec, 0, prefetch, dt, dt)
        register_compile_case(f"{'log' if log else ''}softmax_persist{'_pf' if prefetch else ''}_{n}_{dt}", k,
                              f"void({a(dt)}, {a(dt)}, int64)", max_registers=persist._reg_budget(threads))


def register_cases():
    _axis()
    _persist()


register_cases()
