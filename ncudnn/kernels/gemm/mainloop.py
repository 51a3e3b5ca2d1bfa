"""The GEMM block kernel: one mainloop, pluggable operand loaders, a separate epilogue.

``make_block_kernel(cfg, A, B, OUT, EPI, acc)`` returns a ``cuda.jit`` kernel computing, for every
batch index ``z`` and tile, ``acc[m, n] = sum_k A(z, m, k) * B(z, k, n)`` over ``k`` in the block's
split-K slice, then handing each accumulator to the epilogue. GEMM and implicit-GEMM convolution use
it unchanged; they differ only in the operand objects:

* an operand (A or B) has ``FAST`` ("k" or "outer": which index is contiguous in memory, so global
  loads are coalesced), ``setup(args, z, outer) -> (s0, s1, s2, s3)`` (int64 state computed once per
  thread and load slot, e.g. a row base offset, or an output pixel's (offset, d0, h0, w0) for a
  conv) and ``load(args, s0, s1, s2, s3, k) -> value``. Rows / columns past M / N are clamped to
  the last one (always addressable, never stored), so only the k edge and conv padding need
  predication; loads past the block's k range are not issued (zeros instead);
* the output ``OUT`` has ``row(args, z, m)`` and ``col(args, z, n)`` element offsets into ``args[0]``;
* the epilogue ``EPI`` is ``fn(v, out, o_off, bias, b_off, res, r_off, alpha, beta)`` plus flags
  ``BIAS`` ("row" | "col" | None) and ``RESIDUAL`` (bool). See ncudnn/kernels/pointwise/epilogue.py.

Kernel signature (pointers / sizes / meta, Triton style):
``kernel(a_args, b_args, o_args, bias_args, r_args, M, N, K, K_SLICE, SPLITS, alpha, beta)``
with grid ``(ceil(N/BLOCK_N), ceil(M/BLOCK_M), batch * SPLITS)``; ``bias_args = (bias, s_z, s_i)``.
"""
from numba import cuda, float32, float64, int64, uint64

from ...platform import simulator_enabled
from .vec import ld4

_CACHE = {}


def _make_mma(BLOCK_K, THREAD_M, THREAD_N, THREAD_ROWS, THREAD_COLS, UNROLL_K, VEC):
    """acc += As[cur]^T Bs[cur] for one shared tile: UNROLL_K k-steps written out in the source
    text per trip of a k loop (the i/j fragment loops are literal, unrolled by LLVM).

    Fragment indices are uint64 (numba adds no negative-index fix-up for unsigned indices), so the
    compiler folds each read into one base register plus an immediate offset. VEC=4 reads each
    group of 4 consecutive fragment elements with one 16-byte shared load (vec.ld4).
    """
    key = ("mma", BLOCK_K, THREAD_M, THREAD_N, THREAD_ROWS, THREAD_COLS, UNROLL_K, VEC)
    if key in _CACHE:
        return _CACHE[key]
    lines = ["def mma(As, Bs, cur, ty, tx, acc, af, bf):",
             "    c = uint64(cur)",
             f"    y = uint64(ty * {VEC})",
             f"    x = uint64(tx * {VEC})",
             f"    for k0 in range(0, {BLOCK_K}, {UNROLL_K}):",
             "        k = uint64(k0)"]
    for u in range(UNROLL_K):
        if VEC == 1:
            lines += [f"        for i in range({THREAD_M}):",
                      f"            af[i] = As[c, k + uint64({u}), y + uint64(i * {THREAD_ROWS})]",
                      f"        for j in range({THREAD_N}):",
                      f"            bf[j] = Bs[c, k + uint64({u}), x + uint64(j * {THREAD_COLS})]"]
        else:
            lines += [f"        for g in range({THREAD_M // 4}):",
                      f"            v = ld4(As, c, k + uint64({u}), y + uint64(g * {THREAD_ROWS * 4}))",
                      "            af[4 * g] = v[0]",
                      "            af[4 * g + 1] = v[1]",
                      "            af[4 * g + 2] = v[2]",
                      "            af[4 * g + 3] = v[3]",
                      f"        for g in range({THREAD_N // 4}):",
                      f"            v = ld4(Bs, c, k + uint64({u}), x + uint64(g * {THREAD_COLS * 4}))",
                      "            bf[4 * g] = v[0]",
                      "            bf[4 * g + 1] = v[1]",
                      "            bf[4 * g + 2] = v[2]",
                      "            bf[4 * g + 3] = v[3]"]
        lines += [f"        for i in range({THREAD_M}):",
                  f"            for j in range({THREAD_N}):",
                  f"                acc[i, j] += af[i] * bf[j]"]
    g = {"uint64": uint64, "ld4": ld4}
    exec("\n".join(lines) + "\n", g)
    _CACHE[key] = cuda.jit(device=True, inline=True)(g["mma"])
    return _CACHE[key]


_TILE_COORDS = {}


def make_tile_coords(swizzle):
    """Device function ``tile_coords(grid_n, grid_m) -> (tile_m, tile_n)`` of this block (both mainloops);
    ``swizzle`` > 1 walks that many tile rows together (L2 reuse)."""
    if swizzle in _TILE_COORDS:
        return _TILE_COORDS[swizzle]
    SWIZZLE = swizzle

    @cuda.jit(device=True, inline=True)
    def tile_coords(grid_n, grid_m):
        bx = cuda.blockIdx.x
        by = cuda.blockIdx.y
        if SWIZZLE == 1:
            return by, bx
        pid = by * grid_n + bx
        width = SWIZZLE * grid_n
        group = pid // width
        first_m = group * SWIZZLE
        rows = min(grid_m - first_m, SWIZZLE)
        return first_m + (pid % width) % rows, (pid % width) // rows

    _TILE_COORDS[swizzle] = tile_coords
    return tile_coords


def make_block_kernel(cfg, A, B, OUT, EPI, acc="float32"):
    key = (cfg, A.key, B.key, OUT.key, EPI.key, acc)
    if key in _CACHE:
        return _CACHE[key]
    ACC = float64 if acc == "float64" else float32
    BLOCK_M, BLOCK_N, BLOCK_K = cfg.BLOCK_M, cfg.BLOCK_N, cfg.BLOCK_K
    THREAD_M, THREAD_N = cfg.THREAD_M, cfg.THREAD_N
    STAGES, SWIZZLE = cfg.STAGES, cfg.SWIZZLE
    THREAD_ROWS, THREAD_COLS = cfg.threads_m, cfg.threads_n     # the block's threads as a grid over the tile
    LANE_ROWS, LANE_COLS = cfg.lanes()                          # a warp's lanes as a grid
    WARP_ROWS, WARP_COLS = THREAD_ROWS // LANE_ROWS, THREAD_COLS // LANE_COLS   # the block's warps as a grid
    NUM_THREADS = cfg.num_threads
    LOADS_A = BLOCK_M * BLOCK_K // NUM_THREADS
    LOADS_B = BLOCK_N * BLOCK_K // NUM_THREADS
    A_STRIDE = BLOCK_M + cfg.SMEM_PAD
    B_STRIDE = BLOCK_N + cfg.SMEM_PAD
    A_KFAST = A.FAST == "k"
    B_KFAST = B.FAST == "k"
    a_setup, a_load, b_setup, b_load = A.setup, A.load, B.setup, B.load
    o_row, o_col, epi = OUT.row, OUT.col, EPI.fn
    BIAS_ROW, BIAS_COL, RESIDUAL = EPI.BIAS == "row", EPI.BIAS == "col", EPI.RESIDUAL
    ATOMIC = EPI.key == ("atomic",)
    STAGE = EPI.STAGE
    STAGE_SIZE = THREAD_M * THREAD_N if STAGE else 1

    VEC = cfg.VEC
    mma = _make_mma(BLOCK_K, THREAD_M, THREAD_N, THREAD_ROWS, THREAD_COLS, cfg.UNROLL_K, VEC)

    if simulator_enabled():     # the simulator rejects the alignment argument (and needs none)
        @cuda.jit(device=True, inline=True)
        def smem_a():
            return cuda.shared.array((STAGES, BLOCK_K, A_STRIDE), ACC)

        @cuda.jit(device=True, inline=True)
        def smem_b():
            return cuda.shared.array((STAGES, BLOCK_K, B_STRIDE), ACC)
    else:                       # 16-byte aligned tiles: VEC=4 fragment reads are 16-byte loads
        @cuda.jit(device=True, inline=True)
        def smem_a():
            return cuda.shared.array((STAGES, BLOCK_K, A_STRIDE), ACC, alignment=16)

        @cuda.jit(device=True, inline=True)
        def smem_b():
            return cuda.shared.array((STAGES, BLOCK_K, B_STRIDE), ACC, alignment=16)

    @cuda.jit(device=True, inline=True)
    def row_of(ty, i):
        """Tile row of the thread's i-th accumulator row (groups of VEC consecutive rows)."""
        return (i // VEC) * (THREAD_ROWS * VEC) + ty * VEC + i % VEC

    @cuda.jit(device=True, inline=True)
    def col_of(tx, j):
        return (j // VEC) * (THREAD_COLS * VEC) + tx * VEC + j % VEC

    @cuda.jit(device=True, inline=True)
    def slot_a(e):
        """(m, k) of A-tile element e, k fastest when A is k-contiguous."""
        if A_KFAST:
            return e // BLOCK_K, e % BLOCK_K
        return e % BLOCK_M, e // BLOCK_M

    @cuda.jit(device=True, inline=True)
    def slot_b(e):
        if B_KFAST:
            return e // BLOCK_K, e % BLOCK_K
        return e % BLOCK_N, e // BLOCK_N

    tile_coords = make_tile_coords(SWIZZLE)

    jit = cuda.jit(max_registers=cfg.MAX_REGS) if cfg.MAX_REGS and not simulator_enabled() else cuda.jit

    @jit
    def kernel(a_args, b_args, o_args, bias_args, r_args, M, N, K, K_SLICE, SPLITS, alpha, beta):
        As = smem_a()
        Bs = smem_b()
        acc = cuda.local.array((THREAD_M, THREAD_N), ACC)
        af = cuda.local.array(THREAD_M, ACC)
        bf = cuda.local.array(THREAD_N, ACC)
        a_st = cuda.local.array((LOADS_A, 4), int64)
        b_st = cuda.local.array((LOADS_B, 4), int64)
        a_reg = cuda.local.array(LOADS_A, ACC)
        b_reg = cuda.local.array(LOADS_B, ACC)

        tid = cuda.threadIdx.x
        warp = tid // 32
        lane = tid % 32
        ty = (warp // WARP_COLS) * LANE_ROWS + lane // LANE_COLS
        tx = (warp % WARP_COLS) * LANE_COLS + lane % LANE_COLS
        tile_m, tile_n = tile_coords(cuda.gridDim.x, cuda.gridDim.y)
        m0 = tile_m * BLOCK_M
        n0 = tile_n * BLOCK_N
        z = cuda.blockIdx.z // SPLITS
        split = cuda.blockIdx.z % SPLITS
        k_lo = split * K_SLICE
        k_hi = min(K, k_lo + K_SLICE)
        ntiles = (k_hi - k_lo + BLOCK_K - 1) // BLOCK_K

        # ---- per-thread loader state (computed once) ----
        for i in range(LOADS_A):
            mm, kk = slot_a(tid + i * NUM_THREADS)
            s = a_setup(a_args, z, min(m0 + mm, M - 1))   # rows >= M: clamped, never stored
            a_st[i, 0] = s[0]
            a_st[i, 1] = s[1]
            a_st[i, 2] = s[2]
            a_st[i, 3] = s[3]
        for i in range(LOADS_B):
            nn, kk = slot_b(tid + i * NUM_THREADS)
            s = b_setup(b_args, z, min(n0 + nn, N - 1))
            b_st[i, 0] = s[0]
            b_st[i, 1] = s[1]
            b_st[i, 2] = s[2]
            b_st[i, 3] = s[3]
        for i in range(THREAD_M):
            for j in range(THREAD_N):
                acc[i, j] = ACC(0)

        # ---- mainloop ----
        if ntiles > 0:
            # prologue: tile 0 -> registers -> stage 0
            for i in range(LOADS_A):
                mm, kk = slot_a(tid + i * NUM_THREADS)
                k = k_lo + kk
                a_reg[i] = a_load(a_args, a_st[i, 0], a_st[i, 1], a_st[i, 2], a_st[i, 3], k) if k < k_hi else ACC(0)
            for i in range(LOADS_B):
                nn, kk = slot_b(tid + i * NUM_THREADS)
                k = k_lo + kk
                b_reg[i] = b_load(b_args, b_st[i, 0], b_st[i, 1], b_st[i, 2], b_st[i, 3], k) if k < k_hi else ACC(0)
            for i in range(LOADS_A):
                mm, kk = slot_a(tid + i * NUM_THREADS)
                As[0, uint64(kk), uint64(mm)] = a_reg[i]
            for i in range(LOADS_B):
                nn, kk = slot_b(tid + i * NUM_THREADS)
                Bs[0, uint64(kk), uint64(nn)] = b_reg[i]
            cuda.syncthreads()
        for t in range(ntiles):
            cur = t % STAGES
            nxt = (t + 1) % STAGES
            more = t + 1 < ntiles
            if more:
                # next tile's global loads are issued before this tile's math (latency hiding)
                k_next = k_lo + (t + 1) * BLOCK_K
                for i in range(LOADS_A):
                    mm, kk = slot_a(tid + i * NUM_THREADS)
                    k = k_next + kk
                    a_reg[i] = a_load(a_args, a_st[i, 0], a_st[i, 1], a_st[i, 2], a_st[i, 3], k) if k < k_hi else ACC(0)
                for i in range(LOADS_B):
                    nn, kk = slot_b(tid + i * NUM_THREADS)
                    k = k_next + kk
                    b_reg[i] = b_load(b_args, b_st[i, 0], b_st[i, 1], b_st[i, 2], b_st[i, 3], k) if k < k_hi else ACC(0)
            mma(As, Bs, cur, ty, tx, acc, af, bf)
            if STAGES == 1:
                cuda.syncthreads()
            if more:
                for i in range(LOADS_A):
                    mm, kk = slot_a(tid + i * NUM_THREADS)
                    As[uint64(nxt), uint64(kk), uint64(mm)] = a_reg[i]
                for i in range(LOADS_B):
                    nn, kk = slot_b(tid + i * NUM_THREADS)
                    Bs[uint64(nxt), uint64(kk), uint64(nn)] = b_reg[i]
            cuda.syncthreads()

        # ---- epilogue ----
        if SPLITS > 1 and not ATOMIC:
            z = cuda.blockIdx.z            # partial sums go to workspace slice (z, split)
        stage = cuda.local.array(STAGE_SIZE, ACC)
        row_o = cuda.local.array(THREAD_M, int64)
        col_o = cuda.local.array(THREAD_N, int64)
        row_r = cuda.local.array(THREAD_M, int64)
        col_r = cuda.local.array(THREAD_N, int64)
        for i in range(THREAD_M):
            m = m0 + row_of(ty, i)
            if m < M:
                row_o[i] = o_row(o_args, z, m)
                if RESIDUAL:
                    row_r[i] = o_row(r_args, z, m)
        for j in range(THREAD_N):
            n = n0 + col_of(tx, j)
            if n < N:
                col_o[j] = o_col(o_args, z, n)
                if RESIDUAL:
                    col_r[j] = o_col(r_args, z, n)
        out = o_args[0]
        bias = bias_args[0]
        res = r_args[0]
        bz = z * bias_args[1]
        if STAGE:
            # A large epilogue body keeps LLVM from unrolling the loops below; indexing acc with a
            # loop variable would then demote the whole accumulator (mainloop included) to local
            # memory. Copy it once (fully unrolled, tiny body) to a staging array instead.
            for i in range(THREAD_M):
                for j in range(THREAD_N):
                    stage[i * THREAD_N + j] = acc[i, j]
        for i in range(THREAD_M):
            m = m0 + row_of(ty, i)
            for j in range(THREAD_N):
                n = n0 + col_of(tx, j)
                if m < M and n < N:
                    b_off = bz
                    if BIAS_ROW:
                        b_off += m * bias_args[2]
                    if BIAS_COL:
                        b_off += n * bias_args[2]
                    r_off = row_r[i] + col_r[j] if RESIDUAL else 0
                    v = stage[i * THREAD_N + j] if STAGE else acc[i, j]
                    epi(v, out, uint64(row_o[i] + col_o[j]), bias, uint64(b_off), res, uint64(r_off), alpha, beta)

    _CACHE[key] = kernel
    return kernel
