"""The norm kernels' sm_90 compile cases (GPU-size geometries: no spills, registers within the occupancy budget).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing. Registering builds the kernel
objects and their signature text, nothing is compiled here; each case stays credited to the kernel module
whose factory made it.
"""
from ..runtime.compile_check import register_compile_case
from ..runtime.dtypes import array_sig as a, storage_dtype
from . import (bn_cols, bn_colsv, bn_fin, bn_generic, bn_persist, bn_planes, row, row_bwd, row_dparams, row_fwd_pipe,
               row_strided)

F32, F64 = a("float32"), a("float64")


def _bn_cols():
    f = F32
    for dt in ("float32", "bfloat16"):
        x = a(dt)
        register_compile_case(f"bn_cols_partial_fwd_{dt}", bn_cols.partial_kernel(256, dt)[0],
                              f"void({x}, {x}, {f}, {F64}, {F64}, int64, int64)", max_registers=48)
        register_compile_case(f"bn_cols_partial_bwd_{dt}", bn_cols.partial_kernel(256, dt, dt)[0],
                              f"void({x}, {x}, {f}, {f}, {f}, int64, int64)", max_registers=64)
        register_compile_case(f"bn_cols_apply_fwd_{dt}", bn_cols.apply_kernel(256, dt, dt, shifted=True)[0],
                              f"void({x}, {x}, {f}, {f}, {f}, {x}, int64)", max_registers=32)
        register_compile_case(f"bn_cols_apply_bwd_{dt}", bn_cols.apply_kernel(256, dt, dt, dt)[0],
                              f"void({x}, {x}, {f}, {f}, {f}, {x}, int64)", max_registers=40)
    register_compile_case("bn_cols_combine", bn_cols.combine_kernel("float32"),
                          f"void({f}, {f}, {f}, {f}, int64, int64)", max_registers=64)


def _bn_colsv():
    f, d, k = F32, F64, bn_colsv
    sig7 = f"void({f}, {f}, {f}, {f}, {f}, int64, int64)"
    sig8 = f"void({f}, {f}, {f}, {f}, {f}, {f}, int64, int64)"
    register_compile_case("bn_colsv_partial_fwd", k.partial_kernel(256, "float32")[0],
                          f"void({f}, {f}, {f}, {d}, {d}, int64, int64)", max_registers=k.FWD_PARTIAL_REGS)
    register_compile_case("bn_colsv_partial_bwd", k.partial_kernel(256, "float32", "float32")[0], sig7,
                          max_registers=64)
    register_compile_case("bn_colsv_apply_fwd", k.apply_kernel(256, "float32", "float32", shifted=True)[0], sig8,
                          max_registers=48)
    register_compile_case("bn_colsv_combine", k.combine_kernel()[0], f"void({f}, {f}, {f}, {f}, int64, int64)",
                          max_registers=40)
    register_compile_case("bn_colsv_combine_fwd", k.combine_kernel("float64")[0],
                          f"void({d}, {d}, {d}, {d}, int64, int64)", max_registers=48)
    register_compile_case("bn_colsv_apply_bwd", k.apply_kernel(256, "float32", "float32", "float32")[0], sig8,
                          max_registers=64)
    register_compile_case("bn_colsv_partial_bwd_gtail", k.partial_kernel(256, "float32", "float32", gtail=True)[0],
                          sig7, max_registers=64)
    register_compile_case("bn_colsv_apply_bwd_gtail",
                          k.apply_kernel(256, "float32", "float32", "float32", gtail=True)[0], sig8, max_registers=64)
    register_compile_case("bn_colsv_apply_fwd_gtail",
                          k.apply_kernel(256, "float32", "float32", shifted=True, k_in_e2=True, gtail=True)[0], sig8,
                          max_registers=48)


def _bn_fin():
    f = F32
    dense = ("float32", 0, 1)
    fin_arrays, bwd_arrays = (dense,) * len(bn_fin.FINALIZE_ARRAYS), (dense,) * len(bn_fin.BWD_ARRAYS)
    written = frozenset({"saved_mean", "saved_inv", "next_mean", "next_var"})
    fin_sig = ("void(" + ", ".join([f] * (3 + len(bn_fin.FINALIZE_ARRAYS)))
               + ", int64, int64, float64, float64, float64)")
    bwd_sig = "void(" + ", ".join([f] * (2 + len(bn_fin.BWD_ARRAYS))) + ", int64, int64, float64)"
    register_compile_case("bn_fin_fwd", bn_fin.fin_kernel(fin_arrays, written)[0], fin_sig, max_registers=64)
    register_compile_case("bn_fin_bwd", bn_fin.bwd_kernel(bwd_arrays)[0], bwd_sig, max_registers=64)
    for cpb in (8, 4):
        lanes, nper = bn_fin.tree_geometry(264, cpb)
        register_compile_case(f"bn_fin_bwd_tree{cpb}", bn_fin.bwd_kernel(bwd_arrays, lanes, 4, cpb, nper)[0], bwd_sig,
                              max_registers=64)
    lanes, nper = bn_fin.tree_geometry(330, 4)
    register_compile_case("bn_fin_fwd_tree4", bn_fin.fin_kernel(fin_arrays, written, (), lanes, 4, 4, nper)[0],
                          fin_sig, max_registers=64)


def _bn_generic():
    f, k = F32, bn_generic
    register_compile_case("bn_finalize_fwd", k._finalize_fwd_kernel("float32", "float32", "float32", True, True),
                          f"void({', '.join([f] * 10)}, int64, int64, int64, int64, int64, float64, float64)",
                          max_registers=128)
    register_compile_case("bn_finalize_bwd", k._finalize_bwd_kernel("float32", "float32", "float32"),
                          f"void({', '.join([f] * 10)}, int64, int64, int64, int64, int64)", max_registers=128)
    register_compile_case("bn_channel_sum", k._channel_sum_kernel("float32", "float32"),
                          f"void({f}, {f}, int64, int64)", max_registers=128)
    register_compile_case("bn_inference_coeff", k._inference_coeff_kernel("float32", "float32"),
                          f"void({', '.join([f] * 6)}, int64, float64)", max_registers=128)


def _bn_persist():
    k = bn_persist
    dense = (("float32", 0, 1),) * len(k.CHANNEL_ARRAYS)
    thread_columns = 64    # the engine's kernels: the inline barrier (no device-runtime call: no stack at all)
    for threads, nr, ns, u, ac, pf in (k.PERSIST_CASES[i] for i in k.COMPILE_CASES):
        kern = k.persist_bwd_kernel(256, dense, thread_columns, threads // thread_columns, 1, nr, ns, u, 2, True, ac,
                                    0, True, pf, True)[0]
        register_compile_case(f"bn_persist_bwd_t{threads}_r{nr}_s{ns}_u{u}{'_cp' if ac else ''}_pf{pf}_gbar", kern,
                              k.signature(dense, True), max_registers=65536 // threads, max_local_bytes=0)


def _bn_planes():
    f, d, k = F32, F64, bn_planes
    C, HW = 256, 56 * 56
    T = k.threads_for(HW)
    for dt in ("float32", "bfloat16"):
        x = a(dt)
        register_compile_case(f"bn_planes_partial_fwd_{dt}", k.partial_kernel(C, HW, C * HW, T, dt)[0],
                              f"void({x}, {x}, {f}, {d}, {d}, int64, int64)", max_registers=40)
        register_compile_case(f"bn_planes_partial_bwd_{dt}", k.partial_kernel(C, HW, C * HW, T, dt, dt)[0],
                              f"void({x}, {x}, {f}, {f}, {f}, int64, int64)", max_registers=48)
        register_compile_case(f"bn_planes_apply_fwd_{dt}", k.apply_kernel(C, HW, C * HW, T, dt, dt, shifted=True)[0],
                              f"void({x}, {x}, {f}, {f}, {f}, {x}, int64)", max_registers=32)
        register_compile_case(f"bn_planes_apply_bwd_{dt}", k.apply_kernel(C, HW, C * HW, T, dt, dt, dt)[0],
                              f"void({x}, {x}, {f}, {f}, {f}, {x}, int64)", max_registers=40)


def _row():
    f = F32
    for n, dt in ((4096, "bfloat16"), (768, "float16"), (8192, "float32"), (32768, "float32"),
                  (128, "bfloat16"), (4096, "float32"), (1024, "float32"), (16384, "float32")):
        threads, blk, vpt, rpb = row.row_config(n)
        b_threads, b_blk, b_vpt, b_rpb = row.row_config(n, vpt_max=row.BWD_VPT_MAX)
        for rms in (False, True):
            tag = f"{'rms' if rms else 'layer'}norm_{n}_{dt}"
            k, _ = row.row_fwd_kernel(n, blk, vpt, not rms, True, True, dt, "float32", dt, "float32", rpb)
            register_compile_case(f"{tag}_fwd", k, f"void({a(dt)}, {f}, {f}, {a(dt)}, {f}, {f}, float64, int64)",
                                  max_registers=min(255, 65536 // threads))
            k, _ = row.row_bwd_kernel(n, b_blk, b_vpt, not rms, dt, dt, "float32", dt, "float32", b_rpb)
            register_compile_case(f"{tag}_bwd", k, f"void({a(dt)}, {a(dt)}, {f}, {f}, {f}, {a(dt)}, int64)",
                                  max_registers=min(128, 65536 // b_threads))


def _row_bwd():
    f, k = F32, row_bwd
    for n, dt, stages in ((1024, "float32", 1), (4096, "float32", 1), (1024, "float32", 2), (4096, "float32", 2),
                          (4096, "bfloat16", 1), (1022, "float32", 1), (1022, "float32", 2)):
        vec = k.fused_vec(n, [storage_dtype(dt).itemsize, 4])
        cfg = k.fused_config(n, 8192, 132, vec, stages=stages)
        for center in (True, False):
            x = a(dt)
            kern, _ = k.fused_bwd_kernel(n, cfg.block, cfg.vpt, cfg.vec, cfg.rows, center, dt, dt, "float32", dt,
                                         "float32", cfg.stages, k.reg_cap(cfg))
            register_compile_case(f"row_bwd_fused_{'layer' if center else 'rms'}_{n}_{dt}_s{stages}", kern,
                                  f"void({x}, {x}, {f}, {f}, {f}, {x}, {f}, {f}, int64)", max_registers=k.reg_cap(cfg))


def _row_dparams():
    f, k = F32, row_dparams
    for n, dt in ((4096, "float32"), (1024, "float32"), (4096, "bfloat16")):
        for center in (True, False):
            x = a(dt)
            register_compile_case(f"row_dparams_{'layer' if center else 'rms'}_{n}_{dt}",
                                  k.dparams_partial_kernel(n, dt, dt, "float32", center)[0],
                                  f"void({x}, {x}, {f}, {f}, {f}, {f}, int64, int64)",
                                  max_registers=65536 // (k.TX * k.TY * k.BLOCKS_PER_SM))


def _row_fwd_pipe():
    k = row_fwd_pipe
    for n, w, s, bps, center, bias, stats, params, cs, hint, hint_y in k.COMPILE_CASES:
        kern = k.row_fwd_pipe_kernel(n, w, s, center, bias, True, stats=stats, params=params, cs=cs, bps=bps,
                                     hint=hint, hint_y=hint_y)[0]
        register_compile_case(f"norm_row_pipe_{'ln' if center else 'rms'}_n{n}_w{w}_s{s}_b{bps}_{stats}_{params}"
                              f"{'_cs' if cs else ''}{'_' + hint if hint else ''}{'' if hint_y else '_x_only'}", kern,
                              k.signature(), max_registers=65536 // (w * 32 * bps), max_local_bytes=0)


#: the strided kernels' compile cases: (dims, X's strides, the others' (Y / DY / DX), the parameters', dtype)
STRIDED_CASES = (((8192, 1024), (1032, 1), (1024, 1), (1024, 1), "float32"),
                 ((64, 32, 14, 14), (6272, 1, 448, 32), (6272, 196, 14, 1), (6272, 1, 448, 32), "bfloat16"),
                 ((4096, 16, 512), (512, 2097152, 1), (8192, 512, 1), (8192, 512, 1), "float16"))


def _row_strided():
    f, k = F32, row_strided
    for dims, xs, os_, ps, dt in STRIDED_CASES:
        n, inner, x, st = 1, tuple(dims[1:]), a(dt), (1,) * len(dims)
        for d in inner:
            n *= d
        threads = k.strided_config(n)[0]
        for center in (True, False):
            tag = f"row_strided_{'layer' if center else 'rms'}_{'x'.join(map(str, dims))}_{dt}"
            kern = k.strided_fwd_kernel(n, inner, (xs, ps, ps, os_, st, st), center, True, True, dt, "float32", dt,
                                        "float32")[0]
            register_compile_case(f"{tag}_fwd", kern, f"void({x}, {f}, {f}, {x}, {f}, {f}, float64, int64)",
                                  max_registers=min(255, 65536 // threads))
            kern = k.strided_bwd_kernel(n, inner, (xs, os_, ps, st, st, os_), center, dt, dt, "float32", dt,
                                        "float32")[0]
            register_compile_case(f"{tag}_bwd", kern, f"void({x}, {x}, {f}, {f}, {f}, {x}, int64)",
                                  max_registers=min(255, 65536 // threads))
            kern = k.dparams_partial_kernel(n, inner, (xs, os_, st, st), center, dt, dt, "float32")[0]
            register_compile_case(f"{tag}_dparams", kern, f"void({x}, {x}, {f}, {f}, {f}, {f}, int64, int64)",
                                  max_registers=64)
        kern = k.dparams_combine_kernel(n, inner, (ps, ps), "float32", "float32", "float32", True, True)[0]
        register_compile_case(f"row_strided_combine_{'x'.join(map(str, dims))}", kern,
                              f"void({f}, {f}, {f}, {f}, int64)", max_registers=64)


#: adaptive layer norm on the strided kernels: (row dims (B, S), normalized dims, X's dtype); X [B, S, C] dense,
#: SCALE / BIAS [B, 1, C] (stride 0 on S), statistics [B, S, 1]
ADA_CASES = (((16, 256), (768,), "bfloat16"), ((4, 32), (4100,), "float16"))


def _row_strided_ada():
    f, k = F32, row_strided
    for outer, inner, dt in ADA_CASES:
        n, x = 1, a(dt)
        for d in inner:
            n *= d
        xs = (outer[1] * n, n, 1)
        ps, st = (n, 0, 1), (outer[1], 1, 0)
        threads = k.strided_config(n)[0]
        tag = f"row_strided_ada_{'x'.join(map(str, outer + inner))}_{dt}"
        kern = k.strided_fwd_kernel(n, inner, (xs, ps, ps, xs, st, st), True, True, True, dt, "float32", dt,
                                    "float32", None, outer)[0]
        register_compile_case(f"{tag}_fwd", kern, f"void({x}, {f}, {f}, {x}, {f}, {f}, float64, int64)",
                              max_registers=min(255, 65536 // threads))
        kern = k.strided_bwd_kernel(n, inner, (xs, xs, ps, st, st, xs), True, dt, dt, "float32", dt, "float32",
                                    outer)[0]
        register_compile_case(f"{tag}_bwd", kern, f"void({x}, {x}, {f}, {f}, {f}, {x}, int64)",
                              max_registers=min(255, 65536 // threads))
        kern = k.dparams_partial_kernel(n, inner, (xs, xs, st, st), True, dt, dt, "float32", outer,
                                        (4, outer[1]))[0]
        register_compile_case(f"{tag}_dparams", kern, f"void({x}, {x}, {f}, {f}, {f}, {f}, int64, int64)",
                              max_registers=64)
        kern = k.dparams_combine_kernel(n, inner, (ps, ps), "float32", "float32", "float32", True, True,
                                        len(outer))[0]
        register_compile_case(f"{tag}_combine", kern, f"void({f}, {f}, {f}, {f}, int64)", max_registers=64)


def register_cases():
    for family_part in (_bn_cols, _bn_colsv, _bn_fin, _bn_generic, _bn_persist, _bn_planes, _row, _row_bwd,
                        _row_dparams, _row_fwd_pipe, _row_strided, _row_strided_ada):
        family_part()


register_cases()
