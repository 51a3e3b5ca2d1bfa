"""Split-K helpers shared by GEMM and the implicit-GEMM convolutions.

* deterministic ("workspace"): the block kernel stores raw partial sums to a workspace laid out
  ``[batch, SPLITS, M, N]`` (``ftype``); :func:`make_reduce` sums the SPLITS slices in a fixed order
  (slice 0 first; loads issued four slices at a time) and applies the real epilogue. :func:`workspace_elems` is exact.
  :func:`make_reduce_wide` is the same sum for many slices (wgrad splits a long reduction 64-1024
  ways): group r sums slices r, r + ROWS, ... with four independent accumulators, the groups are
  added in order (deterministic, order fixed by (SPLITS, ROWS); up to ROWS slices the plain
  sequence). A thread owns 4 outputs: 16-byte loads (N % 4 == 0, aligned workspace) or 4-byte loads,
  8 slices' loads in flight; sums pass through shared memory so each store instruction writes 32
  consecutive outputs; :func:`wide_grid` picks the flat layout (a thread sums all slices) or the rows
  layout (a warp a group, for few outputs and many slices); on the H200 it runs at about the speed of a
  torch.sum over the slices (dev/perf_notes.md, "SIMT GEMM"). :func:`make_reduce_wide_v1`, the first
  version (one 4-byte load a thread, 32 outputs a 512-thread block, far slower), is kept for the probe.
* atomic (NONDETERMINISTIC: float addition order varies run to run): :func:`make_prescale` sets
  ``out = beta * out`` (``0`` when beta == 0, never reading out), then the block kernel atomically
  adds ``alpha * partial``. Only for a linear epilogue (alpha/beta) and fp32/fp64 outputs.
"""
import numpy as np
from numba import cuda, float32, float64, int64, uint64

from ...platform import simulator_enabled
from .vec import addr, ldg4

_CACHE = {}
REDUCE_THREADS = 256


def k_slice(K, splits, block_k):
    """K range per split, a multiple of BLOCK_K (the last split may be shorter or empty)."""
    per = -(-K // splits)
    return -(-per // block_k) * block_k


def workspace_elems(batch, M, N, splits):
    return 0 if splits <= 1 else batch * splits * M * N


def workspace_args(ws, M, N):
    """Output args addressing the workspace as [batch*SPLITS, M, N] (strided_output layout)."""
    return (ws, M * N, 0, 1, N, 1)


def make_store(OUT, EPI, ftype="float32"):
    """Device function ``store(v, z, m, n, o_args, bias_args, r_args, alpha, beta)``: the epilogue of one
    summed output (batch z, row m, column n): bias / residual / output addressing, then ``EPI.fn``.
    Both reduce kernels end in it."""
    key = ("store", OUT.key, EPI.key, ftype)
    if key in _CACHE:
        return _CACHE[key]
    o_row, o_col, epi = OUT.row, OUT.col, EPI.fn
    BIAS_ROW, BIAS_COL, RESIDUAL = EPI.BIAS == "row", EPI.BIAS == "col", EPI.RESIDUAL

    @cuda.jit(device=True, inline=True)
    def store(v, z, m, n, o_args, bias_args, r_args, alpha, beta):
        b_off = z * bias_args[1]
        if BIAS_ROW:
            b_off += m * bias_args[2]
        if BIAS_COL:
            b_off += n * bias_args[2]
        r_off = o_row(r_args, z, m) + o_col(r_args, z, n) if RESIDUAL else 0
        epi(v, o_args[0], o_row(o_args, z, m) + o_col(o_args, z, n), bias_args[0], b_off,
            r_args[0], r_off, alpha, beta)

    _CACHE[key] = store
    return store


def make_reduce(OUT, EPI, ftype="float32"):
    """kernel(ws, splits, o_args, bias_args, r_args, batch, M, N, alpha, beta): grid over batch*M*N."""
    key = ("reduce", OUT.key, EPI.key, ftype)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    store = make_store(OUT, EPI, ftype)

    @cuda.jit
    def reduce_kernel(ws, SPLITS, o_args, bias_args, r_args, BATCH, M, N, alpha, beta):
        idx = cuda.grid(1)
        if idx >= BATCH * M * N:
            return
        n = idx % N
        m = (idx // N) % M
        z = idx // (M * N)
        MN = M * N
        # slices in a fixed order (0, 1, ..., SPLITS-1), their loads issued four at a time (independent
        # of the sum: four DRAM round trips overlap instead of queueing behind each add)
        p = uint64(z * SPLITS * MN + m * N + n)
        step = uint64(MN)
        v = ACC(0)
        s = 0
        while s + 4 <= SPLITS:
            a0 = ws[p]
            a1 = ws[p + step]
            a2 = ws[p + uint64(2) * step]
            a3 = ws[p + uint64(3) * step]
            v = (((v + a0) + a1) + a2) + a3
            p += uint64(4) * step
            s += 4
        while s < SPLITS:
            v += ws[p]
            p += step
            s += 1
        store(v, z, m, n, o_args, bias_args, r_args, alpha, beta)

    _CACHE[key] = reduce_kernel
    return reduce_kernel


def _sums(ld, ACC, ROWS, BATCH=8):
    """(seq_sum, group_sum) over the loader ``ld(ws, p0, p1, p2, p3, off)`` (4 values of one slice): one
    pair a loader, so that a thread's loads are straight-line code, not one branch each. ``BATCH`` (8 or
    4): the slices whose loads seq_sum issues before their adds."""
    key = ("sums", ld, ACC, ROWS, BATCH)
    if key in _CACHE:
        return _CACHE[key]

    @cuda.jit(device=True, inline=True)
    def seq4(ws, p0, p1, p2, p3, MN, SPLITS, s, off, v0, v1, v2, v3):
        """slices s .. SPLITS-1 added in order to v, four loads issued before their adds, then one."""
        while s + 4 <= SPLITS:
            x0 = ld(ws, p0, p1, p2, p3, off)
            x1 = ld(ws, p0, p1, p2, p3, off + MN)
            x2 = ld(ws, p0, p1, p2, p3, off + 2 * MN)
            x3 = ld(ws, p0, p1, p2, p3, off + 3 * MN)
            v0 = (((v0 + x0[0]) + x1[0]) + x2[0]) + x3[0]
            v1 = (((v1 + x0[1]) + x1[1]) + x2[1]) + x3[1]
            v2 = (((v2 + x0[2]) + x1[2]) + x2[2]) + x3[2]
            v3 = (((v3 + x0[3]) + x1[3]) + x2[3]) + x3[3]
            off += 4 * MN
            s += 4
        while s < SPLITS:
            x0 = ld(ws, p0, p1, p2, p3, off)
            v0 += x0[0]
            v1 += x0[1]
            v2 += x0[2]
            v3 += x0[3]
            off += MN
            s += 1
        return v0, v1, v2, v3

    if BATCH == 4:
        @cuda.jit(device=True, inline=True)
        def seq_sum(ws, p0, p1, p2, p3, MN, SPLITS):
            """slices 0 .. SPLITS-1 in order."""
            return seq4(ws, p0, p1, p2, p3, MN, SPLITS, 0, int64(0), ACC(0), ACC(0), ACC(0), ACC(0))
    else:
        @cuda.jit(device=True, inline=True)
        def seq_sum(ws, p0, p1, p2, p3, MN, SPLITS):
            """slices 0 .. SPLITS-1 in order, eight loads issued before their adds (then as seq4)."""
            v0 = ACC(0)
            v1 = ACC(0)
            v2 = ACC(0)
            v3 = ACC(0)
            off = int64(0)
            s = 0
            while s + 8 <= SPLITS:
                x0 = ld(ws, p0, p1, p2, p3, off)
                x1 = ld(ws, p0, p1, p2, p3, off + MN)
                x2 = ld(ws, p0, p1, p2, p3, off + 2 * MN)
                x3 = ld(ws, p0, p1, p2, p3, off + 3 * MN)
                x4 = ld(ws, p0, p1, p2, p3, off + 4 * MN)
                x5 = ld(ws, p0, p1, p2, p3, off + 5 * MN)
                x6 = ld(ws, p0, p1, p2, p3, off + 6 * MN)
                x7 = ld(ws, p0, p1, p2, p3, off + 7 * MN)
                v0 = (((((((v0 + x0[0]) + x1[0]) + x2[0]) + x3[0]) + x4[0]) + x5[0]) + x6[0]) + x7[0]
                v1 = (((((((v1 + x0[1]) + x1[1]) + x2[1]) + x3[1]) + x4[1]) + x5[1]) + x6[1]) + x7[1]
                v2 = (((((((v2 + x0[2]) + x1[2]) + x2[2]) + x3[2]) + x4[2]) + x5[2]) + x6[2]) + x7[2]
                v3 = (((((((v3 + x0[3]) + x1[3]) + x2[3]) + x3[3]) + x4[3]) + x5[3]) + x6[3]) + x7[3]
                off += 8 * MN
                s += 8
            return seq4(ws, p0, p1, p2, p3, MN, SPLITS, s, off, v0, v1, v2, v3)

    @cuda.jit(device=True, inline=True)
    def group_sum(ws, p0, p1, p2, p3, MN, SPLITS, r):
        """group r's partial: slices r, r + ROWS, ... into four accumulators in turn, then (a0 + a1) + (a2 + a3)."""
        a00 = ACC(0)
        a01 = ACC(0)
        a02 = ACC(0)
        a03 = ACC(0)
        a10 = ACC(0)
        a11 = ACC(0)
        a12 = ACC(0)
        a13 = ACC(0)
        a20 = ACC(0)
        a21 = ACC(0)
        a22 = ACC(0)
        a23 = ACC(0)
        a30 = ACC(0)
        a31 = ACC(0)
        a32 = ACC(0)
        a33 = ACC(0)
        step = ROWS * MN
        off = r * MN
        s = r
        while s + 3 * ROWS < SPLITS:
            x0 = ld(ws, p0, p1, p2, p3, off)
            x1 = ld(ws, p0, p1, p2, p3, off + step)
            x2 = ld(ws, p0, p1, p2, p3, off + 2 * step)
            x3 = ld(ws, p0, p1, p2, p3, off + 3 * step)
            a00 += x0[0]
            a01 += x0[1]
            a02 += x0[2]
            a03 += x0[3]
            a10 += x1[0]
            a11 += x1[1]
            a12 += x1[2]
            a13 += x1[3]
            a20 += x2[0]
            a21 += x2[1]
            a22 += x2[2]
            a23 += x2[3]
            a30 += x3[0]
            a31 += x3[1]
            a32 += x3[2]
            a33 += x3[3]
            off += 4 * step
            s += 4 * ROWS
        while s < SPLITS:
            x0 = ld(ws, p0, p1, p2, p3, off)
            a00 += x0[0]
            a01 += x0[1]
            a02 += x0[2]
            a03 += x0[3]
            off += step
            s += ROWS
        return ((a00 + a10) + (a20 + a30), (a01 + a11) + (a21 + a31), (a02 + a12) + (a22 + a32),
                (a03 + a13) + (a23 + a33))

    _CACHE[key] = seq_sum, group_sum
    return seq_sum, group_sum


#: slice groups of the wide reduce: group r sums slices r, r + WIDE_ROWS, ... (the summation order)
WIDE_ROWS = 16
#: slices from which the launchers use the wide reduce
WIDE_FROM = 8
#: threads a block of the wide reduce's flat layout (one thread: 4 outputs, every slice)
WIDE_FLAT_THREADS = 256
#: outputs from which :func:`wide_grid` picks the flat layout whatever the slice count
WIDE_FLAT_FROM = 1 << 19


def make_reduce_wide(OUT, EPI, ftype="float32", rows=WIDE_ROWS, store_mode="transpose", batch=8):
    """kernel(ws, splits, o_args, bias_args, r_args, batch, M, N, alpha, beta) like :func:`make_reduce`,
    launched as :func:`wide_grid` says. Every thread owns 4 outputs of a warp's 128 consecutive ones:
    with N % 4 == 0 and a 16-byte aligned workspace (float32) outputs 4 * lane .. + 3, each slice read
    as one 16-byte load; otherwise outputs lane, lane + 32, lane + 64, lane + 96 (4-byte loads, still
    128 bytes a warp). Two layouts, told apart by the block size:

    * flat (``WIDE_FLAT_THREADS`` threads, 1024 outputs a block): one thread sums every slice of its
      outputs, 8 slices' loads issued before their adds (4 with more slices than ``rows``);
    * rows (``32 * rows`` threads, 128 outputs a block): warp r sums group r (slices r, r + rows, ...),
      warp 0 adds the groups through shared memory: for few outputs and many slices.

    The sum is the same in both and deterministic: group r's slices go to four accumulators in turn
    (r, r + rows, r + 2 rows, r + 3 rows; then again), a group's partial is (a0 + a1) + (a2 + a3), the
    output adds the group partials 0, 1, ..., rows - 1 in order. Up to ``rows`` slices that is the
    plain sequence slice 0, 1, 2, ... (the narrow reduce's order). ``store_mode`` "direct": each
    thread stores its own 4 outputs; "transpose": the vector path's sums pass through shared memory
    so that a warp's 32 stores of one instruction are 32 consecutive outputs."""
    assert 32 * rows != WIDE_FLAT_THREADS and store_mode in ("direct", "transpose")
    assert batch in (4, 8)
    key = ("reduce_wide2", OUT.key, EPI.key, ftype, rows, store_mode, batch)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    ROWS, FLAT_T, TRANSPOSE = rows, WIDE_FLAT_THREADS, store_mode == "transpose"
    BUF_W = max(ROWS, FLAT_T // 32) if TRANSPOSE else 1      # warps of a block, either layout
    store = make_store(OUT, EPI, ftype)
    seq_v, group_v = _sums(_ld_vec if ftype == "float32" else _ld_contig, ACC, ROWS, batch)
    seq_s, group_s = _sums(_ld_scalar, ACC, ROWS, batch)

    @cuda.jit(device=True, inline=True)
    def locate(e, BATCH, M, N, MN, SPLITS):
        """(z, m, n, workspace offset of slice 0) of flat output e."""
        z = int64(0)
        r = e
        if BATCH != 1:
            z = e // MN
            r = e - z * MN
        m = r // N
        return z, m, r - m * N, z * SPLITS * MN + r

    @cuda.jit
    def reduce_wide_kernel(ws, SPLITS, o_args, bias_args, r_args, BATCH, M, N, alpha, beta):
        part = cuda.shared.array((ROWS, 4, 32), ACC)
        buf = cuda.shared.array((BUF_W, 128), ACC)
        tid = cuda.threadIdx.x
        lane = tid % 32
        w = tid // 32
        flat = cuda.blockDim.x == FLAT_T
        MN = int64(M) * N
        TOTAL = BATCH * MN
        if flat:
            chunk = (int64(cuda.blockIdx.x) * (FLAT_T // 32) + w) * 128
        else:
            chunk = int64(cuda.blockIdx.x) * 128
        vec = N % 4 == 0 and addr(ws) % uint64(16) == uint64(0)
        # workspace offsets of this thread's 4 outputs (slice 0): e0 .. e0 + 3 (vector) or e0, e0 + 32, ...
        # (scalar); past the end: offset 0, not stored
        e0 = chunk + 4 * lane if vec else chunk + lane
        z = int64(0)
        r = e0
        if BATCH != 1:
            z = e0 // MN
            r = e0 - z * MN
        SMN = SPLITS * MN
        p0 = z * SMN + r if e0 < TOTAL else int64(0)
        p1 = p0
        p2 = p0
        p3 = p0
        if not vec:
            r += 32
            while r >= MN:
                r -= MN
                z += 1
            p1 = z * SMN + r if e0 + 32 < TOTAL else int64(0)
            r += 32
            while r >= MN:
                r -= MN
                z += 1
            p2 = z * SMN + r if e0 + 64 < TOTAL else int64(0)
            r += 32
            while r >= MN:
                r -= MN
                z += 1
            p3 = z * SMN + r if e0 + 96 < TOTAL else int64(0)
        v0 = ACC(0)
        v1 = ACC(0)
        v2 = ACC(0)
        v3 = ACC(0)
        if flat and SPLITS <= ROWS:     # one slice a group: the plain sequence
            if chunk < TOTAL:
                if vec:
                    v0, v1, v2, v3 = seq_v(ws, p0, p1, p2, p3, MN, SPLITS)
                else:
                    v0, v1, v2, v3 = seq_s(ws, p0, p1, p2, p3, MN, SPLITS)
        else:                           # flat: groups 0 .. ROWS-1 in turn; rows: group w
            r = 0 if flat else w
            r_end = ROWS if flat and chunk < TOTAL else (r if flat else r + 1)
            while r < r_end:
                if vec:
                    g0, g1, g2, g3 = group_v(ws, p0, p1, p2, p3, MN, SPLITS, r)
                else:
                    g0, g1, g2, g3 = group_s(ws, p0, p1, p2, p3, MN, SPLITS, r)
                v0 += g0
                v1 += g1
                v2 += g2
                v3 += g3
                r += 1
        tr = TRANSPOSE and vec
        if not flat:                    # group partials through shared memory, added in order by warp 0
            part[w, 0, lane] = v0
            part[w, 1, lane] = v1
            part[w, 2, lane] = v2
            part[w, 3, lane] = v3
            cuda.syncthreads()
            if w != 0:
                return
            # transposed: output lane + 32 j is value lane % 4 of thread lane // 4 + 8 j
            k = lane % 4 if tr else 0
            t = lane // 4 if tr else lane
            dk = 0 if tr else 1
            dt = 8 if tr else 0
            v0 = ACC(0)
            v1 = ACC(0)
            v2 = ACC(0)
            v3 = ACC(0)
            for j in range(ROWS):
                v0 += part[j, k, t]
                v1 += part[j, k + dk, t + dt]
                v2 += part[j, k + 2 * dk, t + 2 * dt]
                v3 += part[j, k + 3 * dk, t + 3 * dt]
        elif tr:                        # sums of outputs 4 lane .. + 3 -> lane + 32 j through shared memory
            buf[w, 4 * lane] = v0
            buf[w, 4 * lane + 1] = v1
            buf[w, 4 * lane + 2] = v2
            buf[w, 4 * lane + 3] = v3
            _warp_sync()
            v0 = buf[w, lane]
            v1 = buf[w, lane + 32]
            v2 = buf[w, lane + 64]
            v3 = buf[w, lane + 96]
        # outputs e, e + 1, e + 2, e + 3 of one row (16-byte path, direct) or e, e + 32, e + 64, e + 96
        strided = tr or not vec
        e = chunk + lane if strided else e0
        de = 32 if strided else 1
        z = int64(0)
        m = int64(0)
        n = int64(0)
        if e < TOTAL:
            z, m, n, _ = locate(e, BATCH, M, N, MN, SPLITS)
        for j in range(4):
            if e < TOTAL:
                if j > 0 and strided:
                    z, m, n, _ = locate(e, BATCH, M, N, MN, SPLITS)
                v = v0 if j == 0 else (v1 if j == 1 else (v2 if j == 2 else v3))
                store(v, z, m, n, o_args, bias_args, r_args, alpha, beta)
            e += de
            if not strided:
                n += 1

    _CACHE[key] = reduce_wide_kernel
    return reduce_wide_kernel


def wide_grid(total, rows=WIDE_ROWS, splits=None):
    """(blocks, threads) of :func:`make_reduce_wide` over ``total`` outputs: the flat layout from
    ``WIDE_FLAT_FROM`` outputs, or up to ``rows`` slices when ``splits`` is given; else the rows layout."""
    if total >= WIDE_FLAT_FROM or (splits is not None and splits <= rows):
        return max(1, -(-total // (4 * WIDE_FLAT_THREADS))), WIDE_FLAT_THREADS
    return max(1, -(-total // 128)), 32 * rows


if simulator_enabled():
    @cuda.jit(device=True)
    def _warp_sync():
        cuda.syncthreads()     # the simulator has no syncwarp (every thread of the block gets there)
else:
    @cuda.jit(device=True, inline=True)
    def _warp_sync():
        cuda.syncwarp()


@cuda.jit(device=True, inline=True)
def _ld_vec(ws, p0, p1, p2, p3, off):
    """ws[p0 + off .. + 3] (float32, p0 + off % 4 == 0, 16-byte aligned base) as one 16-byte load."""
    return ldg4(ws, p0 + off)


@cuda.jit(device=True, inline=True)
def _ld_contig(ws, p0, p1, p2, p3, off):
    """ws[p0 + off .. + 3] as four loads (float64 workspaces)."""
    i = p0 + off
    return ws[uint64(i)], ws[uint64(i + 1)], ws[uint64(i + 2)], ws[uint64(i + 3)]


@cuda.jit(device=True, inline=True)
def _ld_scalar(ws, p0, p1, p2, p3, off):
    """ws[p0 + off], ws[p1 + off], ws[p2 + off], ws[p3 + off] (4-byte loads, any alignment)."""
    return ws[uint64(p0 + off)], ws[uint64(p1 + off)], ws[uint64(p2 + off)], ws[uint64(p3 + off)]


def make_reduce_wide_v1(OUT, EPI, ftype="float32", rows=WIDE_ROWS):
    """The first wide reduce, kept for comparison (experiments/probe_splitk_reduce.py): a block of 32 x
    rows threads owns 32 outputs, one 4-byte load a thread per slice group, launched with :func:`wide_grid_v1`
    (2 M blocks for 64 M outputs). Same sum as :func:`make_reduce_wide`."""
    key = ("reduce_wide_v1", OUT.key, EPI.key, ftype, rows)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    ROWS = rows
    store = make_store(OUT, EPI, ftype)

    @cuda.jit
    def reduce_wide_kernel(ws, SPLITS, o_args, bias_args, r_args, BATCH, M, N, alpha, beta):
        part = cuda.shared.array((ROWS, 33), ACC)
        tid = cuda.threadIdx.x
        tx = tid % 32
        ty = tid // 32
        idx = cuda.blockIdx.x * 32 + tx
        MN = M * N
        live = idx < BATCH * MN
        z = idx // MN
        r = idx - z * MN
        a0 = ACC(0)
        a1 = ACC(0)
        a2 = ACC(0)
        a3 = ACC(0)
        if live:
            p = uint64(z * SPLITS * MN + r + ty * MN)
            step = uint64(ROWS * MN)
            step2 = uint64(2 * ROWS * MN)
            step3 = uint64(3 * ROWS * MN)
            step4 = uint64(4 * ROWS * MN)
            s = ty
            while s + 3 * ROWS < SPLITS:
                a0 += ws[p]
                a1 += ws[p + step]
                a2 += ws[p + step2]
                a3 += ws[p + step3]
                p += step4
                s += 4 * ROWS
            while s < SPLITS:
                a0 += ws[p]
                p += step
                s += ROWS
        part[ty, tx] = (a0 + a1) + (a2 + a3)
        cuda.syncthreads()
        if ty == 0 and live:
            v = ACC(0)
            for j in range(ROWS):
                v += part[j, tx]
            store(v, z, r // N, r % N, o_args, bias_args, r_args, alpha, beta)

    _CACHE[key] = reduce_wide_kernel
    return reduce_wide_kernel


def wide_grid_v1(total, rows=WIDE_ROWS):
    """(blocks, threads) of :func:`make_reduce_wide_v1` over ``total`` outputs."""
    return max(1, -(-total // 32)), 32 * rows


def make_prescale(OUT, ftype="float32"):
    """kernel(o_args, batch, M, N, beta): out = beta * out, or 0 when beta == 0 (out not read)."""
    key = ("prescale", OUT.key, ftype)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if ftype == "float64" else float32
    o_row, o_col = OUT.row, OUT.col

    @cuda.jit
    def prescale_kernel(o_args, BATCH, M, N, beta):
        idx = cuda.grid(1)
        if idx >= BATCH * M * N:
            return
        n = idx % N
        m = (idx // N) % M
        z = idx // (M * N)
        off = o_row(o_args, z, m) + o_col(o_args, z, n)
        out = o_args[0]
        if beta == 0:
            out[off] = ACC(0)
        else:
            out[off] = ACC(beta) * out[off]

    _CACHE[key] = prescale_kernel
    return prescale_kernel


def launch_1d(kernel, total, stream, *args):
    blocks = max(1, -(-total // REDUCE_THREADS))
    kernel[blocks, REDUCE_THREADS, stream](*args)


def f(ftype):
    return np.float64 if ftype == "float64" else np.float32
