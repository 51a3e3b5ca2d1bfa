"""The fast FP32 SIMT block kernel (``MAINLOOP="fast"``) for strided fp32 A and B.

Same signature, grid, split-K and epilogue contract as the generic mainloop (mainloop.py), so launch.py,
split-K and the engines use it unchanged; it differs in how tiles move:

* global -> registers: each thread moves whole 16-byte quads (``ld.global.v4.f32``) along the operand's
  contiguous index (k for "k"-fast operands, m / n for "outer"-fast ones); quads are issued for the
  next k-tile before the current tile's FMAs (register prefetch, one ``bar.sync`` per k-tile). Per
  thread a 64-bit offset is kept per quad and advanced by a constant per tile: no index math, no
  bounds check in the k loop. The kernel therefore requires (:func:`fast_ok`, checked on the host by
  the launchers, which otherwise run the generic mainloop with the same tile): 16-byte aligned base
  addresses, strides and M / N (outer-fast operands) multiples of 4, and K a multiple of BLOCK_K;
* registers -> shared: A is stored k-major (``As[stage, k, m]``) and B as ``Bs[stage, k, n]``; an
  "outer"-fast quad is one ``st.shared.v4``, a "k"-fast quad four scalar stores (a transpose); rows are
  padded by SMEM_PAD words;
* shared -> registers -> FMAs: all BLOCK_K k-steps are written out; per step a thread reads its
  THREAD_M rows and THREAD_N columns as 16-byte loads (``ld.shared.v4.f32``) in groups of 4 spaced
  ``4 * BLOCK_M / THREAD_M`` apart (split fragments: a warp's reads are conflict-free) and issues
  THREAD_M * THREAD_N FMAs.

Rows / columns past M / N are clamped on load (never stored).
"""
from numba import cuda, float32, int64, uint64

from ...platform import simulator_enabled
from .mainloop import make_tile_coords
from .vec import GSCALE, gptr, ld4, ldg4p, st4

_CACHE = {}


def _make_mma(BLOCK_K, THREAD_M, THREAD_N, THREAD_ROWS, THREAD_COLS):
    """acc += As[c]^T Bs[c]: BLOCK_K k-steps written out, each 16-byte fragment loads then the
    THREAD_M x THREAD_N FMAs (constant-trip loops, unrolled by LLVM)."""
    key = ("mma", BLOCK_K, THREAD_M, THREAD_N, THREAD_ROWS, THREAD_COLS)
    if key in _CACHE:
        return _CACHE[key]
    lines = ["def mma(As, Bs, c, y, x, acc, af, bf):"]
    for k in range(BLOCK_K):
        for g in range(THREAD_M // 4):
            lines += [f"    v = ld4(As, c, uint64({k}), y + uint64({g * THREAD_ROWS * 4}))"]
            lines += [f"    af[{4 * g + q}] = v[{q}]" for q in range(4)]
        for g in range(THREAD_N // 4):
            lines += [f"    v = ld4(Bs, c, uint64({k}), x + uint64({g * THREAD_COLS * 4}))"]
            lines += [f"    bf[{4 * g + q}] = v[{q}]" for q in range(4)]
        lines += [f"    for i in range({THREAD_M}):",
                  f"        for j in range({THREAD_N}):",
                  "            acc[i, j] += af[i] * bf[j]"]
    g = {"uint64": uint64, "ld4": ld4}
    exec("\n".join(lines) + "\n", g)
    _CACHE[key] = cuda.jit(device=True, inline=True)(g["mma"])
    return _CACHE[key]


def _address(arr):
    """Byte address of a kernel array argument (numba device array, Flat view, host array), or None."""
    cai = getattr(arr, "__cuda_array_interface__", None)
    if cai is not None:
        return cai["data"][0]
    if hasattr(arr, "ptr"):
        return int(arr.ptr)
    ai = getattr(arr, "__array_interface__", None)
    return ai["data"][0] if ai is not None else None


def operand_ok(args, kfast, O):
    """Whether every quad of a strided operand ``args = (array, s_z1, s_z2, B2, s_outer, s_k)`` is a
    16-byte aligned run (``O``: M for A, N for B)."""
    a = _address(args[0])
    if a is None or a % 16 or args[1] % 4 or args[2] % 4:
        return False
    if kfast:
        return args[4] % 4 == 0 and args[5] == 1
    return args[4] == 1 and args[5] % 4 == 0 and O % 4 == 0


def fast_ok(cfg, A, B, M, N, K, a_args, b_args):
    """Host check of the fast kernel's requirements for one launch (see the module docstring)."""
    return (K % cfg.BLOCK_K == 0 and operand_ok(a_args, A.FAST == "k", M)
            and operand_ok(b_args, B.FAST == "k", N))


def _make_operand(KFAST, BLOCK_O, BLOCK_K, NUM_THREADS):
    """Quad loader of one operand tile (BLOCK_O x BLOCK_K elements, BLOCK_O*BLOCK_K/4/NUM_THREADS quads
    per thread). ``args = (array, s_z1, s_z2, B2, s_outer, s_k)``; ``O`` is M (for A) or N (for B)."""
    key = ("operand", KFAST, BLOCK_O, BLOCK_K, NUM_THREADS)
    if key in _CACHE:
        return _CACHE[key]
    K_QUADS = BLOCK_K // 4          # quads along k per row ("k"-fast)
    OUTER_QUADS = BLOCK_O // 4      # quads along the outer index per k row ("outer"-fast)

    @cuda.jit(device=True, inline=True)
    def slot(e):
        """(outer index, k index) of the first element of quad e of the tile."""
        if KFAST:
            return e // K_QUADS, (e % K_QUADS) * 4
        return (e % OUTER_QUADS) * 4, e // OUTER_QUADS

    @cuda.jit(device=True, inline=True)
    def setup(args, z, e, o0, O, k_lo):
        """Load handle (vec.gptr) of the quad in the block's first k-tile (rows past O clamped)."""
        oo, kk = slot(e)
        base = (z // args[3]) * args[1] + (z % args[3]) * args[2]
        if KFAST:
            return gptr(args[0], uint64(base + min(o0 + oo, O - 1) * args[4] + k_lo + kk))
        return gptr(args[0], uint64(base + min(o0 + oo, O - 4) + (k_lo + kk) * args[5]))

    @cuda.jit(device=True, inline=True)
    def step(args):
        """Handle advance per k-tile (wraps modulo 2^64 for a negative stride, as addresses do)."""
        if KFAST:
            return uint64(BLOCK_K * GSCALE)
        return uint64(int64(BLOCK_K * GSCALE) * args[5])

    @cuda.jit(device=True, inline=True)
    def store(S, stage, e, v0, v1, v2, v3):
        oo, kk = slot(e)
        if KFAST:
            S[stage, uint64(kk), uint64(oo)] = v0
            S[stage, uint64(kk + 1), uint64(oo)] = v1
            S[stage, uint64(kk + 2), uint64(oo)] = v2
            S[stage, uint64(kk + 3), uint64(oo)] = v3
        else:
            st4(S, stage, uint64(kk), uint64(oo), v0, v1, v2, v3)

    ops = (setup, step, store)
    _CACHE[key] = ops
    return ops


def make_fast_kernel(cfg, A, B, OUT, EPI):
    """The fast block kernel for strided fp32 operands ``A`` / ``B`` (operands.strided_operand)."""
    cfg = cfg.replace(SPLIT_K=1, SPLIT_MODE="workspace")   # read at run time (SPLITS): one kernel for all
    key = ("fast", cfg, A.key, B.key, OUT.key, EPI.key)
    if key in _CACHE:
        return _CACHE[key]
    BLOCK_M, BLOCK_N, BLOCK_K = cfg.BLOCK_M, cfg.BLOCK_N, cfg.BLOCK_K
    THREAD_M, THREAD_N, SWIZZLE = cfg.THREAD_M, cfg.THREAD_N, cfg.SWIZZLE
    THREAD_ROWS, THREAD_COLS = cfg.threads_m, cfg.threads_n     # the block's threads as a grid over the tile
    LANE_ROWS, LANE_COLS = cfg.lanes()                          # a warp's lanes as a grid
    WARP_COLS = THREAD_COLS // LANE_COLS                        # warps along n
    NUM_THREADS = cfg.num_threads
    QUADS_A = BLOCK_M * BLOCK_K // 4 // NUM_THREADS             # 16-byte quads of the A tile a thread loads
    QUADS_B = BLOCK_N * BLOCK_K // 4 // NUM_THREADS
    A_STRIDE = BLOCK_M + cfg.SMEM_PAD
    B_STRIDE = BLOCK_N + cfg.SMEM_PAD
    a_setup, a_step, a_store = _make_operand(A.FAST == "k", BLOCK_M, BLOCK_K, NUM_THREADS)
    b_setup, b_step, b_store = _make_operand(B.FAST == "k", BLOCK_N, BLOCK_K, NUM_THREADS)
    mma = _make_mma(BLOCK_K, THREAD_M, THREAD_N, THREAD_ROWS, THREAD_COLS)
    o_row, o_col, epi = OUT.row, OUT.col, EPI.fn
    BIAS_ROW, BIAS_COL, RESIDUAL = EPI.BIAS == "row", EPI.BIAS == "col", EPI.RESIDUAL
    ATOMIC = EPI.key == ("atomic",)
    STAGE = EPI.STAGE
    STAGE_SIZE = THREAD_M * THREAD_N if STAGE else 1

    if simulator_enabled():
        @cuda.jit(device=True, inline=True)
        def smem():
            return (cuda.shared.array((2, BLOCK_K, A_STRIDE), float32),
                    cuda.shared.array((2, BLOCK_K, B_STRIDE), float32))
    else:
        @cuda.jit(device=True, inline=True)
        def smem():
            return (cuda.shared.array((2, BLOCK_K, A_STRIDE), float32, alignment=16),
                    cuda.shared.array((2, BLOCK_K, B_STRIDE), float32, alignment=16))

    @cuda.jit(device=True, inline=True)
    def row_of(ty, i):
        return (i // 4) * (THREAD_ROWS * 4) + ty * 4 + i % 4

    @cuda.jit(device=True, inline=True)
    def col_of(tx, j):
        return (j // 4) * (THREAD_COLS * 4) + tx * 4 + j % 4

    tile_coords = make_tile_coords(SWIZZLE)

    @cuda.jit(device=True, inline=True)
    def tiles(As, Bs, a_args, b_args, a_off, b_off, a_inc, b_inc, a_v, b_v, acc, af, bf, tid, ntiles, y, x):
        """The k loop: tile t+1 global -> registers, FMAs on tile t, registers -> the other stage."""
        a = a_args[0]
        b = b_args[0]
        if ntiles > 0:
            for q in range(QUADS_A):
                v = ldg4p(a, a_off[q])
                a_store(As, uint64(0), tid + q * NUM_THREADS, v[0], v[1], v[2], v[3])
            for q in range(QUADS_B):
                v = ldg4p(b, b_off[q])
                b_store(Bs, uint64(0), tid + q * NUM_THREADS, v[0], v[1], v[2], v[3])
            cuda.syncthreads()
        for t in range(ntiles):
            cur = uint64(t & 1)
            more = t + 1 < ntiles
            if more:
                for q in range(QUADS_A):
                    a_off[q] += a_inc
                    v = ldg4p(a, a_off[q])
                    a_v[q, 0] = v[0]
                    a_v[q, 1] = v[1]
                    a_v[q, 2] = v[2]
                    a_v[q, 3] = v[3]
                for q in range(QUADS_B):
                    b_off[q] += b_inc
                    v = ldg4p(b, b_off[q])
                    b_v[q, 0] = v[0]
                    b_v[q, 1] = v[1]
                    b_v[q, 2] = v[2]
                    b_v[q, 3] = v[3]
            mma(As, Bs, cur, y, x, acc, af, bf)
            if more:
                nxt = cur ^ uint64(1)
                for q in range(QUADS_A):
                    a_store(As, nxt, tid + q * NUM_THREADS, a_v[q, 0], a_v[q, 1], a_v[q, 2], a_v[q, 3])
                for q in range(QUADS_B):
                    b_store(Bs, nxt, tid + q * NUM_THREADS, b_v[q, 0], b_v[q, 1], b_v[q, 2], b_v[q, 3])
            cuda.syncthreads()

    # the register cap holds spill-free for the plain epilogues; a staged (big fused) epilogue spills
    # under it on sm_90 (28 B at 128 for bias + residual + relu), so that kernel runs uncapped
    cap = cfg.MAX_REGS if not STAGE else 0
    jit = cuda.jit(max_registers=cap) if cap and not simulator_enabled() else cuda.jit

    @jit
    def kernel(a_args, b_args, o_args, bias_args, r_args, M, N, K, K_SLICE, SPLITS, alpha, beta):
        As, Bs = smem()
        acc = cuda.local.array((THREAD_M, THREAD_N), float32)
        af = cuda.local.array(THREAD_M, float32)
        bf = cuda.local.array(THREAD_N, float32)
        a_off = cuda.local.array(QUADS_A, uint64)
        b_off = cuda.local.array(QUADS_B, uint64)
        a_v = cuda.local.array((QUADS_A, 4), float32)
        b_v = cuda.local.array((QUADS_B, 4), float32)

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
        ntiles = (k_hi - k_lo) // BLOCK_K          # whole tiles: K % BLOCK_K == 0 (fast_ok)
        a_inc = a_step(a_args)
        b_inc = b_step(b_args)
        for q in range(QUADS_A):
            a_off[q] = a_setup(a_args, z, tid + q * NUM_THREADS, m0, M, k_lo)
        for q in range(QUADS_B):
            b_off[q] = b_setup(b_args, z, tid + q * NUM_THREADS, n0, N, k_lo)
        for i in range(THREAD_M):
            for j in range(THREAD_N):
                acc[i, j] = float32(0)
        y = uint64(ty * 4)
        x = uint64(tx * 4)

        # ---- mainloop ----
        tiles(As, Bs, a_args, b_args, a_off, b_off, a_inc, b_inc, a_v, b_v, acc, af, bf, tid, ntiles, y, x)

        # ---- epilogue: output offsets computed per row / element (no offset arrays live beside acc) ----
        if SPLITS > 1 and not ATOMIC:
            z = cuda.blockIdx.z
        stage = cuda.local.array(STAGE_SIZE, float32)
        out = o_args[0]
        bias = bias_args[0]
        res = r_args[0]
        bz = z * bias_args[1]
        if STAGE:
            for i in range(THREAD_M):
                for j in range(THREAD_N):
                    stage[i * THREAD_N + j] = acc[i, j]
        for i in range(THREAD_M):
            m = m0 + row_of(ty, i)
            if m < M:
                ro = o_row(o_args, z, m)
                rr = o_row(r_args, z, m) if RESIDUAL else 0
                for j in range(THREAD_N):
                    n = n0 + col_of(tx, j)
                    if n < N:
                        bo = bz
                        if BIAS_ROW:
                            bo += m * bias_args[2]
                        if BIAS_COL:
                            bo += n * bias_args[2]
                        r_off = rr + o_col(r_args, z, n) if RESIDUAL else 0
                        val = stage[i * THREAD_N + j] if STAGE else acc[i, j]
                        epi(val, out, uint64(ro + o_col(o_args, z, n)), bias, uint64(bo), res, uint64(r_off),
                            alpha, beta)

    _CACHE[key] = kernel
    return kernel
