"""The wgmma GEMM's vector epilogue: the staged f32 tile to C in 16-byte coalesced stores.

``emit(w, cfg, epi, bias_expr, res_expr)`` writes the kernel lines that follow the staged tile (f32,
rows of ``BLOCK_N + STAGE_PAD`` in ``smf`` from float offset ``fe``). Each thread owns a column group of
``vec = 16 / itemsize(C)`` consecutive outputs (8 for BF16 / FP16, 4 for FP32) and walks the tile's rows,
``threads / (BLOCK_N / vec)`` rows apart; a warp covers 32 consecutive groups (512 contiguous bytes of a C row
at BLOCK_N 256). Per group: the vec staged floats in 16-byte shared loads (BF16 / FP16: the two halves in
a lane-dependent order, so that the 8 lanes of each quarter-warp hit distinct banks), the epilogue chain
per value (:func:`value_fn`: alpha / beta, bias, pointwise, residual, no store), the values packed
(``cvt.rn.bf16x2`` / ``f16x2``) and one ``st.global.v4.b32``.

The vector path runs when C allows it (checked once per block at run time: unit column stride, row and
batch strides multiples of vec, C 16-byte aligned); a column group straddling N is stored element by
element through the storing epilogue, and other C layouts take the element walk (one output per thread
per step, consecutive threads on consecutive columns).

Device helpers: ``lds4(arr, i)`` -> 4 float32 (one 16-byte load of a 1-D float32 shared array at a
16-byte aligned index), ``stg4(arr, i, w0, w1, w2, w3)`` (four uint32 or four float32 words to a 1-D
16- or 32-bit global array at ``arr[i]``, one 16-byte store; the caller guarantees the alignment),
``stg4cs`` (the same store with the ``.cs`` evict-first hint: C is written once, A / B stay in L2).
Under the CUDA simulator they are element-wise Python.
"""
from numba import cuda

from ...platform import simulator_enabled
from ..runtime import dtypes
from ..pointwise import ops as pointwise_ops
from ..pointwise import epilogue as epilogue_steps
from ..gemm.vec import addr as vaddr

__all__ = ["lds4", "stg4", "stg4cs", "vaddr", "value_fn", "vec_width", "emit", "emit_scalar_walk", "emit_packed"]

SIM = simulator_enabled()

if SIM:
    import numpy as np

    def lds4(arr, i):
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    def stg4(arr, i, w0, w1, w2, w3):
        words = [w0, w1, w2, w3]
        kind = np.float32 if isinstance(w0, (float, np.floating)) else np.uint32
        vals = np.array([kind(x) if kind is np.float32 else int(x) & 0xFFFFFFFF for x in words], kind)
        view = vals.view(np.asarray(getattr(arr, "_ary", arr)).dtype)
        for j in range(view.shape[0]):
            arr[i + j] = view[j]

    stg4cs = stg4
else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    from ..runtime.llvm_ptr import item_ptr as _ptr

    @intrinsic
    def _lds4(typingctx, arr, i):
        if not isinstance(arr, types.Array) or arr.dtype != types.float32 or arr.ndim != 1:
            return None
        sig = types.UniTuple(types.float32, 4)(arr, i)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            v4 = ir.VectorType(ir.FloatType(), 4)
            vec = builder.load(builder.bitcast(ptr, v4.as_pointer(ptr.type.addrspace)), align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    @intrinsic
    def _stg4(typingctx, arr, i, w0, w1, w2, w3):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype.bitwidth not in (16, 32):
            return None
        if w0 not in (types.uint32, types.float32) or any(w != w0 for w in (w1, w2, w3)):
            return None
        sig = types.void(arr, i, w0, w1, w2, w3)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            gptr = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, 1))
            et = ir.FloatType() if sig.args[2] == types.float32 else ir.IntType(32)
            v4 = ir.VectorType(et, 4)
            vec = ir.Constant(v4, ir.Undefined)
            for j in range(4):
                vec = builder.insert_element(vec, args[2 + j], ir.Constant(ir.IntType(32), j))
            builder.store(vec, builder.bitcast(gptr, v4.as_pointer(1)), align=16)
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _stg4cs(typingctx, arr, i, w0, w1, w2, w3):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype.bitwidth not in (16, 32):
            return None
        if w0 not in (types.uint32, types.float32) or any(w != w0 for w in (w1, w2, w3)):
            return None
        sig = types.void(arr, i, w0, w1, w2, w3)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            i32 = ir.IntType(32)
            vals = [args[2 + j] if sig.args[2] == types.uint32 else builder.bitcast(args[2 + j], i32)
                    for j in range(4)]
            fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32, i32])
            asm = ir.InlineAsm(fnty, "st.global.cs.v4.b32 [$0], {$1, $2, $3, $4};", "l,r,r,r,r,~{memory}",
                               side_effect=True)
            builder.call(asm, [ptr] + vals)
            return context.get_dummy_value()
        return sig, codegen

    @cuda.jit(device=True, inline=True)
    def lds4(arr, i):
        return _lds4(arr, i)

    @cuda.jit(device=True, inline=True)
    def stg4cs(arr, i, w0, w1, w2, w3):
        _stg4cs(arr, i, w0, w1, w2, w3)

    @cuda.jit(device=True, inline=True)
    def stg4(arr, i, w0, w1, w2, w3):
        _stg4(arr, i, w0, w1, w2, w3)


_CACHE = {}


def value_fn(spec, bias_dtype="float32", res_dtype="float32"):
    """Device function ``f(v, out, o_off, bias, b_off, res, r_off, alpha, beta) -> float32``: the chain of
    the f32 EpilogueSpec ``spec`` (alpha, beta * out[o_off] when beta != 0, its steps) without the store."""
    key = (spec, dtypes.dtype_name(bias_dtype), dtypes.dtype_name(res_dtype))
    if key in _CACHE:
        return _CACHE[key]
    L = ["def epv(v, out, o_off, bias, b_off, res, r_off, alpha, beta):",
         "    v = float32(alpha) * v",
         "    if beta != 0:",
         "        v = v + float32(beta) * ld_out(out, o_off)"]
    L += epilogue_steps.step_lines(spec, "float32")
    L.append("    return float32(v)")
    g = dict(pointwise_ops.expr_globals())
    g.update(ld_out=dtypes.loader(spec.out_dtype, "float32"), ld_bias=dtypes.loader(key[1], "float32"),
             ld_res=dtypes.loader(key[2], "float32"))
    exec(compile("\n".join(L) + "\n", "<wgmma value epilogue>", "exec"), g)
    fn = cuda.jit(device=True, inline=True)(g["epv"])
    _CACHE[key] = fn
    return fn


def vec_width(out_dtype):
    """Outputs per 16-byte store: 8 for BF16 / FP16, 4 for FP32."""
    return 16 // (4 if dtypes.dtype_name(out_dtype) == "float32" else 2)


#: pack of two f32 values into one 32-bit word of C, per output type
PACK = {"bfloat16": "ptx.pack_bf16x2", "float16": "ptx.pack_f16x2"}


def emit_scalar_walk(w, cfg, ind, bias_expr, res_expr, stage_row):
    """The element walk: consecutive threads on consecutive columns, ``epi`` (storing) per output."""
    BM, BN, threads = cfg.BLOCK_M, cfg.BLOCK_N, cfg.threads
    w(f"{ind}for e in range(tid, {BM * BN}, {threads}):")
    w(f"{ind}    rl = e // {BN}")
    w(f"{ind}    cl = e - rl * {BN}")
    w(f"{ind}    rr = m0 + rl")
    w(f"{ind}    cc = n0 + cl")
    w(f"{ind}    if (rr < M) & (cc < N):")
    w(f"{ind}        v = smf[fe + rl * {stage_row} + cl]")
    w(f"{ind}        epi(v, c, zc + int64(rr) * ldc_m + int64(cc) * ldc_n, bias, {bias_expr('rr', 'cc')}, res, "
      f"{res_expr('rr', 'cc')}, alpha, beta)")


def emit(w, cfg, out_dtype, bias_expr, res_expr, stage_row):
    """Kernel lines of the epilogue after the staged tile: the vector path when C allows it, else the
    element walk. ``bias_expr(r, c)`` / ``res_expr(r, c)``: source of the bias / residual offsets of
    output (r, c); ``stage_row``: the staged row stride in floats. ``cfg.EPI`` 2: ``.cs`` (evict-first) stores."""
    st = "stg4cs" if cfg.EPI == 2 else "stg4"
    BM, BN, threads = cfg.BLOCK_M, cfg.BLOCK_N, cfg.threads
    out = dtypes.dtype_name(out_dtype)
    vec = vec_width(out)                # outputs per column group (one 16-byte store)
    groups_per_row = BN // vec          # column groups per tile row
    mask = vec - 1
    w(f"    vok = (ldc_n == 1) & ((ldc_m & {mask}) == 0) & ((c_z1 & {mask}) == 0) & ((c_z2 & {mask}) == 0) "
      f"& ((vaddr(c) & 15) == 0)")
    w("    if vok:")
    stepped = threads % groups_per_row == 0
    if stepped:   # a thread's column group is fixed; its rows row_step apart
        row_step = threads // groups_per_row
        w(f"        rl0 = tid // {groups_per_row}")
        w(f"        cl = (tid - rl0 * {groups_per_row}) * {vec}")
        w(f"        for it in range({(BM + row_step - 1) // row_step}):")
        w(f"            rl = rl0 + it * {row_step}")
        ind = "            "
    else:
        w(f"        for e in range(tid, {BM * groups_per_row}, {threads}):")
        w(f"            rl = e // {groups_per_row}")
        w(f"            cl = (e - rl * {groups_per_row}) * {vec}")
        ind = "            "
    w(f"{ind}rr = m0 + rl")
    w(f"{ind}cc = n0 + cl")
    w(f"{ind}if (rr < M) & (rl < {BM}):" if stepped and BM % (threads // groups_per_row) else f"{ind}if rr < M:")
    i2 = ind + "    "
    w(f"{i2}so = fe + rl * {stage_row} + cl")
    w(f"{i2}o = zc + int64(rr) * ldc_m + cc")
    w(f"{i2}if cc + {vec} <= N:")
    i3 = i2 + "    "
    if vec == 8:   # halves in the order (tid >> 2) & 1: quarter-warp lanes on distinct 16-byte bank groups
        w(f"{i3}hs = (tid >> 2) & 1")
        w(f"{i3}p0, p1, p2, p3 = lds4(smf, so + 4 * hs)")
        w(f"{i3}q0, q1, q2, q3 = lds4(smf, so + 4 - 4 * hs)")
        for j in range(4):
            w(f"{i3}s{j} = q{j} if hs else p{j}")
            w(f"{i3}s{j + 4} = p{j} if hs else q{j}")
    else:
        w(f"{i3}s0, s1, s2, s3 = lds4(smf, so)")
    for j in range(vec):
        w(f"{i3}x{j} = epv(s{j}, c, o + {j}, bias, {bias_expr('rr', f'cc + {j}')}, res, "
          f"{res_expr('rr', f'cc + {j}')}, alpha, beta)")
    if vec == 8:
        pk = PACK[out]
        w(f"{i3}{st}(c, o, {', '.join(f'{pk}(x{2 * j}, x{2 * j + 1})' for j in range(4))})")
    else:
        w(f"{i3}{st}(c, o, x0, x1, x2, x3)")
    w(f"{i2}elif cc < N:")
    for j in range(vec):
        w(f"{i3}if cc + {j} < N:")
        w(f"{i3}    epi(smf[so + {j}], c, o + {j}, bias, {bias_expr('rr', f'cc + {j}')}, res, "
          f"{res_expr('rr', f'cc + {j}')}, alpha, beta)")
    w("    else:")
    emit_scalar_walk(w, cfg, "        ", bias_expr, res_expr, stage_row)


def emit_packed(w, cfg, out_dtype):
    """Kernel lines of the packed fast path (``cfg.EPI`` 3) for a 16-bit C and an alpha-only epilogue, taken
    at run time when beta == 0, N % 8 == 0 and C allows 16-byte stores; opens ``if pok:`` (the caller
    writes the ``else:`` branch: the f32 staging and :func:`emit`).

    Each thread scales its accumulator pairs (adjacent columns) by alpha, packs them (``cvt.rn.bf16x2`` /
    ``f16x2``: one 32-bit word per pair) into a staged 16-bit tile (rows of BLOCK_N / 2 + 4 words: the
    fragment writes hit 32 distinct banks), then copies the tile out with one 16-byte shared load and one
    16-byte global store per 8 outputs (no per-element work)."""
    BM, BN, threads, MI = cfg.BLOCK_M, cfg.BLOCK_N, cfg.threads, cfg.MI
    pk = PACK[dtypes.dtype_name(out_dtype)]
    stage_row_words = BN // 2 + 4       # 32-bit words per staged row: 2 outputs a word, 4 words of pad
    groups_per_row = BN // 8            # 16-byte column groups per tile row
    w("    pok = (beta == 0) & ((N & 7) == 0) & (ldc_n == 1) & ((ldc_m & 7) == 0) & ((c_z1 & 7) == 0) "
      "& ((c_z2 & 7) == 0) & ((vaddr(c) & 15) == 0)")
    w("    if pok:")
    w("        smw = cuda.shared.array(0, uint32)")
    w("        al = float32(alpha)")
    w(f"        wo = fe + (wg * {MI * 64} + ((tid >> 5) & 3) * 16 + ((tid & 31) >> 2)) * {stage_row_words} + (tid & 3)")
    for i in range(MI):
        for j in range(BN // 8):
            b = i * 64 * stage_row_words + 4 * j
            w(f"        smw[wo + {b}] = {pk}(al * acc{i}[{4 * j}], al * acc{i}[{4 * j + 1}])")
            w(f"        smw[wo + {b + 8 * stage_row_words}] = {pk}(al * acc{i}[{4 * j + 2}], al * acc{i}[{4 * j + 3}])")
    w("        cuda.syncthreads()")
    if threads % groups_per_row == 0:   # a thread's 16-byte column group is fixed; its rows row_step apart
        row_step = threads // groups_per_row
        w(f"        rl0 = tid // {groups_per_row}")
        w(f"        cw = (tid - rl0 * {groups_per_row}) * 4")
        w("        cc = n0 + 2 * cw")
        w("        if cc < N:")
        w(f"            for it in range({(BM + row_step - 1) // row_step}):")
        w(f"                rl = rl0 + it * {row_step}")
        w("                rr = m0 + rl")
        w(f"                if (rr < M) & (rl < {BM}):" if BM % row_step else "                if rr < M:")
        w(f"                    f0, f1, f2, f3 = lds4(smf, fe + rl * {stage_row_words} + cw)")
        w("                    stg4(c, zc + int64(rr) * ldc_m + cc, f0, f1, f2, f3)")
    else:
        w(f"        for e in range(tid, {BM * groups_per_row}, {threads}):")
        w(f"            rl = e // {groups_per_row}")
        w(f"            cw = (e - rl * {groups_per_row}) * 4")
        w("            rr = m0 + rl")
        w("            cc = n0 + 2 * cw")
        w("            if (rr < M) & (cc < N):")
        w(f"                f0, f1, f2, f3 = lds4(smf, fe + rl * {stage_row_words} + cw)")
        w("                stg4(c, zc + int64(rr) * ldc_m + cc, f0, f1, f2, f3)")
