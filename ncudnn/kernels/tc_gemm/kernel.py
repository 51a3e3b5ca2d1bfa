"""The tensor-core GEMM block kernel: cp.async ring -> swizzled shared tiles -> ldmatrix -> mma.sync.

``make_tc_gemm(cfg, a_kmajor, b_kmajor, in_dtype, out_dtype)`` returns a :class:`TcGemmKernel`
whose ``kernel`` computes, for each batch index z (grid y) and output tile (grid x, GROUP_M order),
``C[z, m, n] = alpha * sum_k A[z, m, k] B[z, k, n]`` with f32 accumulation, stored as ``out_dtype``.

Kernel signature (pointers / sizes / strides / meta)::

    kernel(a, b, c, M, N, K, lda, ldb, ldc_m, ldc_n, a_z, b_z, c_z, alpha)

* ``a``, ``b``: 1-D storage arrays of 16-bit elements (bf16 as uint16, fp16 as float16), 16-byte
  aligned. A is (M, K) with unit k stride (``a_kmajor``, "mk") or unit m stride ("km"); ``lda`` is
  its other stride. B is (K, N) with unit n stride ("kn") or unit k stride (``b_kmajor``, "nk");
  ``ldb`` is its other stride. M, N, K, lda, ldb, a_z, b_z multiples of 8 (16-byte chunks).
* ``c``: 1-D storage array of ``out_dtype``, any strides ``ldc_m``, ``ldc_n``.
* grid ``(tiles_m * tiles_n, batch)``, block ``cfg.threads``, dynamic shared ``smem_bytes(cfg)``.

Structure per block (the source is generated so that every fragment / accumulator is a named
scalar, i.e. a register):

1. per-thread setup: for each of its load slots, the swizzled shared offset, the global offset at
   k = 0 and its k offset (rows / columns past M / N get a k offset that never passes the bound);
   per lane, the ldmatrix row offsets for every (fragment, k16 step);
2. prologue: STAGES-1 k tiles issued as cp.async (16 bytes, ``.cg``, zero-fill past the edges),
   one commit group each;
3. k loop: wait until the oldest group landed (``wait_group STAGES-2``), barrier, issue tile
   kt + STAGES - 1 into the slot freed last iteration, then for each k16 step load A fragments
   (ldmatrix.x4, ``.trans`` for "km") and B fragments (ldmatrix.x4 over two n8 tiles, ``.trans``
   for "kn") and issue the warp's (WARP_M/16) x (WARP_N/8) mma.sync m16n8k16;
4. epilogue: alpha * accumulator, bounds-checked stores through ``dtypes.storer``.

Shared layout: per stage the A tile then the B tile, each rows x cols 16-bit elements with the
contiguous global dimension as cols; 16-byte chunk c of row r lives at chunk ``c ^ swz(r)``
(``r & 7`` for >= 8 chunks a row, ``(r >> 1) & 3`` for 4, ``(r >> 2) & 1`` for 2), so the 8 rows
one ldmatrix matrix reads and the chunks cp.async writes hit distinct banks.
"""
from dataclasses import dataclass

from numba import cuda, float32, int32, int64, uint16, uint32, uint64

from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from ..primitives import warp as prim
from ..primitives import ptx
from .config import TcGemmConfig, check, smem_bytes, swz
from .conv_gather import (CONV_ARGS, conv_a_load, conv_a_load_fast, conv_a_setup, conv_a_setup_fast, conv_tap_advance,
                          conv_tap_init)
from .epilogue_source import FUSED_ARGS, fused_arg_names, fused_epilogue, staging_bytes

__all__ = ["TcGemmKernel", "make_tc_gemm"]

_CACHE = {}


@dataclass(frozen=True)
class TcGemmKernel:
    kernel: object
    cfg: TcGemmConfig
    a_kmajor: bool
    b_kmajor: bool
    in_dtype: str
    out_dtype: str
    smem: int
    source: str
    epi: object = None      # EpilogueSpec of the fused kernel, None for the plain one


def _source(cfg, a_kmajor, b_kmajor, mma_name, epi=None, conv=False, amax=False, dscales=0, pscales=None):
    BM, BN, BK, stages = cfg.BLOCK_M, cfg.BLOCK_N, cfg.BLOCK_K, cfg.STAGES
    threads = cfg.threads
    warp_m, warp_n = BM // cfg.WARPS_M, BN // cfg.WARPS_N        # the tile of one warp
    frags_m, frags_n, k_steps = warp_m // 16, warp_n // 8, BK // 16  # m16 / n8 fragments per warp, k16 steps per tile
    a_tile, b_tile = BM * BK, BN * BK                             # 16-bit elements of A and B in one stage
    stage_halves = a_tile + b_tile
    a_cols = BK if a_kmajor else BM                               # elements per shared row of A / B
    b_cols = BK if b_kmajor else BN
    a_chunks, b_chunks = a_cols // 8, b_cols // 8                 # 16-byte chunks per shared row (the swizzle unit)
    a_slots, b_slots = a_tile // 8 // threads, b_tile // 8 // threads  # 16-byte loads per thread per stage
    lines = []
    w = lines.append
    if conv:
        w(f"def tc_gemm({', '.join(CONV_ARGS)}):")
    elif epi is None:
        w("def tc_gemm(a, b, c, M, N, K, lda, ldb, ldc_m, ldc_n, a_z, b_z, c_z, alpha):")
    else:
        w(f"def tc_gemm({', '.join(fused_arg_names(amax, dscales, pscales))}):")
    # 16-byte rows for ldmatrix / cp.async (the simulator refuses an alignment argument)
    w("    sm = cuda.shared.array(0, uint16)" if ptx.SIM else
      "    sm = cuda.shared.array(0, uint16, alignment=128)")
    v3 = cfg.VERSION >= 3
    fast = conv and cfg.VERSION >= 4     # v4: conv gather for C % BLOCK_K == 0 (one tap per k tile)
    split_k = cfg.SPLIT_K
    # split-K: grid y holds the slices (their count is gridDim.y: one kernel for every SPLIT_K > 1); raw fp32
    # partials at c[z * M * N + m * N + n]
    split = conv and split_k > 1
    if v3:   # 32-bit shared-window byte addresses for cp.async / ldmatrix (ptx.*_a intrinsics)
        w("    sbase = int32(ptx.cvta_shared(sm, 0))")
    w("    tid = cuda.threadIdx.x")
    w("    lane = tid & 31")
    w("    warp = tid >> 5")
    w(f"    wm = warp % {cfg.WARPS_M}")
    w(f"    wn = warp // {cfg.WARPS_M}")
    # tile order: GROUP_M block rows at a time
    w(f"    npm = (M + {BM - 1}) // {BM}")
    w(f"    npn = (N + {BN - 1}) // {BN}")
    w("    pid = cuda.blockIdx.x")
    w(f"    width = {cfg.GROUP_M} * npn")
    w("    first = (pid // width) * " + str(cfg.GROUP_M))
    w(f"    gsize = min(npm - first, {cfg.GROUP_M})")
    w("    m0 = (first + (pid % width) % gsize) * " + str(BM))
    w("    n0 = ((pid % width) // gsize) * " + str(BN))
    w("    z = int64(cuda.blockIdx.y)")
    if split:   # slice z of the k tiles: [kt0, kt0 + kper) clipped to the k range (may be empty: zero partials)
        w("    z1 = z")
        w("    c_z1 = int64(M) * N")
        w("    z2 = c_z2 = bias_z = res_z1 = res_z2 = int64(0)")
        w(f"    kt_all = (K + {BK - 1}) // {BK}")
        w("    kper = (kt_all + cuda.gridDim.y - 1) // cuda.gridDim.y")
        w("    kt0 = int32(z) * kper")
        w(f"    kbeg = kt0 * {BK}")
    if conv and not split:   # one image batch folded into M; the epilogue's batch terms are zero
        w("    z1 = z2 = c_z1 = c_z2 = bias_z = res_z1 = res_z2 = int64(0)")
    if conv:
        w("    b_zo = int64(0)")
        w("    PQ = P * Q")
        w("    lda = 0")
    elif epi is None:
        w("    a_zo = z * a_z")
        w("    b_zo = z * b_z")
    else:   # two batch dims: z = z1 * B2 + z2
        w("    z1 = z // B2")
        w("    z2 = z - z1 * B2")
        w("    a_zo = z1 * a_z1 + z2 * a_z2")
        w("    b_zo = z1 * b_z1 + z2 * b_z2")
    w("    BIG = int32(0x3FFFFFFF)")
    # load slots: shared offset, global offset at k = 0, k offset (BIG when the row / column is out)
    for op, kmaj, slots, cols, chunks, outer0, bound, ld in (
            ("a", a_kmajor, a_slots, a_cols, a_chunks, "m0", "M", "lda"),
            ("b", b_kmajor, b_slots, b_cols, b_chunks, "n0", "N", "ldb")):
        for i in range(slots):
            if fast and op == "a":
                conv_a_setup_fast(w, i, threads, chunks, cols)
                continue
            if conv and op == "a":
                conv_a_setup(w, i, threads, chunks, cols, BK, split)
                if v3:
                    w(f"    a_sa{i} = int32(a_so{i} * 2)")
                continue
            w(f"    q = tid + {i * threads}")
            w(f"    row = q // {chunks}")
            w(f"    ch = q % {chunks}")
            w(f"    {op}_so{i} = row * {cols} + ((ch ^ {swz('row', chunks)}) * 8)")
            if kmaj:   # rows are the outer index, columns k
                w(f"    o = {outer0} + row")
                w(f"    {op}_go{i} = {op}_zo + int64(o) * {ld} + ch * 8")
                w(f"    {op}_ki{i} = ch * 8 if o < {bound} else BIG")
            else:      # rows are k, columns the outer index
                w(f"    o = {outer0} + ch * 8")
                w(f"    {op}_go{i} = {op}_zo + int64(row) * {ld} + o")
                w(f"    {op}_ki{i} = row if o < {bound} else BIG")
            if v3:   # shared byte offset in the stage; k bound of the slot (k0 < kl: in range)
                w(f"    {op}_sa{i} = int32({op}_so{i} * 2{' + ' + str(2 * a_tile) if op == 'b' else ''})")
                w(f"    {op}_kl{i} = int32(K - {op}_ki{i})")
    # ldmatrix lane offsets (within a tile) for each fragment and k16 step
    w("    j = lane >> 3")
    w("    r = lane & 7")
    for kk in range(k_steps):
        for i in range(frags_m):
            if a_kmajor:
                row, chk = f"(wm * {warp_m} + {i * 16} + (j & 1) * 8 + r)", f"({kk * 2} + (j >> 1))"
            else:
                row, chk = f"({kk * 16} + (j >> 1) * 8 + r)", f"(wm * {warp_m // 8} + {i * 2} + (j & 1))"
            w(f"    a_lo{i}_{kk} = {'int32(2 * (' if v3 else '(('}{row} * {a_cols} + (({chk} ^ {swz(row, a_chunks)}) * 8)))")
        for jn in range(frags_n // 2):
            if b_kmajor:
                row, chk = f"(wn * {warp_n} + {jn * 16} + (j >> 1) * 8 + r)", f"({kk * 2} + (j & 1))"
            else:
                row, chk = f"({kk * 16} + (j & 1) * 8 + r)", f"(wn * {warp_n // 8} + {jn * 2} + (j >> 1))"
            w(f"    b_lo{jn}_{kk} = {'int32(2 * (' if v3 else '(('}{a_tile} + {row} * {b_cols} + (({chk} ^ {swz(row, b_chunks)}) * 8)))")
    for i in range(frags_m):
        for n in range(frags_n):
            w(f"    c{i}_{n}_0 = c{i}_{n}_1 = c{i}_{n}_2 = c{i}_{n}_3 = float32(0.0)")

    def load_stage(ind, stage_expr, k0_expr):
        if v3:   # the stage's byte address is wsa (rolled by the loop)
            w(f"{ind}k0 = int32({k0_expr})")
        else:
            w(f"{ind}sb = ({stage_expr}) * {stage_halves}")
            w(f"{ind}k0 = {k0_expr}")
        for op, kmaj, slots, arr, ld in (("a", a_kmajor, a_slots, "a", "lda"), ("b", b_kmajor, b_slots, "b", "ldb")):
            for i in range(slots):
                if fast and op == "a":
                    conv_a_load_fast(w, ind, i)
                    if i == slots - 1:
                        conv_tap_advance(w, ind, BK)
                    continue
                if conv and op == "a":
                    conv_a_load(w, ind, i, BK, v3)
                    continue
                step = "k0" if kmaj else f"int64(k0) * {ld}"
                if v3:
                    w(f"{ind}ok = k0 < {op}_kl{i}")
                    w(f"{ind}ptx.cp_async_cg_16_zfill_a(sm, wsa + {op}_sa{i}, "
                      f"{arr}, {op}_go{i} + {step} if ok else int64(0), 16 if ok else 0)")
                    continue
                w(f"{ind}ok = k0 + {op}_ki{i} < K")
                w(f"{ind}ptx.cp_async_cg_16_zfill(sm, sb + {op}_so{i}{' + ' + str(a_tile) if op == 'b' else ''}, "
                  f"{arr}, {op}_go{i} + {step} if ok else int64(0), 16 if ok else 0)")

    stage_bytes = 2 * stage_halves     # (v3)
    if split:
        w("    ktiles = min(kt_all - kt0, kper)")
    else:
        w(f"    ktiles = (K + {BK - 1}) // {BK}")
    kb = "kbeg + " if split else ""
    if fast:
        conv_tap_init(w, split)
    if v3:
        w("    wsa = sbase")
        w(f"    slast = int32(sbase + {(stages - 1) * stage_bytes})")
    for s in range(stages - 1):
        w(f"    if {s} < ktiles:")
        load_stage("        ", str(s), f"{kb}{s * BK}")
        w("    ptx.cp_async_commit()")
        if v3:
            w(f"    wsa = int32(wsa + {stage_bytes})")
    if v3:
        w("    rsa = sbase")
    w("    for kt in range(ktiles):")
    w(f"        ptx.cp_async_wait_group({stages - 2})")
    w("        cuda.syncthreads()")
    w(f"        nk = kt + {stages - 1}")
    w("        if nk < ktiles:")
    load_stage("            ", f"nk % {stages}", f"{kb}nk * {BK}")
    w("        ptx.cp_async_commit()")
    a_ld = "ptx.ldmatrix_x4" if a_kmajor else "ptx.ldmatrix_x4_trans"
    b_ld = "ptx.ldmatrix_x4" if b_kmajor else "ptx.ldmatrix_x4_trans"
    if v3:
        w(f"        wsa = int32(wsa + {stage_bytes}) if wsa != slast else sbase")
        a_ld, b_ld, cs = a_ld + "_a", b_ld + "_a", "rsa"
    else:
        w(f"        cs = (kt % {stages}) * {stage_halves}")
        cs = "cs"
    for kk in range(k_steps):
        for i in range(frags_m):
            w(f"        a{i}_0, a{i}_1, a{i}_2, a{i}_3 = {a_ld}(sm, {cs} + a_lo{i}_{kk})")
        for jn in range(frags_n // 2):
            n0, n1 = 2 * jn, 2 * jn + 1
            w(f"        b{n0}_0, b{n0}_1, b{n1}_0, b{n1}_1 = {b_ld}(sm, {cs} + b_lo{jn}_{kk})")
        for i in range(frags_m):
            order = range(frags_n) if i % 2 == 0 else range(frags_n - 1, -1, -1)   # serpentine: reuse B
            for n in order:
                acc = f"c{i}_{n}_0, c{i}_{n}_1, c{i}_{n}_2, c{i}_{n}_3"
                w(f"        {acc} = ptx.{mma_name}(a{i}_0, a{i}_1, a{i}_2, a{i}_3, b{n}_0, b{n}_1, {acc})")
    if v3:
        w("        rsa = int32(rsa + " + str(stage_bytes) + ") if rsa != slast else sbase")
    if epi is not None:
        fused_epilogue(w, cfg, frags_m, frags_n, warp_m, warp_n, epi, amax, dscales, pscales, raw=split)
        return "\n".join(lines) + "\n"
    # epilogue
    w("    g = lane >> 2")
    w("    t = lane & 3")
    w(f"    rb = m0 + wm * {warp_m} + g")
    w(f"    cb = n0 + wn * {warp_n} + 2 * t")
    w("    zc = z * c_z")
    for i in range(frags_m):
        for h in range(2):
            w(f"    rr = rb + {i * 16 + 8 * h}")
            w("    if rr < M:")
            w("        ro = zc + int64(rr) * ldc_m")
            for n in range(frags_n):
                for e in range(2):
                    w(f"        cc = cb + {n * 8 + e}")
                    w("        if cc < N:")
                    w(f"            store(c, ro + int64(cc) * ldc_n, alpha * c{i}_{n}_{2 * h + e})")
    return "\n".join(lines) + "\n"


def make_tc_gemm(cfg=None, a_kmajor=True, b_kmajor=False, in_dtype="bfloat16", out_dtype="bfloat16",
                 epi=None, bias_dtype="float32", res_dtype="float32", conv=False, amax=False, dscales=0,
                 pscales=None):
    """The kernel for ``cfg`` (default: the first of CONFIGS) and these layouts / dtypes, cached.

    ``epi``: an :class:`~ncudnn.kernels.pointwise.epilogue.EpilogueSpec` (its ``out_dtype`` replaces
    ``out_dtype``) selects the fused kernel (signature :data:`FUSED_ARGS`: two batch dims, bias,
    residual, alpha / beta); None the plain ``alpha * A @ B`` kernel. ``conv=True`` (with ``epi``,
    both operands k-major): the implicit-GEMM conv fprop kernel (signature :data:`CONV_ARGS`).
    ``amax=True`` (fused only): one more argument, a float32 array whose element 0 receives the max of
    ``|alpha * acc|`` (atomic max; the caller zeroes it). FP32 inputs run as TF32, FP8 (e4m3 / e5m2)
    inputs on m16n8k32: both need k-contiguous A and B (see :func:`_make_halves`). ``dscales`` (fused
    only): that many float32 arrays appended last (:func:`fused_arg_names`) whose element 0 multiplies
    alpha (per-tensor FP8 descale / scale factors held in device memory). ``pscales`` (fused, with
    ``amax``): an int n adds ``palpha`` (float32) and n more float32 arrays (``ps0``, ...) that scale the
    output after the amax tap (:func:`fused_epilogue`)."""
    if conv and (epi is None or not a_kmajor or not b_kmajor):
        raise ValueError("the conv kernel needs an epilogue spec and k-major A (NHWC) and B (KRSC)")
    cfg = cfg or TcGemmConfig()
    in_name = in_dtype if in_dtype in _HALVES_MMA else dt.dtype_name(in_dtype)
    if in_name in _HALVES:
        return _make_halves(cfg, in_name, a_kmajor, b_kmajor, out_dtype, epi, bias_dtype, res_dtype, conv, amax,
                            dscales, pscales)
    if (amax or dscales or pscales is not None) and epi is None:
        raise ValueError("amax / dscales / pscales need the fused kernel (an epilogue spec)")
    if pscales is not None and not amax:
        raise ValueError("pscales (scales after the amax tap) need amax=True")
    if epi is not None:
        epi = ep.EpilogueSpec(epi.steps, dt.dtype_name(epi.out_dtype), "float32")
        out_dtype = epi.out_dtype
        bias_dtype, res_dtype = dt.dtype_name(bias_dtype), dt.dtype_name(res_dtype)
    out_name = dt.dtype_name(out_dtype)
    if cfg.SPLIT_K > 2:   # the count is the grid's: every split shares the SPLIT_K = 2 kernel
        cfg = cfg.replace(SPLIT_K=2)
    key = (cfg, bool(a_kmajor), bool(b_kmajor), in_name, out_name, epi,
           (bias_dtype, res_dtype) if epi is not None else None, bool(conv), bool(amax), int(dscales), pscales)
    if key in _CACHE:
        return _CACHE[key]
    ok, why = check(cfg)
    if ok and epi is not None and staging_bytes(cfg) > smem_bytes(cfg):
        ok, why = False, f"the fused epilogue stages {staging_bytes(cfg)} bytes > the ring's {smem_bytes(cfg)}"
    if not ok:
        raise ValueError(f"tc_gemm config {cfg.name}: {why}")
    if in_name not in ("bfloat16", "float16") and in_name not in _HALVES_MMA:
        raise ValueError(f"tc_gemm inputs must be bfloat16, float16, float32 (tf32) or fp8, got {in_name}")
    outs = ("bfloat16", "float16", "float32") + (("float8_e4m3fn", "float8_e5m2") if epi is not None else ())
    if out_name not in outs:
        raise ValueError(f"tc_gemm output must be one of {outs}, got {out_name}")
    mma_name = {"bfloat16": "mma_m16n8k16_bf16", "float16": "mma_m16n8k16_f16", **_HALVES_MMA}[in_name]
    if cfg.SPLIT_K > 1:   # raw fp32 partials; the split-K reduce (kernels/tc_conv/splitk.py) runs epi
        if not conv or amax or dscales or pscales is not None:
            raise ValueError("SPLIT_K > 1 is implemented for the conv kernel only (no amax / scales)")
        out_name = "float32"
    src = _source(cfg, a_kmajor, b_kmajor, mma_name, epi, conv, amax, dscales, pscales)
    g = {"cuda": cuda, "ptx": ptx, "float32": float32, "int32": int32, "int64": int64,
         "uint16": uint16, "uint32": uint32, "uint64": uint64, "store": dt.storer(out_name), "warp_max": prim.warp_max}
    if epi is not None:
        g["epi"] = ep.raw("float32").fn if cfg.SPLIT_K > 1 else ep.build(epi, bias_dtype, res_dtype).fn
    exec(compile(src, f"<tc_gemm {cfg.name}>", "exec"), g)
    fn = g["tc_gemm"]
    fn.__module__ = __name__
    kern = cuda.jit(fn)
    tk = TcGemmKernel(kern, cfg, bool(a_kmajor), bool(b_kmajor), in_name, out_name, smem_bytes(cfg), src, epi)
    _CACHE[key] = tk
    return tk


#: kernel dtype of operands read as 16-bit halves -> (kernel tag, BLOCK_K factor: elements per half)
_HALVES = {"float32": ("tf32", 0.5), "float8_e4m3fn": ("e4m3", 2), "float8_e5m2": ("e5m2", 2)}
_HALVES_MMA = {"tf32": "mma_m16n8k8_tf32", "e4m3": "mma_m16n8k32_e4m3", "e5m2": "mma_m16n8k32_e5m2"}


def _make_halves(cfg, in_name, a_kmajor, b_kmajor, out_dtype, epi, bias_dtype, res_dtype, conv, amax, dscales=0,
                 pscales=None):
    """FP32 (TF32) or FP8 operands, both k-contiguous: the 16-bit kernel over their storage viewed as
    16-bit halves. A 16-byte chunk is 4 FP32 or 16 FP8 values, so one k16 step in halves is one
    m16n8k8 tf32 / m16n8k32 fp8 step, and ldmatrix.x4 (no .trans) yields exactly those fragments
    (tf32: a0 = A[g, t], a2 = A[g, t + 4], b0 = B[t, g], ...; fp8: a0 = A[g, 4t..4t+3],
    a2 = A[g, 4t+16..], b0 = B[4t..4t+3, g], ...). ``cfg.BLOCK_K`` counts input elements; the caller
    passes K, the leading dims and the batch strides in halves and the storage as uint16."""
    if not (a_kmajor and b_kmajor) or conv:
        raise ValueError(f"{in_name} needs k-contiguous A and B (transposing fragment loads of 32- / 8-bit "
                         "elements and the conv gather are not implemented)")
    tag, per_half = _HALVES[in_name]
    return make_tc_gemm(cfg.replace(BLOCK_K=int(cfg.BLOCK_K / per_half)), True, True, tag, out_dtype, epi,
                        bias_dtype, res_dtype, amax=amax, dscales=dscales, pscales=pscales)
