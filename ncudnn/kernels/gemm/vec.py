"""Sixteen-byte memory accesses and an address query for the GEMM kernels.

* ``ld4(arr, i0, i1, i2)``: ``(arr[i0, i1, i2], ..., arr[i0, i1, i2 + 3])`` of a 3-D float32 (shared)
  array as one 16-byte load (``ld.shared.v4.f32``);
* ``st4(arr, i0, i1, i2, v0, v1, v2, v3)``: the four values to ``arr[i0, i1, i2 .. i2 + 3]`` as one
  16-byte store (``st.shared.v4.f32``);
* ``ldg4(arr, i)``: ``arr[i .. i + 3]`` of a 1-D float32 (global) array as one 16-byte load
  (``ld.global.v4.f32``);
* ``addr(arr)``: the byte address of ``arr``'s first element (uint64), to test alignment;
* ``gptr(arr, i)`` / ``ldg4p(arr, p)`` / ``GSCALE``: a uint64 handle of ``arr[i]`` that a k loop
  advances by ``GSCALE * elements`` and loads 4 floats from: on a GPU the byte address itself (one
  64-bit register per operand, ``arr`` unused by the load), under the simulator the index.

On a GPU the element pointer is cast to ``<4 x float>*`` with align 16 in LLVM IR (no inline PTX); the
caller guarantees 16-byte alignment (shared arrays declared with ``alignment=16``, row lengths and
last indices multiples of 4, global base address checked with ``addr``). Under the CUDA simulator they
are plain element accesses. Float32 arrays only.
"""
from numba import cuda

from ...platform import simulator_enabled

if simulator_enabled():
    import numpy as np

    def ld4(arr, i0, i1, i2):
        return arr[i0, i1, i2], arr[i0, i1, i2 + 1], arr[i0, i1, i2 + 2], arr[i0, i1, i2 + 3]

    def st4(arr, i0, i1, i2, v0, v1, v2, v3):
        arr[i0, i1, i2] = v0
        arr[i0, i1, i2 + 1] = v1
        arr[i0, i1, i2 + 2] = v2
        arr[i0, i1, i2 + 3] = v3

    def ldg4(arr, i):
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    GSCALE = 1

    def gptr(arr, i):
        return np.uint64(i)

    def ldg4p(arr, p):
        return arr[p], arr[p + 1], arr[p + 2], arr[p + 3]

    def addr(arr):
        a = getattr(arr, "_ary", arr)
        return np.uint64(a.__array_interface__["data"][0]) if hasattr(a, "__array_interface__") else np.uint64(0)
else:
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    _V4 = ir.VectorType(ir.FloatType(), 4)

    def _ptr(context, builder, aryty, ary_val, idx_vals, idx_types):
        ary = context.make_array(aryty)(context, builder, value=ary_val)
        inds = [context.cast(builder, v, t, types.intp) for v, t in zip(idx_vals, idx_types)]
        return cgutils.get_item_pointer(context, builder, aryty, ary, inds, wraparound=False)

    @intrinsic
    def _ld4(typingctx, arr, i0, i1, i2):
        if not isinstance(arr, types.Array) or arr.dtype != types.float32 or arr.ndim != 3:
            return None
        sig = types.UniTuple(types.float32, 4)(arr, i0, i1, i2)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            vec = builder.load(builder.bitcast(ptr, _V4.as_pointer(ptr.type.addrspace)), align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    @intrinsic
    def _st4(typingctx, arr, i0, i1, i2, v0, v1, v2, v3):
        if not isinstance(arr, types.Array) or arr.dtype != types.float32 or arr.ndim != 3:
            return None
        sig = types.none(arr, i0, i1, i2, types.float32, types.float32, types.float32, types.float32)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:4], sig.args[1:4])
            vec = ir.Constant(_V4, ir.Undefined)
            for j in range(4):
                vec = builder.insert_element(vec, args[4 + j], ir.Constant(ir.IntType(32), j))
            builder.store(vec, builder.bitcast(ptr, _V4.as_pointer(ptr.type.addrspace)), align=16)
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _ldg4(typingctx, arr, i):
        if not isinstance(arr, types.Array) or arr.dtype != types.float32 or arr.ndim != 1:
            return None
        sig = types.UniTuple(types.float32, 4)(arr, i)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            gptr = builder.addrspacecast(ptr, ir.PointerType(ir.FloatType(), 1))
            vec = builder.load(builder.bitcast(gptr, _V4.as_pointer(1)), align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    GSCALE = 4

    @intrinsic
    def _gptr(typingctx, arr, i):
        if not isinstance(arr, types.Array) or arr.ndim != 1:
            return None
        sig = types.uint64(arr, i)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            return builder.ptrtoint(ptr, ir.IntType(64))
        return sig, codegen

    @intrinsic
    def _ldg4p(typingctx, p):
        if p != types.uint64:
            return None
        sig = types.UniTuple(types.float32, 4)(p)

        def codegen(context, builder, sig, args):
            vptr = builder.inttoptr(args[0], _V4.as_pointer(1))
            vec = builder.load(vptr, align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    @intrinsic
    def _addr(typingctx, arr):
        if not isinstance(arr, types.Array):
            return None
        sig = types.uint64(arr)

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, value=args[0])
            return builder.ptrtoint(ary.data, ir.IntType(64))
        return sig, codegen

    @cuda.jit(device=True, inline=True)
    def ld4(arr, i0, i1, i2):
        return _ld4(arr, i0, i1, i2)

    @cuda.jit(device=True, inline=True)
    def st4(arr, i0, i1, i2, v0, v1, v2, v3):
        _st4(arr, i0, i1, i2, v0, v1, v2, v3)

    @cuda.jit(device=True, inline=True)
    def ldg4(arr, i):
        return _ldg4(arr, i)

    @cuda.jit(device=True, inline=True)
    def addr(arr):
        return _addr(arr)

    @cuda.jit(device=True, inline=True)
    def gptr(arr, i):
        return _gptr(arr, i)

    @cuda.jit(device=True, inline=True)
    def ldg4p(arr, p):
        return _ldg4p(p)
