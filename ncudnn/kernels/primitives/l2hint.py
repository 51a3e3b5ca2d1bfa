"""16-byte global loads and stores of four float32 with an L2 eviction-priority policy.

``ld4_l2(policy)`` and ``st4_l2(policy)`` return device functions ``ld(arr, i) -> (a, b, c, d)`` and
``st(arr, i, a, b, c, d)``: one ``ld.global.L2::cache_hint.v4.f32`` / ``st.global.L2::cache_hint.v4.f32`` whose
64-bit policy comes from ``createpolicy.fractional.L2::<policy>.b64 p, 1.0`` in the same asm block (one ALU
instruction beside each access). ``policy`` is one of :data:`POLICIES`:

* ``evict_first``: the lines are the first the L2 drops (data read once: a clean line leaves with no write-back);
* ``evict_last``: the lines are kept over normal ones (data read again soon, or written data better written
  back late);
* ``evict_normal`` / ``evict_unchanged``: the default priority / the line's present one.

``cp16_l2(policy)`` returns a device function ``cp(dst, doff, src, soff)``: one ``cp.async.cg.shared.global
.L2::cache_hint`` of 16 bytes from global ``src`` at element ``soff`` into shared ``dst`` at element ``doff`` (completed
and made visible like :func:`ncudnn.kernels.primitives.ptx.cp_async_cg_16`: commit / wait groups, then a barrier for other
threads), with the same ``createpolicy`` in its asm block.

The caller guarantees ``i % 4 == 0`` and a 16-byte aligned base. Under the CUDA simulator: the plain 16-byte
access's fallback (four reads / writes, offset checked); ``cp16_l2``: the plain ``ptx.cp_async_cg_16``.

``ld4_asm(text)`` / ``st4_asm(text)`` (GPU only) build such a load / store from any PTX text with the operand
order their docstrings give; :mod:`ncudnn.kernels.primitives.cshint`'s ``.cs`` accesses are made by them too.
"""
import functools

from numba import cuda

from ...platform import simulator_enabled

__all__ = ["POLICIES", "ld4_l2", "st4_l2", "cp16_l2", "ld4_asm", "st4_asm"]

POLICIES = ("evict_first", "evict_last", "evict_normal", "evict_unchanged")


def _check(policy):
    if policy not in POLICIES:
        raise ValueError(f"l2hint: policy {policy!r} is not one of {POLICIES}")


if simulator_enabled():
    from .ptx import cp_async_cg_16 as _cp16
    from .vec import ld4 as _ld4, st4 as _st4

    def ld4_l2(policy):
        _check(policy)
        return _ld4

    def st4_l2(policy):
        _check(policy)
        return _st4

    def cp16_l2(policy):
        _check(policy)
        return _cp16
else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    from ..runtime.llvm_ptr import item_ptr as _elem_ptr

    def _pol(policy):
        return f".reg .b64 pol; createpolicy.fractional.L2::{policy}.b64 pol, 1.0;"

    @functools.lru_cache(maxsize=None)
    def ld4_asm(text):
        """A device function ``ld(arr, i) -> (a, b, c, d)`` of a 1-D float32 array emitting the PTX ``text``
        (operands $0-$3: the four values, $4: the element's address), e.g. ``ld.global.cs.v4.f32 {$0, $1, $2,
        $3}, [$4];``."""
        @intrinsic
        def _ld(typingctx, arr, i):
            if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype != types.float32:
                return None
            sig = types.UniTuple(types.float32, 4)(arr, i)

            def codegen(context, builder, sig, args):
                ptr = _elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                f = ir.FloatType()
                fnty = ir.FunctionType(ir.LiteralStructType([f, f, f, f]), [ptr.type])
                res = builder.call(ir.InlineAsm(fnty, text, "=f,=f,=f,=f,l"), [ptr])
                return context.make_tuple(builder, sig.return_type, [builder.extract_value(res, j) for j in range(4)])
            return sig, codegen

        @cuda.jit(device=True, inline=True)
        def ld(arr, i):
            return _ld(arr, i)
        return ld

    @functools.lru_cache(maxsize=None)
    def st4_asm(text):
        """A device function ``st(arr, i, a, b, c, d)`` of a 1-D float32 array emitting the PTX ``text``
        (operand $0: the element's address, $1-$4: the values), e.g. ``st.global.cs.v4.f32 [$0], {$1, $2, $3,
        $4};``."""
        @intrinsic
        def _st(typingctx, arr, i, a, b, c, d):
            if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype != types.float32:
                return None
            sig = types.void(arr, i, a, b, c, d)

            def codegen(context, builder, sig, args):
                ptr = _elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                f = ir.FloatType()
                vals = [context.cast(builder, args[2 + j], sig.args[2 + j], types.float32) for j in range(4)]
                fnty = ir.FunctionType(ir.VoidType(), [ptr.type, f, f, f, f])
                builder.call(ir.InlineAsm(fnty, text, "l,f,f,f,f,~{memory}", side_effect=True), [ptr] + vals)
                return context.get_dummy_value()
            return sig, codegen

        @cuda.jit(device=True, inline=True)
        def st(arr, i, a, b, c, d):
            _st(arr, i, a, b, c, d)
        return st

    def ld4_l2(policy):
        _check(policy)
        return ld4_asm("{ " + _pol(policy) + " ld.global.L2::cache_hint.v4.f32 {$0, $1, $2, $3}, [$4], pol; }")

    def st4_l2(policy):
        _check(policy)
        return st4_asm("{ " + _pol(policy) + " st.global.L2::cache_hint.v4.f32 [$0], {$1, $2, $3, $4}, pol; }")

    @functools.lru_cache(maxsize=None)
    def cp16_l2(policy):
        _check(policy)
        text = "{ " + _pol(policy) + " cp.async.cg.shared.global.L2::cache_hint [$0], [$1], 16, pol; }"

        @intrinsic
        def cp(typingctx, dst, doff, src, soff):
            def codegen(context, builder, sig, args):
                i64 = ir.IntType(64)
                dp = _elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                sp = _elem_ptr(context, builder, sig.args[2], args[2], args[3], sig.args[3])
                da = builder.asm(ir.FunctionType(ir.IntType(32), [i64]),
                                 "{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; }", "=r,l",
                                 [builder.ptrtoint(dp, i64)], True)
                builder.asm(ir.FunctionType(ir.VoidType(), [da.type, i64]), text, "r,l,~{memory}",
                            [da, builder.ptrtoint(sp, i64)], True)
                return context.get_dummy_value()
            return types.void(dst, doff, src, soff), codegen
        return cp
