"""``wgmma`` (sm_90a) PTX from numba: inline-PTX intrinsics, with the simulator model bound under the
CUDA simulator (:mod:`.sim`), so kernels import these names and never branch on the simulator.

* ``get_wgmma(n, ab="bf16", trans_a=False, trans_b=False)`` -> ``wgmma(sm, acc, desc_a, desc_b,
  scale_d) -> acc``: ``wgmma.mma_async.sync.aligned.m64n{n}k{kk}.f32.{ab}.{ab}``, D(64 x n, f32) =
  A(64 x kk) @ B(kk x n) + (scale_d != 0) * D, issued by the 128 threads of a warpgroup; ``ab`` bf16 /
  f16 (kk = 16) or tf32 (kk = 8: FP32 storage, the low 13 mantissa bits ignored; both operands K-major,
  no transpose immediates). One instruction covers 32 bytes of a K-major row whatever the type. ``acc`` is a
  tuple of n / 2 float32 (the thread's accumulator fragment, below), ``desc_a`` / ``desc_b`` 64-bit
  shared-memory descriptors (:mod:`.layout`), ``sm`` the shared array the descriptors point into
  (unused on the GPU; the simulator reads it). ``trans_a`` / ``trans_b``: the operand is MN-major
  (transpose immediates, 16-bit types only). Asynchronous: the result is defined after
  ``wgmma_commit()`` and a ``wgmma_wait(N)`` that retires its group; consecutive wgmmas on the same
  accumulator need no wait in between.
* Accumulator fragment (thread ``tid`` of the warpgroup, ``w = tid >> 5``, ``g = (tid & 31) >> 2``,
  ``t = tid & 3``): for 8-column block j, ``acc[4j + 0..3]`` = D[16w + g, 8j + 2t], D[16w + g, 8j + 2t + 1],
  D[16w + g + 8, 8j + 2t], D[16w + g + 8, 8j + 2t + 1].
* ``get_wgmma_rs(n, ab="bf16", trans_b=False)`` -> ``wgmma_rs(sm, acc, a0, a1, a2, a3, desc_b, scale_d) -> acc``:
  the same product with A (64 x 16, 16-bit types) from registers: ``a0 .. a3`` are the thread's four packed
  pairs, laid out per warp as mma.m16n8k16's A fragment (warp ``w`` holds rows 16w ..: a0 = (g, 2t..2t+1),
  a1 = (g + 8, 2t..), a2 = (g, 2t + 8..), a3 = (g + 8, 2t + 8..)), which is the accumulator layout of two
  8-column blocks rounded to pairs (so a product's output feeds the next one without a shuffle). The
  hardware reads a0 .. a3 until the group retires: ``hold_regs(a0, a1, a2, a3)`` after the ``wgmma_wait`` keeps them
  alive (and their registers unwritten) until then (four registers a call).
* ``acc_scale_rows(acc, sa, sb) -> acc``: the fragment with its row-g entries (``acc[4j + 0, 1]``) times ``sa`` and
  its row-(g + 8) entries (``acc[4j + 2, 3]``) times ``sb`` (a flash-attention rescale; one call, since a long
  tuple literal trips numba's bytecode front end).
* ``wgmma_fence()`` (``wgmma.fence.sync.aligned``: before the first wgmma and after registers of an
  accumulator were written by other instructions), ``wgmma_commit()``, ``wgmma_wait(N)`` (N literal),
  ``wgmma_wait_acc(N, acc) -> acc`` (the same wait, with the accumulator tied through it so that the
  compiler cannot read it earlier), ``acc_zeros(R)`` (R literal: a tuple of R float32 zeros; a long
  tuple literal trips numba's bytecode front end), ``udiv32(a, b)`` (``div.u32``: numba's int64
  division is a called subroutine in SASS, and any call serializes every wgmma of the kernel),
  ``store_acc(arr, off, acc, row_stride)`` (the fragment into a float32 array, fragment-shaped:
  acc[4j + q] -> arr[off + (q >> 1) * 8 * row_stride + 8j + (q & 1)]; one call instead of n / 2
  statements, which numba's front end types and lowers one by one), ``get_cp_async_l2(prefetch)`` ->
  ``cp_async(dst, doff, src, soff, nbytes)``: ptx.cp_async_cg_16_zfill with the ``.L2::{prefetch}B``
  prefetch-size hint (64, 128 or 256), ``fence_proxy_async()`` (``fence.proxy.async.shared::cta``: make
  generic-proxy writes to shared memory visible to wgmma; then a barrier).
"""
from ...platform import simulator_enabled

__all__ = ["get_wgmma", "get_wgmma_rs", "hold_regs", "acc_scale_rows", "check_shape", "K_STEP", "wgmma_fence", "wgmma_commit", "wgmma_wait", "wgmma_wait_acc",
           "fence_proxy_async", "acc_zeros", "udiv32", "store_acc", "get_cp_async_l2", "SIM", "WGMMA_N"]

SIM = simulator_enabled()
#: the n extents this module emits (multiples of 8 up to 256 are legal PTX)
WGMMA_N = (8, 16, 32, 64, 96, 128, 192, 256)

#: k extent of one wgmma per input type (16-bit types: k16, tf32: k8; 32 bytes of a K-major row either way)
K_STEP = {"bf16": 16, "f16": 16, "tf32": 8}

_CACHE = {}


def check_shape(n, ab, trans_a, trans_b):
    """Raise ValueError unless m64n{n} with {ab} inputs and these transpose flags is a wgmma this module emits."""
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma n must be a multiple of 8 in 8..256, got {n}")
    if ab not in K_STEP:
        raise ValueError(f"wgmma inputs must be bf16, f16 or tf32, got {ab}")
    if ab == "tf32" and (trans_a or trans_b):
        raise ValueError("wgmma tf32 operands must both be K-major (the transpose flags are 16-bit only)")


def check_rs_shape(n, ab):
    """Raise ValueError unless m64n{n}k16 with A from registers and {ab} inputs is a wgmma this module emits."""
    check_shape(n, ab, False, False)
    if ab == "tf32":
        raise ValueError("wgmma with A from registers: 16-bit inputs only here (bf16, f16)")


if SIM:
    from .sim import (acc_scale_rows, acc_zeros, fence_proxy_async, get_cp_async_l2, hold_regs, make_wgmma, make_wgmma_rs,  # noqa: F401
                      store_acc, udiv32, wgmma_commit, wgmma_fence, wgmma_wait, wgmma_wait_acc)

    def get_wgmma_rs(n, ab="bf16", trans_b=False):
        key = ("rs", int(n), ab, bool(trans_b))
        if key not in _CACHE:
            check_rs_shape(n, ab)
            _CACHE[key] = make_wgmma_rs(int(n), ab, bool(trans_b))
        return _CACHE[key]

    def get_wgmma(n, ab="bf16", trans_a=False, trans_b=False):
        key = (int(n), ab, bool(trans_a), bool(trans_b))
        if key not in _CACHE:
            check_shape(*key)
            _CACHE[key] = make_wgmma(*key)
        return _CACHE[key]
else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.core.errors import NumbaTypeError
    from numba.cuda.extending import _intrinsic, intrinsic

    _I32 = ir.IntType(32)
    _I64 = ir.IntType(64)
    _F32 = ir.FloatType()

    def _asm(builder, ret, args, text, constraints, side_effect):
        fnty = ir.FunctionType(ret, [a.type for a in args])
        return builder.asm(fnty, text, constraints, args, side_effect)

    def _acc_values(builder, acc, n):
        return [builder.extract_value(acc, i) for i in range(n)]

    def _check_acc(name, acc, nreg):
        if not (isinstance(acc, types.UniTuple) and acc.count == nreg and acc.dtype == types.float32):
            raise NumbaTypeError(f"{name}: accumulator must be a tuple of {nreg} float32, got {acc}")

    def get_wgmma(n, ab="bf16", trans_a=False, trans_b=False):
        """The wgmma intrinsic for m64n{n}k16 with {ab} inputs (bf16 / f16) or m64n{n}k8 with tf32 inputs
        (both operands K-major: no transpose immediates), f32 accumulation."""
        key = (int(n), ab, bool(trans_a), bool(trans_b))
        if key in _CACHE:
            return _CACHE[key]
        check_shape(*key)
        nreg = n // 2
        outs = ",".join(f"${i}" for i in range(nreg))
        trans = "" if ab == "tf32" else f", {int(trans_a)}, {int(trans_b)}"
        text = (f"{{ .reg .pred p; setp.ne.b32 p, ${nreg + 2}, 0; "
                f"wgmma.mma_async.sync.aligned.m64n{n}k{K_STEP[ab]}.f32.{ab}.{ab} {{{outs}}}, ${nreg}, "
                f"${nreg + 1}, p, 1, 1{trans}; }}")
        cons = ",".join(["=f"] * nreg + ["l", "l", "r"] + [str(i) for i in range(nreg)] + ["~{memory}"])
        name = f"wgmma_m64n{n}k{K_STEP[ab]}_{ab}"

        @intrinsic
        def wgmma(typingctx, sm, acc, desc_a, desc_b, scale_d):
            _check_acc(name, acc, nreg)
            for t in (desc_a, desc_b, scale_d):
                if not isinstance(t, types.Integer):
                    raise NumbaTypeError(f"{name}: integer descriptors / scale_d expected, got {t}")
            sig = acc(sm, acc, desc_a, desc_b, scale_d)

            def codegen(context, builder, sig, args):
                da = context.cast(builder, args[2], sig.args[2], types.int64)
                db = context.cast(builder, args[3], sig.args[3], types.int64)
                sc = context.cast(builder, args[4], sig.args[4], types.int32)
                ops = [da, db, sc] + _acc_values(builder, args[1], nreg)
                res = _asm(builder, ir.LiteralStructType([_F32] * nreg), ops, text, cons, True)
                return context.make_tuple(builder, sig.return_type,
                                          [builder.extract_value(res, i) for i in range(nreg)])
            return sig, codegen

        _CACHE[key] = wgmma
        return wgmma

    def get_wgmma_rs(n, ab="bf16", trans_b=False):
        """The wgmma intrinsic for m64n{n}k16, A (bf16 / f16) from four packed registers, B through its
        shared-memory descriptor (``trans_b``: MN-major), f32 accumulation."""
        key = ("rs", int(n), ab, bool(trans_b))
        if key in _CACHE:
            return _CACHE[key]
        check_rs_shape(n, ab)
        nreg = n // 2
        outs = ",".join(f"${i}" for i in range(nreg))
        a = ",".join(f"${nreg + i}" for i in range(4))
        text = (f"{{ .reg .pred p; setp.ne.b32 p, ${nreg + 5}, 0; "
                f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} {{{outs}}}, {{{a}}}, ${nreg + 4}, "
                f"p, 1, 1, {int(bool(trans_b))}; }}")
        cons = ",".join(["=f"] * nreg + ["r"] * 4 + ["l", "r"] + [str(i) for i in range(nreg)] + ["~{memory}"])
        name = f"wgmma_rs_m64n{n}k16_{ab}"

        @intrinsic
        def wgmma_rs(typingctx, sm, acc, a0, a1, a2, a3, desc_b, scale_d):
            _check_acc(name, acc, nreg)
            for t in (a0, a1, a2, a3, desc_b, scale_d):
                if not isinstance(t, types.Integer):
                    raise NumbaTypeError(f"{name}: integer A registers / descriptor / scale_d expected, got {t}")
            sig = acc(sm, acc, a0, a1, a2, a3, desc_b, scale_d)

            def codegen(context, builder, sig, args):
                regs = [context.cast(builder, args[2 + i], sig.args[2 + i], types.uint32) for i in range(4)]
                db = context.cast(builder, args[6], sig.args[6], types.int64)
                sc = context.cast(builder, args[7], sig.args[7], types.int32)
                ops = regs + [db, sc] + _acc_values(builder, args[1], nreg)
                res = _asm(builder, ir.LiteralStructType([_F32] * nreg), ops, text, cons, True)
                return context.make_tuple(builder, sig.return_type,
                                          [builder.extract_value(res, i) for i in range(nreg)])
            return sig, codegen

        _CACHE[key] = wgmma_rs
        return wgmma_rs

    @intrinsic
    def acc_scale_rows(typingctx, acc, sa, sb):
        if not (isinstance(acc, types.UniTuple) and acc.dtype == types.float32 and acc.count % 4 == 0):
            raise NumbaTypeError(f"acc_scale_rows: accumulator must be a float32 tuple, got {acc}")

        def codegen(context, builder, sig, args):
            a = context.cast(builder, args[1], sig.args[1], types.float32)
            b = context.cast(builder, args[2], sig.args[2], types.float32)
            vals = [builder.fmul(builder.extract_value(args[0], i), a if i % 4 < 2 else b) for i in range(acc.count)]
            return context.make_tuple(builder, sig.return_type, vals)
        return acc(acc, sa, sb), codegen

    @intrinsic
    def hold_regs(typingctx, r0, r1, r2, r3):
        for t in (r0, r1, r2, r3):
            if not isinstance(t, types.Integer):
                raise NumbaTypeError(f"hold_regs: integer registers expected, got {t}")
        sig = types.void(r0, r1, r2, r3)

        def codegen(context, builder, sig, args):
            vals = [context.cast(builder, a, t, types.uint32) for a, t in zip(args, sig.args)]
            _asm(builder, ir.VoidType(), vals, "", "r,r,r,r,~{memory}", True)
            return context.get_dummy_value()
        return sig, codegen

    def _void_asm(text):
        @intrinsic
        def f(typingctx):
            def codegen(context, builder, sig, args):
                _asm(builder, ir.VoidType(), [], text, "~{memory}", True)
                return context.get_dummy_value()
            return types.void(), codegen
        return f

    wgmma_fence = _void_asm("wgmma.fence.sync.aligned;")
    wgmma_commit = _void_asm("wgmma.commit_group.sync.aligned;")
    fence_proxy_async = _void_asm("fence.proxy.async.shared::cta;")

    @_intrinsic(target="cuda", prefer_literal=True)
    def wgmma_wait(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            raise NumbaTypeError(f"wgmma_wait: N must be a compile-time literal, got {n}")
        text = f"wgmma.wait_group.sync.aligned {int(n.literal_value)};"

        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], text, "~{memory}", True)
            return context.get_dummy_value()
        return types.void(n), codegen

    @_intrinsic(target="cuda", prefer_literal=True)
    def wgmma_wait_acc(typingctx, n, acc):
        if not isinstance(n, types.IntegerLiteral):
            raise NumbaTypeError(f"wgmma_wait_acc: N must be a compile-time literal, got {n}")
        if not (isinstance(acc, types.UniTuple) and acc.dtype == types.float32):
            raise NumbaTypeError(f"wgmma_wait_acc: accumulator must be a float32 tuple, got {acc}")
        nreg = acc.count
        text = f"wgmma.wait_group.sync.aligned {int(n.literal_value)};"
        cons = ",".join(["=f"] * nreg + [str(i) for i in range(nreg)] + ["~{memory}"])

        def codegen(context, builder, sig, args):
            res = _asm(builder, ir.LiteralStructType([_F32] * nreg), _acc_values(builder, args[1], nreg),
                       text, cons, True)
            return context.make_tuple(builder, sig.return_type,
                                      [builder.extract_value(res, i) for i in range(nreg)])
        return acc(n, acc), codegen

    @_intrinsic(target="cuda", prefer_literal=True)
    def acc_zeros(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            raise NumbaTypeError(f"acc_zeros: the count must be a compile-time literal, got {n}")
        count = int(n.literal_value)
        ret = types.UniTuple(types.float32, count)

        def codegen(context, builder, sig, args):
            zero = context.get_constant(types.float32, 0.0)
            return context.make_tuple(builder, ret, [zero] * count)
        return ret(n), codegen

    @intrinsic
    def udiv32(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            raise NumbaTypeError(f"udiv32: integers expected, got ({a}, {b})")

        def codegen(context, builder, sig, args):
            x = context.cast(builder, args[0], sig.args[0], types.uint32)
            y = context.cast(builder, args[1], sig.args[1], types.uint32)
            return _asm(builder, _I32, [x, y], "div.u32 $0, $1, $2;", "=r,r,r", False)
        return types.int32(a, b), codegen

    @_intrinsic(target="cuda", prefer_literal=True)
    def store_acc(typingctx, arr, off, acc, row_stride):
        if not (isinstance(arr, types.Array) and arr.dtype == types.float32):
            raise NumbaTypeError(f"store_acc: a float32 array expected, got {arr}")
        if not isinstance(row_stride, types.IntegerLiteral):
            raise NumbaTypeError(f"store_acc: row_stride must be a compile-time literal, got {row_stride}")
        if not (isinstance(acc, types.UniTuple) and acc.dtype == types.float32 and acc.count % 4 == 0):
            raise NumbaTypeError(f"store_acc: accumulator must be a float32 tuple, got {acc}")
        rs = int(row_stride.literal_value)
        nreg = acc.count

        def codegen(context, builder, sig, args):
            a = context.make_array(sig.args[0])(context, builder, value=args[0])
            base = context.cast(builder, args[1], sig.args[1], types.int64)
            for r in range(nreg):
                j, q = divmod(r, 4)
                o = builder.add(base, ir.Constant(_I64, (q >> 1) * 8 * rs + 8 * j + (q & 1)))
                builder.store(builder.extract_value(args[2], r), builder.gep(a.data, [o]))
            return context.get_dummy_value()
        return types.void(arr, off, acc, row_stride), codegen

    def get_cp_async_l2(prefetch):
        """16-byte cp.async.cg with zero-fill and an L2 prefetch-size hint (bytes: 64, 128, 256)."""
        if prefetch not in (64, 128, 256):
            raise ValueError(f"L2 prefetch size must be 64, 128 or 256 bytes, got {prefetch}")
        key = ("cp_async_l2", prefetch)
        if key in _CACHE:
            return _CACHE[key]
        text = f"cp.async.cg.shared.global.L2::{prefetch}B [$0], [$1], 16, $2;"

        @intrinsic
        def cp_async(typingctx, dst, doff, src, soff, n):
            for arr, off in ((dst, doff), (src, soff)):
                if not isinstance(arr, types.Array) or not isinstance(off, types.Integer):
                    raise NumbaTypeError(f"cp_async_l2: (array, integer offset) expected, got ({arr}, {off})")

            def codegen(context, builder, sig, args):
                def ptr(i):
                    a = context.make_array(sig.args[i])(context, builder, value=args[i])
                    o = context.cast(builder, args[i + 1], sig.args[i + 1], types.intp)
                    return builder.gep(a.data, [o])
                d = builder.ptrtoint(ptr(0), _I64)
                d32 = _asm(builder, _I32, [d], "{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; }",
                           "=r,l", False)
                sz = context.cast(builder, args[4], sig.args[4], types.uint32)
                _asm(builder, ir.VoidType(), [d32, builder.ptrtoint(ptr(2), _I64), sz], text, "r,l,r,~{memory}",
                     True)
                return context.get_dummy_value()
            return types.void(dst, doff, src, soff, n), codegen

        _CACHE[key] = cp_async
        return cp_async
