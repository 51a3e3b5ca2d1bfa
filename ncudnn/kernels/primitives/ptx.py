"""Tensor-core and async-copy PTX from numba: inline-PTX intrinsics, one name per instruction.

On a GPU every name below is a numba ``@intrinsic`` emitting an llvmlite ``InlineAsm`` (the same
mechanism as numba-cuda's ``cache_hints.py``); fragments travel as numba scalars and tuples, so
they live in registers (no local memory). Under the CUDA simulator the same names are bound to the
Python fallbacks in :mod:`ncudnn.kernels.primitives.ptx_sim` (the one place those live), with the same
fragment semantics, so kernels import these names and never branch on the simulator.

Fragments (``g = lane >> 2``, ``t = lane & 3``; PTX ISA "Matrix fragments for mma.m16n8k*"):

* ``mma_m16n8k16_bf16 / _f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3) -> (d0, d1, d2, d3)``:
  D(16x8, f32) = A(16x16) @ B(16x8) + C. Each ``a``/``b`` register packs two 16-bit values, the
  lower k in the low half. a0: A[g, 2t:2t+2], a1: A[g+8, 2t:2t+2], a2: A[g, 2t+8:2t+10],
  a3: A[g+8, 2t+8:2t+10]; b0: B[2t:2t+2, g], b1: B[2t+8:2t+10, g];
  c0, c1 (d0, d1): C[g, 2t], C[g, 2t+1]; c2, c3: C[g+8, 2t], C[g+8, 2t+1].
* ``mma_m16n8k8_tf32(a0..a3, b0, b1, c0..c3)``: A 16x8, B 8x8, one tf32 (a float32 bit pattern,
  low 13 mantissa bits ignored) per register: a0: A[g, t], a1: A[g+8, t], a2: A[g, t+4],
  a3: A[g+8, t+4]; b0: B[t, g], b1: B[t+4, g]; C/D as above.
* ``mma_m16n8k32_e4m3 / _e5m2(a0..a3, b0, b1, c0..c3)`` (sm_89+): four 8-bit values per register,
  lowest k in the lowest byte: a0: A[g, 4t:4t+4], a1: A[g+8, 4t:4t+4], a2: A[g, 4t+16:4t+20],
  a3: A[g+8, 4t+16:4t+20]; b0: B[4t:4t+4, g], b1: B[4t+16:4t+20, g]; C/D as above.
* ``ldmatrix_x1 / _x2 / _x4(arr, off)`` and ``ldmatrix_x*_trans``: loads 1/2/4 8x8 matrices of
  16-bit elements from shared memory. Lane ``8*j + r`` gives the address of row r of matrix j as
  (shared array, element offset); each row is 16 contiguous, 16-byte aligned bytes. Lane receives,
  for matrix j, register j = M_j[g, 2t] | M_j[g, 2t+1] << 16 (``.trans``: M_j[2t, g] | M_j[2t+1, g] << 16).
  x1 returns a uint32, x2 / x4 tuples. Lanes beyond the matrices used still pass a valid address.
* ``cp_async_ca_4 / _8 / _16(dst, doff, src, soff)``, ``cp_async_cg_16(...)``: copy 4/8/16 bytes
  from global ``src`` at element ``soff`` into shared ``dst`` at element ``doff`` (``.ca`` caches in
  L1, ``.cg`` only in L2); ``cp_async_cg_16_zfill(dst, doff, src, soff, nbytes)`` copies ``nbytes``
  (0..16) and zero-fills the rest (``nbytes = 0``: predicated-off load, ``src`` still a valid address).
  ``cp_async_commit()`` closes a group; ``cp_async_wait_group(N)`` (N a literal) waits until at most
  N groups are pending; ``cp_async_wait_all()``. Visibility to other threads still needs a barrier.
* ``ldmatrix_x4_a / ldmatrix_x4_trans_a(arr, saddr)``, ``cp_async_cg_16_zfill_a(dst, saddr, src, soff,
  nbytes)``: the same with the shared operand given as a 32-bit shared-window byte address
  ``saddr = cvta_shared(arr, 0) + byte offset`` (one integer add per call in the kernel, no 64-bit
  pointer arithmetic or cvta); ``arr`` is only read by the simulator (there ``cvta_shared(arr, 0)``
  is 0, so ``saddr`` is the byte offset into ``arr``).
* ``atom_add_release_gpu(arr, i, v) -> uint32``: ``atom.add.release.gpu.u32`` on ``arr[i]`` (a uint32
  array in global memory), returns the old value; ``ld_acquire_gpu(arr, i) -> uint32``:
  ``ld.acquire.gpu.u32`` of ``arr[i]`` (a spin-wait's read: never cached stale in the L1). The pair
  builds :func:`ncudnn.kernels.primitives.grid_sync.grid_barrier`.
* ``cvta_shared(arr, off) -> uint32``: the shared-window address of ``arr[off]`` (numba's shared
  arrays are generic pointers).
* ``pack_bf16x2 / pack_f16x2(lo, hi) -> uint32`` (round to nearest even, ``cvt.rn.*x2.f32``);
  ``unpack_bf16x2 / unpack_f16x2(u) -> (lo, hi)`` float32; ``f32_to_tf32(x) -> uint32``
  (``cvt.rna.tf32.f32``); ``ex2_approx(x) -> float32``: 2^x by ``ex2.approx.ftz.f32`` (one MUFU op,
  2 ulp; subnormal results flushed to zero, 2^-inf = 0); ``rcp_approx(x) -> float32``: 1 / x by
  ``rcp.approx.ftz.f32`` (1 ulp; unlike ``rcp.rn``, no called slow path, which would serialize a kernel's
  wgmma); ``pack_e4m3x4 / pack_e5m2x4(x0, x1, x2, x3) -> uint32`` (satfinite, sm_89+).
"""
from ...platform import simulator_enabled

__all__ = ["mma_m16n8k16_bf16", "mma_m16n8k16_f16", "mma_m16n8k8_tf32", "mma_m16n8k32_e4m3",
           "mma_m16n8k32_e5m2", "ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4", "ldmatrix_x1_trans",
           "ldmatrix_x2_trans", "ldmatrix_x4_trans", "cp_async_ca_4", "cp_async_ca_8",
           "cp_async_ca_16", "cp_async_cg_16", "cp_async_cg_16_zfill", "cp_async_commit",
           "cp_async_wait_group", "cp_async_wait_all", "cvta_shared", "atom_add_release_gpu", "ld_acquire_gpu", "pack_bf16x2", "pack_f16x2",
           "unpack_bf16x2", "unpack_f16x2", "f32_to_tf32", "ex2_approx", "rcp_approx", "pack_e4m3x4", "pack_e5m2x4",
           "SIM"]

SIM = simulator_enabled()

if SIM:
    from .ptx_sim import (cp_async_ca_4, cp_async_ca_8, cp_async_ca_16,  # noqa: F401
                                 cp_async_cg_16, cp_async_cg_16_zfill, cp_async_commit,
                                 cp_async_wait_all, cp_async_wait_group, cvta_shared, ex2_approx, f32_to_tf32, rcp_approx,
                                 ldmatrix_x1, ldmatrix_x1_trans, ldmatrix_x2, ldmatrix_x2_trans,
                                 ldmatrix_x4, ldmatrix_x4_trans, mma_m16n8k8_tf32,
                                 mma_m16n8k16_bf16, mma_m16n8k16_f16, mma_m16n8k32_e4m3,
                                 mma_m16n8k32_e5m2, pack_bf16x2, pack_e4m3x4, pack_e5m2x4,
                                 pack_f16x2, unpack_bf16x2, unpack_f16x2, ldmatrix_x4_a, ldmatrix_x4_trans_a,
                                 cp_async_cg_16_zfill_a, atom_add_release_gpu, ld_acquire_gpu)
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

    def _casts(context, builder, sig, args, targets):
        return [context.cast(builder, v, t, target)
                for v, t, target in zip(args, sig.args, targets)]

    def _tuple(context, builder, rettype, res, n):
        vals = [builder.extract_value(res, i) for i in range(n)]
        return context.make_tuple(builder, rettype, vals)

    def _check_scalar(name, *tys):
        for t in tys:
            if not isinstance(t, (types.Integer, types.Float, types.Boolean)):
                raise NumbaTypeError(f"{name}: scalar operands expected, got {t}")

    def _elem_ptr(context, builder, aryty, ary, offty, off):
        """Generic pointer to element ``off`` (flat, in elements) of a C-contiguous array."""
        a = context.make_array(aryty)(context, builder, value=ary)
        off = context.cast(builder, off, offty, types.intp)
        return builder.gep(a.data, [off])

    def _shared_addr(builder, ptr):
        p = builder.ptrtoint(ptr, _I64)
        return _asm(builder, _I32, [p], "{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; }",
                    "=r,l", False)

    def _check_array(name, aryty, offty):
        if not isinstance(aryty, types.Array) or not isinstance(offty, types.Integer):
            raise NumbaTypeError(f"{name}: (array, integer element offset) expected, got "
                                 f"({aryty}, {offty})")

    # ---------------------------------------------------------------------------------- mma
    def _make_mma(shape, atype, btype, ka, kb, vtype=types.uint32):
        text_types = f"{shape}.row.col.f32.{atype}.{btype}.f32"
        na, nb = ka, kb
        outs = ",".join(f"${i}" for i in range(4))
        a_ops = ",".join(f"${4 + i}" for i in range(na))
        b_ops = ",".join(f"${4 + na + i}" for i in range(nb))
        c_ops = ",".join(f"${4 + na + nb + i}" for i in range(4))
        text = f"mma.sync.aligned.{text_types} {{{outs}}}, {{{a_ops}}}, {{{b_ops}}}, {{{c_ops}}};"
        cons = ",".join(["=f"] * 4 + ["r"] * (na + nb) + ["f"] * 4)
        name = f"mma.{text_types}"

        @intrinsic
        def mma(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            _check_scalar(name, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)
            ret = types.UniTuple(types.float32, 4)
            sig = ret(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

            def codegen(context, builder, sig, args):
                vals = _casts(context, builder, sig, args, [vtype] * 6 + [types.float32] * 4)
                res = _asm(builder, ir.LiteralStructType([_F32] * 4), vals, text, cons, False)
                return _tuple(context, builder, sig.return_type, res, 4)
            return sig, codegen
        return mma

    mma_m16n8k16_bf16 = _make_mma("m16n8k16", "bf16", "bf16", 4, 2)
    mma_m16n8k16_f16 = _make_mma("m16n8k16", "f16", "f16", 4, 2)
    mma_m16n8k8_tf32 = _make_mma("m16n8k8", "tf32", "tf32", 4, 2)
    mma_m16n8k32_e4m3 = _make_mma("m16n8k32", "e4m3", "e4m3", 4, 2)
    mma_m16n8k32_e5m2 = _make_mma("m16n8k32", "e5m2", "e5m2", 4, 2)

    # ----------------------------------------------------------------------------- ldmatrix
    def _make_ldmatrix(num, trans):
        outs = ",".join(f"${i}" for i in range(num))
        text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
                f"{{{outs}}}, [${num}];")
        cons = ",".join(["=r"] * num + ["r", "~{memory}"])

        @intrinsic
        def ldmatrix(typingctx, arr, off):
            _check_array("ldmatrix", arr, off)
            ret = types.uint32 if num == 1 else types.UniTuple(types.uint32, num)
            sig = ret(arr, off)

            def codegen(context, builder, sig, args):
                ptr = _elem_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
                addr = _shared_addr(builder, ptr)
                rty = _I32 if num == 1 else ir.LiteralStructType([_I32] * num)
                res = _asm(builder, rty, [addr], text, cons, True)
                if num == 1:
                    return res
                return _tuple(context, builder, sig.return_type, res, num)
            return sig, codegen
        return ldmatrix

    ldmatrix_x1 = _make_ldmatrix(1, False)
    ldmatrix_x2 = _make_ldmatrix(2, False)
    ldmatrix_x4 = _make_ldmatrix(4, False)
    ldmatrix_x1_trans = _make_ldmatrix(1, True)
    ldmatrix_x2_trans = _make_ldmatrix(2, True)
    ldmatrix_x4_trans = _make_ldmatrix(4, True)

    def _make_ldmatrix_a(trans):
        text = (f"ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 "
                "{$0,$1,$2,$3}, [$4];")
        cons = "=r,=r,=r,=r,r,~{memory}"

        @intrinsic
        def ldmatrix(typingctx, arr, saddr):
            _check_scalar("ldmatrix (shared address)", saddr)
            ret = types.UniTuple(types.uint32, 4)
            sig = ret(arr, saddr)

            def codegen(context, builder, sig, args):
                addr = context.cast(builder, args[1], sig.args[1], types.uint32)
                res = _asm(builder, ir.LiteralStructType([_I32] * 4), [addr], text, cons, True)
                return _tuple(context, builder, sig.return_type, res, 4)
            return sig, codegen
        return ldmatrix

    ldmatrix_x4_a = _make_ldmatrix_a(False)
    ldmatrix_x4_trans_a = _make_ldmatrix_a(True)

    # ----------------------------------------------------------------------------- cp.async
    def _make_cp_async(cache, nbytes, zfill):
        if zfill:
            text = f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;"
            cons = "r,l,r,~{memory}"
        else:
            text = f"cp.async.{cache}.shared.global [$0], [$1], {nbytes};"
            cons = "r,l,~{memory}"

        def codegen(context, builder, sig, args):
            dptr = _elem_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            sptr = _elem_ptr(context, builder, sig.args[2], args[2], sig.args[3], args[3])
            ops = [_shared_addr(builder, dptr), builder.ptrtoint(sptr, _I64)]
            if zfill:
                ops.append(context.cast(builder, args[4], sig.args[4], types.uint32))
            _asm(builder, ir.VoidType(), ops, text, cons, True)
            return context.get_dummy_value()

        if zfill:
            @intrinsic
            def cp_async(typingctx, dst, doff, src, soff, n):
                _check_array("cp.async dst", dst, doff)
                _check_array("cp.async src", src, soff)
                _check_scalar("cp.async src-size", n)
                return types.void(dst, doff, src, soff, n), codegen
        else:
            @intrinsic
            def cp_async(typingctx, dst, doff, src, soff):
                _check_array("cp.async dst", dst, doff)
                _check_array("cp.async src", src, soff)
                return types.void(dst, doff, src, soff), codegen
        return cp_async

    cp_async_ca_4 = _make_cp_async("ca", 4, False)
    cp_async_ca_8 = _make_cp_async("ca", 8, False)
    cp_async_ca_16 = _make_cp_async("ca", 16, False)
    cp_async_cg_16 = _make_cp_async("cg", 16, False)
    cp_async_cg_16_zfill = _make_cp_async("cg", 16, True)

    @intrinsic
    def cp_async_cg_16_zfill_a(typingctx, dst, saddr, src, soff, n):
        _check_scalar("cp.async dst (shared address)", saddr)
        _check_array("cp.async src", src, soff)
        _check_scalar("cp.async src-size", n)

        def codegen(context, builder, sig, args):
            sptr = _elem_ptr(context, builder, sig.args[2], args[2], sig.args[3], args[3])
            ops = [context.cast(builder, args[1], sig.args[1], types.uint32), builder.ptrtoint(sptr, _I64),
                   context.cast(builder, args[4], sig.args[4], types.uint32)]
            _asm(builder, ir.VoidType(), ops, "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}",
                 True)
            return context.get_dummy_value()
        return types.void(dst, saddr, src, soff, n), codegen

    @intrinsic
    def cp_async_commit(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], "cp.async.commit_group;", "~{memory}", True)
            return context.get_dummy_value()
        return types.void(), codegen

    @intrinsic
    def cp_async_wait_all(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], "cp.async.wait_all;", "~{memory}", True)
            return context.get_dummy_value()
        return types.void(), codegen

    @_intrinsic(target="cuda", prefer_literal=True)
    def cp_async_wait_group(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            raise NumbaTypeError(f"cp_async_wait_group: N must be a compile-time literal, got {n}")
        count = int(n.literal_value)

        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], f"cp.async.wait_group {count};", "~{memory}", True)
            return context.get_dummy_value()
        return types.void(n), codegen

    # ------------------------------------------------------------------- gpu-scope atomics
    @intrinsic
    def atom_add_release_gpu(typingctx, arr, i, v):
        _check_array("atom_add_release_gpu", arr, i)
        if arr.dtype != types.uint32 or not isinstance(v, types.Integer):
            raise NumbaTypeError(f"atom_add_release_gpu: (uint32 array, index, integer) expected, got ({arr}, {i}, {v})")

        def codegen(context, builder, sig, args):
            ptr = _elem_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            p = builder.ptrtoint(ptr, _I64)
            val = context.cast(builder, args[2], sig.args[2], types.uint32)
            return _asm(builder, _I32, [p, val], "atom.add.release.gpu.u32 $0, [$1], $2;", "=r,l,r,~{memory}", True)
        return types.uint32(arr, i, v), codegen

    @intrinsic
    def ld_acquire_gpu(typingctx, arr, i):
        _check_array("ld_acquire_gpu", arr, i)
        if arr.dtype != types.uint32:
            raise NumbaTypeError(f"ld_acquire_gpu: a uint32 array expected, got {arr}")

        def codegen(context, builder, sig, args):
            ptr = _elem_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            p = builder.ptrtoint(ptr, _I64)
            return _asm(builder, _I32, [p], "ld.acquire.gpu.u32 $0, [$1];", "=r,l,~{memory}", True)
        return types.uint32(arr, i), codegen

    @intrinsic
    def cvta_shared(typingctx, arr, off):
        _check_array("cvta_shared", arr, off)

        def codegen(context, builder, sig, args):
            ptr = _elem_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            return _shared_addr(builder, ptr)
        return types.uint32(arr, off), codegen

    # ------------------------------------------------------------------- packing / unpacking
    def _make_pack2(kind):
        text = f"cvt.rn.{kind}x2.f32 $0, $2, $1;"   # first source -> upper half

        @intrinsic
        def pack(typingctx, lo, hi):
            _check_scalar(f"pack_{kind}x2", lo, hi)

            def codegen(context, builder, sig, args):
                vals = _casts(context, builder, sig, args, [types.float32] * 2)
                return _asm(builder, _I32, vals, text, "=r,f,f", False)
            return types.uint32(lo, hi), codegen
        return pack

    pack_bf16x2 = _make_pack2("bf16")
    pack_f16x2 = _make_pack2("f16")

    def _make_unpack2(text):
        @intrinsic
        def unpack(typingctx, u):
            _check_scalar("unpack", u)
            ret = types.UniTuple(types.float32, 2)

            def codegen(context, builder, sig, args):
                v = context.cast(builder, args[0], sig.args[0], types.uint32)
                res = _asm(builder, ir.LiteralStructType([_F32] * 2), [v], text, "=f,=f,r", False)
                return _tuple(context, builder, sig.return_type, res, 2)
            return ret(u), codegen
        return unpack

    unpack_bf16x2 = _make_unpack2("{ .reg .b32 t; shl.b32 t, $2, 16; mov.b32 $0, t; "
                                  "and.b32 t, $2, 0xffff0000; mov.b32 $1, t; }")
    unpack_f16x2 = _make_unpack2("{ .reg .b16 l, h; mov.b32 {l, h}, $2; cvt.f32.f16 $0, l; "
                                 "cvt.f32.f16 $1, h; }")

    @intrinsic
    def f32_to_tf32(typingctx, x):
        _check_scalar("f32_to_tf32", x)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], types.float32)
            return _asm(builder, _I32, [v], "cvt.rna.tf32.f32 $0, $1;", "=r,f", False)
        return types.uint32(x), codegen

    def _make_f32_unary(name, text):
        """An intrinsic ``name(x) -> float32``: the one-operand f32 instruction ``text`` on x as float32."""
        @intrinsic
        def unary(typingctx, x):
            _check_scalar(name, x)

            def codegen(context, builder, sig, args):
                v = context.cast(builder, args[0], sig.args[0], types.float32)
                return _asm(builder, _F32, [v], text, "=f,f", False)
            return types.float32(x), codegen
        return unary

    ex2_approx = _make_f32_unary("ex2_approx", "ex2.approx.ftz.f32 $0, $1;")
    rcp_approx = _make_f32_unary("rcp_approx", "rcp.approx.ftz.f32 $0, $1;")

    def _make_pack_fp8(kind):
        text = (f"{{ .reg .b16 lo, hi; cvt.rn.satfinite.{kind}x2.f32 lo, $2, $1; "
                f"cvt.rn.satfinite.{kind}x2.f32 hi, $4, $3; mov.b32 $0, {{lo, hi}}; }}")

        @intrinsic
        def pack(typingctx, x0, x1, x2, x3):
            _check_scalar(f"pack_{kind}x4", x0, x1, x2, x3)

            def codegen(context, builder, sig, args):
                vals = _casts(context, builder, sig, args, [types.float32] * 4)
                return _asm(builder, _I32, vals, text, "=r,f,f,f,f", False)
            return types.uint32(x0, x1, x2, x3), codegen
        return pack

    pack_e4m3x4 = _make_pack_fp8("e4m3")
    pack_e5m2x4 = _make_pack_fp8("e5m2")
