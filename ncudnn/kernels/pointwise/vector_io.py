"""Device functions the generated pointwise and row kernels call: one storage value to a compute-type
register (:func:`to_compute`) and back (:func:`to_storage`), and ``n``-element vector loads / stores as
one 16-byte (or narrower) access (:func:`vector_load`, :func:`vector_store`; LLVM vector loads through a
numba intrinsic on a GPU, plain element loops in the simulator).
"""
import functools

import numba
from numba import cuda

from ..runtime import dtypes as _dt
from ..primitives.warp import SIM

__all__ = ["to_compute", "to_storage", "vector_load", "vector_store"]


@functools.lru_cache(maxsize=None)
def to_compute(name, ctype):
    """Device function: one storage value of dtype ``name`` -> a ``ctype`` register."""
    conv = numba.float64 if ctype == "float64" else numba.float32
    if name == "bfloat16":
        def f(v):
            return conv(_dt._bf16_to_f32(v))
    elif name in _dt._FP8:
        decode, _ = _dt._fp8_codec(*_dt._FP8[name], False)

        def f(v):
            return conv(decode(v))
    else:
        def f(v):
            return conv(v)
    return cuda.jit(device=True, inline=True)(f)


@functools.lru_cache(maxsize=None)
def to_storage(name, saturate=False):
    """Device function: a float / int / bool register -> the storage value of dtype ``name``."""
    if name == "bfloat16":
        def f(v):
            return _dt._f32_to_bf16(v)
    elif name in _dt._FP8:
        _, encode = _dt._fp8_codec(*_dt._FP8[name], saturate)

        def f(v):
            return encode(v)
    elif name == "float16":
        def f(v):
            return _dt._float16(numba.float32(v))
    else:
        conv = getattr(numba, name)

        def f(v):
            return conv(v)
    return cuda.jit(device=True, inline=True)(f)


if SIM:
    @functools.lru_cache(maxsize=None)
    def vector_load(n):
        """``ldv(arr, i) -> (arr[i], ..., arr[i + n - 1])``: one ``n * itemsize``-byte load on a GPU
        (``i`` a multiple of ``n``, the buffer aligned to ``n * itemsize``)."""
        def ldv(arr, i):
            return tuple(arr[i + j] for j in range(n))
        return ldv

    @functools.lru_cache(maxsize=None)
    def vector_store(n):
        """``stv(arr, i, values)``: ``arr[i + j] = values[j]`` as one ``n * itemsize``-byte store."""
        def stv(arr, i, values):
            for j in range(n):
                arr[i + j] = values[j]
        return stv
else:
    from llvmlite import ir as _ir
    from numba.cuda import cgutils as _cgutils, types as _types
    from numba.cuda.extending import intrinsic as _intrinsic

    def _vector_pointer(context, builder, aryty, ary_value, index, index_type, n):
        """(pointer, alignment, element vector type): the pointer is to the memory vector type,
        whole 32-bit words for 8- and 16-byte vectors of narrow elements (one ld/st.v2/v4.b32
        instead of several v4.u8 / v4.u16), else ``<n x elem>``."""
        ary = context.make_array(aryty)(context, builder, value=ary_value)
        i = context.cast(builder, index, index_type, _types.intp)
        ptr = _cgutils.get_item_pointer(context, builder, aryty, ary, [i], wraparound=False)
        elem = context.get_data_type(aryty.dtype)
        size = context.get_abi_sizeof(elem)
        vty = _ir.VectorType(elem, n)
        mty = _ir.VectorType(_ir.IntType(32), n * size // 4) if size < 4 and n * size in (8, 16) \
            else vty
        return builder.bitcast(ptr, mty.as_pointer(ptr.type.addrspace)), n * size, vty

    def _bits_of(elem):
        return elem.width if isinstance(elem, _ir.IntType) else 16   # half: 16 bits

    def _unpack_words(builder, words_vec, elem, n):
        """n narrow elements from a vector of 32-bit words (lowest address in the low bits)."""
        bits = _bits_of(elem)
        per = 32 // bits
        ity = _ir.IntType(bits)
        out = []
        for j in range(n):
            w = builder.extract_element(words_vec, _ir.Constant(_ir.IntType(32), j // per))
            sh = (j % per) * bits
            if sh:
                w = builder.lshr(w, _ir.Constant(_ir.IntType(32), sh))
            v = builder.trunc(w, ity)
            out.append(v if isinstance(elem, _ir.IntType) else builder.bitcast(v, elem))
        return out

    def _pack_words(builder, vals, elem, words):
        """A vector of ``words`` 32-bit words holding the narrow elements ``vals``."""
        bits = _bits_of(elem)
        per = 32 // bits
        vec = _ir.Constant(_ir.VectorType(_ir.IntType(32), words), _ir.Undefined)
        for k in range(words):
            acc = None
            for j in range(k * per, (k + 1) * per):
                v = vals[j] if isinstance(elem, _ir.IntType) else builder.bitcast(vals[j], _ir.IntType(bits))
                v = builder.zext(v, _ir.IntType(32))
                sh = (j % per) * bits
                if sh:
                    v = builder.shl(v, _ir.Constant(_ir.IntType(32), sh))
                acc = v if acc is None else builder.or_(acc, v)
            vec = builder.insert_element(vec, acc, _ir.Constant(_ir.IntType(32), k))
        return vec

    @functools.lru_cache(maxsize=None)
    def vector_load(n):
        """``ldv(arr, i) -> (arr[i], ..., arr[i + n - 1])``: one ``n * itemsize``-byte load on a GPU
        (``i`` a multiple of ``n``, the buffer aligned to ``n * itemsize``)."""
        @_intrinsic
        def ldv(typingctx, arr, i):
            if not isinstance(arr, _types.Array) or arr.ndim != 1 or arr.dtype == _types.boolean:
                return None
            sig = _types.UniTuple(arr.dtype, n)(arr, i)

            def codegen(context, builder, sig, args):
                vptr, align, vty = _vector_pointer(context, builder, sig.args[0], args[0], args[1],
                                                   sig.args[1], n)
                vec = builder.load(vptr, align=align)
                if vec.type != vty:
                    vals = _unpack_words(builder, vec, vty.element, n)
                else:
                    vals = [builder.extract_element(vec, _ir.Constant(_ir.IntType(32), j))
                            for j in range(n)]
                return context.make_tuple(builder, sig.return_type, vals)
            return sig, codegen
        return ldv

    @functools.lru_cache(maxsize=None)
    def vector_store(n):
        """``stv(arr, i, values)``: ``arr[i + j] = values[j]`` as one ``n * itemsize``-byte store."""
        @_intrinsic
        def stv(typingctx, arr, i, values):
            if not isinstance(arr, _types.Array) or arr.ndim != 1 or arr.dtype == _types.boolean:
                return None
            if not isinstance(values, _types.BaseTuple) or len(values) != n:
                return None
            sig = _types.void(arr, i, values)

            def codegen(context, builder, sig, args):
                aryty, _, valty = sig.args
                vptr, align, vty = _vector_pointer(context, builder, aryty, args[0], args[1],
                                                   sig.args[1], n)
                vals = [context.cast(builder, builder.extract_value(args[2], j), valty[j],
                                     aryty.dtype) for j in range(n)]
                words = align // 4 if context.get_abi_sizeof(vty.element) < 4 and align in (8, 16) \
                    else 0
                if words:
                    vec = _pack_words(builder, vals, vty.element, words)
                else:
                    vec = _ir.Constant(vty, _ir.Undefined)
                    for j, v in enumerate(vals):
                        vec = builder.insert_element(vec, v, _ir.Constant(_ir.IntType(32), j))
                builder.store(vec, vptr, align=align)
                return context.get_dummy_value()
            return sig, codegen
        return stv
