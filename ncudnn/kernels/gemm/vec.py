"""Four-wide shared-memory fragment reads for the VEC=4 mainloop.

``ld4(arr, i0, i1, i2)`` returns ``(arr[i0, i1, i2], ..., arr[i0, i1, i2 + 3])`` as one 16-byte load
(``ld.shared.v4.f32``) on a GPU: the element pointer is cast to ``<4 x float>*`` with align 16 in
LLVM IR (no inline PTX). The caller guarantees 16-byte alignment (shared array declared with
``alignment=16``, row length and ``i2`` multiples of 4). Under the CUDA simulator it is four plain
reads. Float32 arrays only.
"""
from numba import cuda

from ...platform import simulator_enabled

if simulator_enabled():
    def ld4(arr, i0, i1, i2):
        return arr[i0, i1, i2], arr[i0, i1, i2 + 1], arr[i0, i1, i2 + 2], arr[i0, i1, i2 + 3]
else:
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def _ld4(typingctx, arr, i0, i1, i2):
        if not isinstance(arr, types.Array) or arr.dtype != types.float32 or arr.ndim != 3:
            return None
        sig = types.UniTuple(types.float32, 4)(arr, i0, i1, i2)

        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            ary = context.make_array(aryty)(context, builder, value=args[0])
            inds = [context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], sig.args[1:])]
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, inds, wraparound=False)
            vptr = builder.bitcast(ptr, ir.VectorType(ir.FloatType(), 4).as_pointer(
                ptr.type.addrspace))
            vec = builder.load(vptr, align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    @cuda.jit(device=True, inline=True)
    def ld4(arr, i0, i1, i2):
        return _ld4(arr, i0, i1, i2)
