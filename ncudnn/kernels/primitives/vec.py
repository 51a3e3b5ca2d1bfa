"""16-byte global loads and stores of four float32 / int32 elements and a select: the vector helpers of the
generated resample kernels (direct, tile), the batch / row norm kernels, the split-K conv reduction and the
cache-hinted variants (:mod:`.l2hint`, :mod:`.cshint`, whose simulator fallbacks are these).

``ld4(arr, i)`` returns ``(arr[i], arr[i + 1], arr[i + 2], arr[i + 3])`` and
``st4(arr, i, a, b, c, d)`` stores them, each as one ``ld.global.v4`` / ``st.global.v4`` on a GPU:
the element pointer of the 1-D array is cast to ``<4 x T>*`` with align 16 in LLVM IR. The caller
guarantees ``i % 4 == 0`` and a 16-byte aligned base (the engine checks both). Under the CUDA
simulator they are four plain reads / writes.

``sel(c, a, b)`` is ``a if c else b`` as one LLVM ``select``: a call in numba IR, so generated
kernels made of thousands of selects stay one straight-line block (numba's SSA and liveness passes
are slow on many small branches; an IR-inlined device function brings the branches back).
"""
from numba import cuda

from ...platform import simulator_enabled

__all__ = ["ld4", "st4", "sel"]

if simulator_enabled():
    def ld4(arr, i):
        if i % 4:
            raise ValueError(f"ld4: element offset {i} is not a multiple of 4")
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    def st4(arr, i, a, b, c, d):
        if i % 4:
            raise ValueError(f"st4: element offset {i} is not a multiple of 4")
        arr[i], arr[i + 1], arr[i + 2], arr[i + 3] = a, b, c, d

    def sel(c, a, b):
        return a if c else b
else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    _OK = (types.float32, types.int32)

    from ..runtime.llvm_ptr import vec_ptr as _vec_ptr

    @intrinsic
    def _ld4(typingctx, arr, i):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype not in _OK:
            return None
        sig = types.UniTuple(arr.dtype, 4)(arr, i)

        def codegen(context, builder, sig, args):
            vptr = _vec_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            vec = builder.load(vptr, align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    @intrinsic
    def _st4(typingctx, arr, i, a, b, c, d):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype not in _OK:
            return None
        sig = types.void(arr, i, a, b, c, d)

        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            vptr = _vec_ptr(context, builder, aryty, args[0], args[1], sig.args[1])
            vec = ir.Constant(ir.VectorType(context.get_data_type(aryty.dtype), 4), ir.Undefined)
            for j in range(4):
                v = context.cast(builder, args[2 + j], sig.args[2 + j], aryty.dtype)
                vec = builder.insert_element(vec, v, ir.Constant(ir.IntType(32), j))
            builder.store(vec, vptr, align=16)
            return context.get_dummy_value()
        return sig, codegen

    @cuda.jit(device=True, inline=True)
    def ld4(arr, i):
        return _ld4(arr, i)

    @cuda.jit(device=True, inline=True)
    def st4(arr, i, a, b, c, d):
        _st4(arr, i, a, b, c, d)

    @intrinsic
    def sel(typingctx, c, a, b):
        ty = typingctx.unify_types(types.unliteral(a), types.unliteral(b))
        if ty is None or not isinstance(ty, (types.Integer, types.Float, types.Boolean)):
            return None
        sig = ty(c, a, b)

        def codegen(context, builder, sig, args):
            cv = context.cast(builder, args[0], sig.args[0], types.boolean)
            av = context.cast(builder, args[1], sig.args[1], sig.return_type)
            bv = context.cast(builder, args[2], sig.args[2], sig.return_type)
            return builder.select(cv, av, bv)
        return sig, codegen

