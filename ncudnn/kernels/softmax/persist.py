"""Persistent softmax / log-softmax row kernel for long rows (inner == 1, 16-byte vectors).

One block per SM loops over rows b, b + gridDim.x, ...; a row (up to 32768 elements) lives in
registers while the next one streams into dynamic shared memory with cp.async, so DRAM sees each
byte once and the loads overlap the block reductions and the stores of the current row.
:mod:`ncudnn.kernels.softmax.axis` re-exports the public names.
"""
import functools
import math

import numba

from numba import cuda
from numba.cuda.np import numpy_support

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, storage_dtype
from ..primitives.warp import SIM, launch, shfl_xor, warp_max, warp_sum
from ..pointwise.vector_rows import load_row_vectors, row_vector_guards, vec_ok, vector_names

__all__ = ["PERSIST_SMEM_MAX", "persist_config", "persist_kernel", "persist_ok", "persist_grid",
           "softmax_forward_persist"]

#: module the generated kernels are named in (numba mangles it into their symbols): the softmax family,
#: like the other softmax kernels (same symbols and compile-check family as ncudnn.kernels.softmax.axis)
_KERNEL_MODULE = "ncudnn.kernels.softmax.axis"

#: most bytes of one row the persistent kernel prefetches into dynamic shared memory (x's storage type)
PERSIST_SMEM_MAX = 200 * 1024


def _reg_budget(threads):
    """Registers a thread may use so a block of ``threads`` always launches (64K per SM)."""
    return min(255, 65536 // threads)


def persist_config(n, vec, block=0):
    """(threads, vectors a thread holds) of the persistent row kernel for rows of n elements with
    ``vec``-element (16-byte) accesses, or None when the row does not fit in the block's registers
    (at most 32 float32 values a thread at 1024 threads, 64 below: the 64K-register file of an SM).
    ``block`` 0 picks the most threads with VPT <= 32 (n = 32768: 1024 threads x 8 vectors of 4)."""
    nv = n // vec
    if not block:
        block = 1024
        while block > 128 and math.ceil(nv / (block // 2)) * vec <= 32:
            block //= 2
    if block % 32 or not 64 <= block <= 1024:
        return None
    vpt = math.ceil(nv / block)
    cap = 32 if block > 512 else 64
    return (block, vpt) if vpt * vec <= cap else None


def _row_persist_source(n, block, vpt, vec, log, ct, prefetch):
    """Persistent row kernel: block b handles rows b, b + gridDim.x, ...; thread t holds vectors
    ``q = t + k * block`` (k < vpt) of the current row in registers: one block max, exp in place,
    one block sum, one store from registers. ``prefetch`` (rows buffered in shared memory, 0..2): while
    a row is reduced and stored, the NEXT row(s) stream into dynamic shared memory with cp.async (16
    bytes, L2 only); each thread copies exactly the vectors it later reads, so only its own
    cp.async.wait_group guards the buffer, and the copies are issued after the thread's local max has
    consumed the registers loaded from it. With 2 buffers every trip commits one group (empty past the
    last row), so ``wait_group(1)`` always means "this row's copies have landed"."""
    ninf, zero, one = po.lit(-math.inf, ct), po.lit(0.0, ct), po.lit(1.0, ct)
    nv, nw = n // vec, block // 32
    guard = row_vector_guards(vpt, block, nv)
    s = ["def kernel(x, y, nrows):", f"    smx = cuda.shared.array(32, {ct})", f"    ssm = cuda.shared.array(32, {ct})"]
    if prefetch:
        s.append("    buf = cuda.shared.array(0, sdt)")
    s += ["    t = cuda.threadIdx.x", "    lane = t % 32", "    wid = t // 32", "    row = cuda.blockIdx.x",
          "    step = cuda.gridDim.x", f"    o0 = u64(t) * u64({vec})"]
    s += [f"    o{k} = o0 + u64({k * block * vec})" for k in range(1, vpt)]
    s += [f"    ok{k} = t < {nv - k * block}" for k in range(vpt) if guard[k]]

    def copies(ind, b, commit=True):
        out = []
        for k in range(vpt):
            i2 = ind
            if guard[k]:
                out.append(f"{ind}if ok{k}:")
                i2 = ind + "    "
            out.append(f"{i2}cpa(buf, o{k} + zo, x, {b} + o{k})")
        return out + ([f"{ind}cp_async_commit()"] if commit else [])

    depth = int(prefetch)
    if depth == 1:
        s += ["    if row < nrows:", f"        nb = u64(row) * u64({n})", "        zo = u64(0)"] + copies("        ", "nb")
    elif depth:
        s.append("    sb = u64(0)")
        for d in range(depth):
            s += [f"    pr = row + {d} * step", "    if pr < nrows:", f"        nb = u64(pr) * u64({n})",
                  f"        zo = u64({d * n})"] + copies("        ", "nb", False) + ["    cp_async_commit()"]
    s += ["    while row < nrows:", f"        base = u64(row) * u64({n})", "        nxt = row + step"]
    if depth:
        s.append(f"        cp_async_wait_group({depth - 1})")
    lines, els, _ = load_row_vectors(vpt, block, nv, vec, ninf, src="buf" if prefetch else "x", define_q=False,
                                     addr=(lambda k: f"o{k}" + (" + sb" if depth > 1 else "")) if prefetch
                                     else (lambda k: f"base + o{k}"), cond=lambda k: f"ok{k}", ind="        ")
    s += lines
    flat = [e for g in els for e in g]
    s.append("        m = v0_0")
    s += [f"        m = m if (m != m or m >= {e}) else {e}" for e in flat[1:]]
    if depth == 1:
        # zo (0, opaque to the compiler) keeps the shared addresses of the copies in the loop: hoisted,
        # they would hold vpt registers across it (spills at 1024 threads)
        s += ["        if nxt < nrows:", f"            nb = u64(nxt) * u64({n})", "            zo = u64(nxt) >> u64(48)"] + \
            copies("            ", "nb")
    elif depth:   # the buffer just read takes the row ``depth`` trips ahead
        s += [f"        pr = row + {depth} * step", "        if pr < nrows:", f"            nb = u64(pr) * u64({n})",
              "            zo = sb"] + copies("            ", "nb", False) + ["        cp_async_commit()"]
    s += ["        m = warp_max(m)", "        if lane == 0:", "            smx[wid] = m", "        cuda.syncthreads()",
          f"        m = warp_max(smx[lane] if lane < {nw} else {ninf})" if nw < 32 else "        m = warp_max(smx[lane])"]
    if log:
        s.append("        a = " + " + ".join(f"math.exp({e} - m)" for e in flat))
    else:
        s += [f"        {e} = math.exp({e} - m)" for e in flat]
        s.append("        a = " + " + ".join(flat))
    s += ["        a = warp_sum(a)", "        if lane == 0:", "            ssm[wid] = a", "        cuda.syncthreads()",
          f"        a = warp_sum(ssm[lane] if lane < {nw} else {zero})" if nw < 32 else "        a = warp_sum(ssm[lane])",
          "        r = m + math.log(a)" if log else f"        r = {one} / a"]
    for k in range(vpt):
        ind = "        "
        if guard[k]:
            s.append(f"        if ok{k}:")
            ind += "    "
        vals = [f"cy({e} - r)" if log else f"cy({e} * r)" for e in els[k]]
        s.append(f"{ind}stvy(y, base + o{k}, ({', '.join(vals)}))")
    s.append("        row = nxt")
    if depth > 1:
        s.append(f"        sb = sb + u64({n}) if sb < u64({(depth - 1) * n}) else u64(0)")
    return "\n".join(s) + "\n"


@functools.lru_cache(maxsize=None)
def persist_kernel(n, log, vec, block, prefetch, x_dt, y_dt):
    """The persistent row kernel (:func:`_row_persist_source`) for rows of n elements, ``vec`` elements
    per access (n % vec == 0, x / y aligned to 16 bytes); returns (dispatcher, threads, dynamic shared
    bytes, source). Arguments ``(x, y, nrows)``; any grid (see :func:`persist_grid`)."""
    from ..primitives.ptx import cp_async_cg_16, cp_async_commit, cp_async_wait_group
    ct = compute_type([x_dt, y_dt])
    threads, vpt = persist_config(n, vec, block)
    src = _row_persist_source(n, threads, vpt, vec, log, ct, prefetch)
    ns = dict(po.expr_globals(), __name__=_KERNEL_MODULE, cuda=cuda, shfl_xor=shfl_xor, warp_sum=warp_sum,
              warp_max=warp_max, u64=numba.uint64, **vector_names(vec, x_dt, y_dt, ct), cpa=cp_async_cg_16,
              cp_async_commit=cp_async_commit, cp_async_wait_group=cp_async_wait_group,
              sdt=numpy_support.from_dtype(storage_dtype(x_dt)))
    exec(compile(src, "<softmax persist>", "exec"), ns)
    kern = cuda.jit(ns["kernel"]) if SIM else cuda.jit(ns["kernel"], max_registers=_reg_budget(threads))
    shared = int(prefetch) * n * storage_dtype(x_dt).itemsize
    return kern, threads, shared, src


def persist_ok(n, itemsizes, x_itemsize, block=0, prefetch=1):
    """Rows of n elements run on the persistent kernel: 16-byte vectors divide the row, it fits in
    the block's registers and ``prefetch`` rows of x's storage in PERSIST_SMEM_MAX bytes of shared memory."""
    vec = 16 // max(itemsizes)
    return vec_ok(n, itemsizes, vec) and persist_config(n, vec, block) is not None and \
        int(prefetch) * n * x_itemsize <= PERSIST_SMEM_MAX


def persist_grid(nrows, ctas=0, sms=0):
    """Blocks of a persistent launch: ``ctas`` (> 0) or one per SM, never more than the rows."""
    from ..primitives.warp import sm_count
    return max(1, min(nrows, ctas or (sms or sm_count())))


def softmax_forward_persist(x, y, rows, n, *, log=False, x_dtype="float32", y_dtype="float32", block=0,
                            prefetch=1, ctas=0, stream=0):
    """y = softmax (log-softmax) of the rows of x, both packed (rows, n) device arrays aligned to 16
    bytes, on the persistent kernel (:func:`persist_ok` must hold): ``prefetch`` rows (0..2) buffered in
    shared memory ahead of the one in registers; ``ctas`` blocks (0: one per SM)."""
    vec = 16 // max(storage_dtype(x_dtype).itemsize, storage_dtype(y_dtype).itemsize)
    kern, threads, shared, _ = persist_kernel(n, log, vec, block, prefetch, x_dtype, y_dtype)
    grid = persist_grid(rows, ctas)
    args = (x.reshape(x.size), y.reshape(y.size), rows)
    if not shared:
        launch(kern, grid, threads, stream, *args)
        return
    from ..runtime import kcache
    from ..runtime.dtypes import array_sig
    sig = f"void({array_sig(x_dtype)}, {array_sig(y_dtype)}, int64)"
    ck = kcache.get_or_compile(f"softmax_persist:{n}:{log}:{vec}:{threads}:{int(prefetch)}:{x_dtype}:{y_dtype}",
                               lambda: kern, sig)
    ck.launch(grid, threads, args, stream, shared)
