"""16-byte global loads and stores of four float32 with the streaming cache hint (``.cs``: evict-first
in L1 and L2), for the last touch of data in the batch-norm apply passes: the bytes they move then
leave the L2 before the lines the statistics pass read last, which the apply pass re-reads first.

``ld4cs(arr, i)`` returns ``(arr[i], ..., arr[i + 3])`` as one ``ld.global.cs.v4.f32``;
``st4cs(arr, i, a, b, c, d)`` writes them as one ``st.global.cs.v4.f32``. The caller guarantees
``i % 4 == 0`` and a 16-byte aligned base. Under the CUDA simulator: four plain reads / writes.
"""
from numba import cuda

from ..platform import simulator_enabled

__all__ = ["ld4cs", "st4cs"]

if simulator_enabled():
    # no cache hints in the simulator: the plain 16-byte access's fallback (four reads / writes, offset checked)
    from .resample_vec import ld4 as ld4cs, st4 as st4cs  # noqa: F401
else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    from .llvm_ptr import item_ptr as _elem_ptr

    @intrinsic
    def _ld4cs(typingctx, arr, i):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype != types.float32:
            return None
        sig = types.UniTuple(types.float32, 4)(arr, i)

        def codegen(context, builder, sig, args):
            ptr = _elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            f = ir.FloatType()
            fnty = ir.FunctionType(ir.LiteralStructType([f, f, f, f]), [ptr.type])
            asm = ir.InlineAsm(fnty, "ld.global.cs.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,l")
            res = builder.call(asm, [ptr])
            vals = [builder.extract_value(res, j) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    @intrinsic
    def _st4cs(typingctx, arr, i, a, b, c, d):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype != types.float32:
            return None
        sig = types.void(arr, i, a, b, c, d)

        def codegen(context, builder, sig, args):
            ptr = _elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            f = ir.FloatType()
            vals = [context.cast(builder, args[2 + j], sig.args[2 + j], types.float32) for j in range(4)]
            fnty = ir.FunctionType(ir.VoidType(), [ptr.type, f, f, f, f])
            asm = ir.InlineAsm(fnty, "st.global.cs.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f,~{memory}",
                               side_effect=True)
            builder.call(asm, [ptr] + vals)
            return context.get_dummy_value()
        return sig, codegen

    @cuda.jit(device=True, inline=True)
    def ld4cs(arr, i):
        return _ld4cs(arr, i)

    @cuda.jit(device=True, inline=True)
    def st4cs(arr, i, a, b, c, d):
        _st4cs(arr, i, a, b, c, d)
