"""Pointers for numba ``@intrinsic`` code generation: the one place the vector load / store intrinsics of
:mod:`ncudnn.kernels.primitives.vec`, :mod:`ncudnn.kernels.primitives.cshint` and :mod:`ncudnn.kernels.wgmma.epi_vec` take an element's address from.

``item_ptr(context, builder, aryty, ary_val, idx_val, idx_ty)``: the address of element ``idx`` of the 1-D
array ``ary_val`` (its strides honoured, no negative-index wraparound); ``vec_ptr(...)``: the same address
as a pointer to a 4-vector of the array's element type (same address space), for one 16-byte access.
Code generation only: nothing here runs under the CUDA simulator.
"""
from llvmlite import ir
from numba.cuda import cgutils, types

__all__ = ["item_ptr", "vec_ptr"]


def item_ptr(context, builder, aryty, ary_val, idx_val, idx_ty):
    ary = context.make_array(aryty)(context, builder, value=ary_val)
    ind = context.cast(builder, idx_val, idx_ty, types.intp)
    return cgutils.get_item_pointer(context, builder, aryty, ary, [ind], wraparound=False)


def vec_ptr(context, builder, aryty, ary_val, idx_val, idx_ty):
    ptr = item_ptr(context, builder, aryty, ary_val, idx_val, idx_ty)
    elt = context.get_data_type(aryty.dtype)
    return builder.bitcast(ptr, ir.VectorType(elt, 4).as_pointer(ptr.type.addrspace))
