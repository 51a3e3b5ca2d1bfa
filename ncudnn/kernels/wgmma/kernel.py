"""The wgmma GEMM block kernel: cp.async ring -> 128-byte-swizzled shared tiles -> wgmma.mma_async.

``make_wgmma_gemm(cfg, a_kmajor, b_kmajor, in_dtype, epi, bias_dtype, res_dtype)`` returns a
:class:`WgmmaKernel` whose kernel computes, for each batch index z = z1 * B2 + z2 (grid y) and output
tile (grid x, GROUP_M order), ``C = epi(alpha * A @ B (+ beta * C), bias, residual)`` with f32
accumulation. Signature: :data:`~ncudnn.kernels.tc_gemm.epilogue_source.FUSED_ARGS` (the mma.sync kernel's
fused signature, so the launch helpers of :mod:`ncudnn.kernels.tc_gemm.launch` apply unchanged).

* A (M, K): unit k stride (``a_kmajor``, "mk") or unit m stride ("km", read with the transpose flag);
  B (K, N): unit k stride (``b_kmajor``, "nk") or unit n stride ("kn", transpose flag). 16-bit inputs
  (bf16 as uint16 storage, fp16 as float16), K, lda, ldb and the A / B batch strides multiples of 8.
* ``in_dtype="float32"``: TF32 (``wgmma m64nNk8 .tf32``), A and B both K-major; the FP32 storage
  travels as uint16 halves, so K, lda, ldb and the batch strides are counted in halves (2x the FP32
  counts, :func:`.launch.tf32_halves`). A k tile is then 32 FP32 (128 bytes: the same shared bytes,
  descriptors and 32-byte k steps as 64 16-bit elements), 4 k8 wgmmas per m64 slice.
* grid ``(tiles_m * tiles_n, batch)``, block ``cfg.threads``, dynamic shared ``smem_bytes(cfg)``.

Per block:

1. setup: each thread's cp.async slots (16-byte chunks: shared byte offset, global offset at k = 0,
   in-bounds terms; ``L2PF``: the copies carry that L2 prefetch-size hint), the descriptors' constant
   parts and start addresses (the ring starts at the first 1024-byte aligned shared address: swizzle
   atoms are 1024-byte aligned);
2. prologue: k tiles 0 .. STAGES - 3 issued (cp.async.cg 16 bytes, zero-fill past M / N / K), one
   commit group each;
3. k loop, tile kt: wait for its group, ``fence.proxy.async`` (cp.async writes -> async proxy),
   barrier; ``wgmma.fence``, 4 k16 steps x MI wgmma per warpgroup, commit; issue tile kt + STAGES - 2
   into the slot of tile kt - 2 (free: every thread passed the barrier after its ``wait_group 1`` that
   retired tile kt - 2's wgmma); ``wgmma.wait_group 1`` (tile kt's wgmma keeps running under the next
   iteration's wait and barrier);
   ``EARLY = 1``: the loads run STAGES - 1 tiles ahead instead: after the commit, ``wait_group 1`` and a
   barrier (tile kt - 1's wgmma retired in every warpgroup), then tile kt + STAGES - 1 into its slot;
4. epilogue: ``wait_group 0``, the f32 tile staged in shared memory (rows padded by STAGE_PAD), then
   (``EPI = 1``, :mod:`.epi_vec`) each thread takes 16-byte column groups of it through the chain and
   stores each group as one 16-byte vector (C layouts that allow it; otherwise, and with ``EPI = 0``,
   each thread walks the tile one output at a time, consecutive threads on consecutive columns).

Shared layouts (:mod:`.layout`): K-major operands as rows of 64 k (128 bytes, chunk c of row r at
c ^ (r % 8)), SBO = 1024; MN-major operands as 64-element panels of 64 k rows, LBO = 8192 (next panel),
SBO = 1024 (next 8 k rows). A warpgroup's m64 slice starts 8192 bytes after the previous one in both.
"""
from dataclasses import dataclass

from numba import cuda, float32, int32, int64, uint16, uint32

from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from ..primitives import ptx
from ..tc_gemm.epilogue_source import FUSED_ARGS
from . import epi_vec
from . import ptx as wp
from .config import BLOCK_K, STAGE_PAD, WgmmaConfig, check, smem_bytes, stage_bytes
from .layout import SWIZZLE_128B, desc_const

__all__ = ["WgmmaKernel", "make_wgmma_gemm", "KMAJOR_DESC", "MNMAJOR_DESC", "AB"]

#: wgmma input type of each operand dtype (float32 runs as TF32)
AB = {"bfloat16": "bf16", "float16": "f16", "float32": "tf32"}

#: (LBO, SBO, swizzle) of the two operand layouts
KMAJOR_DESC = (16, 1024, SWIZZLE_128B)
MNMAJOR_DESC = (64 * 128, 1024, SWIZZLE_128B)
#: bytes a k16 step moves the start address: K-major (32 bytes along the row), MN-major (16 k rows)
KSTEP_BYTES = {True: 32, False: 2048}
_SLICE = 64 * BLOCK_K * 2      # bytes of one m64 (or n64) slice of a stage

_CACHE = {}


@dataclass(frozen=True)
class WgmmaKernel:
    kernel: object
    cfg: WgmmaConfig
    a_kmajor: bool
    b_kmajor: bool
    in_dtype: str
    out_dtype: str
    smem: int
    source: str
    epi: object
    bias_dtype: str = "float32"
    res_dtype: str = "float32"


def _mn_affine(cfg):
    """Whether the MN-major slots are affine in the slot index (MNLD 1 and a power-of-two thread count)."""
    return cfg.MNLD == 1 and cfg.threads & (cfg.threads - 1) == 0


def _slot_setup(w, op, kmaj, threads, outer0, bound, ld, base, affine):
    """Setup lines of one operand's load slots (slot i = chunk tid + i * threads of the tile): per thread the
    slot-0 shared byte offset, global element offset at k = 0 and the bounds terms, from which slot i's
    are affine (:func:`_slot_lines`)."""
    if kmaj:   # chunk q: row q >> 3, 16-byte column q & 7; slot i: threads / 8 rows further (same swizzle)
        w(f"    {op}_r0 = tid >> 3")
        w(f"    {op}_so0 = {base} + {op}_r0 * 128 + (((tid & 7) ^ ({op}_r0 & 7)) << 4)")
        w(f"    {op}_go0 = {op}_zo + int64({outer0} + {op}_r0) * {ld} + (tid & 7) * 8")
        w(f"    {op}_lim = {bound} - {outer0} - {op}_r0")
    elif affine:   # chunk q: k row (q >> 3) & 63, panel q >> 9;
        # slot i: k row + (i threads / 8) % 64, panel + i threads / 512
        w(f"    {op}_o0 = {outer0} + (tid >> 9) * 64 + (tid & 7) * 8")
        w(f"    {op}_olim = {bound} - {op}_o0")
        w(f"    {op}_go0 = {op}_zo + int64(kr0) * {ld} + {op}_o0")
        w(f"    {op}_so0 = {base} + (tid >> 9) * {_SLICE} + kr0 * 128 + (((tid & 7) ^ (kr0 & 7)) << 4)")
    else:      # chunk q: k row (q >> 3) & 63, 64-wide panel q >> 9, 16-byte column q & 7
        w(f"    {op}_o0 = {outer0} + (tid & 7) * 8")


def _slot_lines(w, ind, op, kmaj, i, threads, ld, base, affine):
    """Lines issuing slot i of one operand for the k tile at ``k0`` into the stage at element ``sb``."""
    if kmaj:
        w(f"{ind}ok = ({op}_lim > {i * threads // 8}) & (k0 + kch < K)")
        w(f"{ind}src = ({op}_go0 + {i * threads // 8} * {ld} + k0) * ok")
        w(f"{ind}cpa(sm, sb + (({op}_so0 + {i * threads // 8 * 128}) >> 1), {op}, src, 16 * ok)")
    elif affine:   # dk, dp: compile-time k-row and panel steps of slot i (dk a multiple of 8: same swizzle)
        dk, dp = (i * threads // 8) % 64, (i * threads // 8) // 64
        w(f"{ind}ok = ({op}_olim > {64 * dp}) & (kl > {dk})")
        w(f"{ind}src = ({op}_gk + {dk} * {ld} + {64 * dp}) * ok")
        w(f"{ind}cpa(sm, sb + (({op}_so0 + {dp * _SLICE + dk * 128}) >> 1), {op}, src, 16 * ok)")
    else:
        w(f"{ind}q_ = tid + {i * threads}")
        w(f"{ind}kr = (q_ >> 3) & 63")
        w(f"{ind}o_ = {op}_o0 + (q_ >> 9) * 64")
        w(f"{ind}ok = (o_ < {'M' if op == 'a' else 'N'}) & (k0 + kr < K)")
        w(f"{ind}src = ({op}_zo + int64(k0 + kr) * {ld} + o_) * ok")
        w(f"{ind}sso = {base} + (q_ >> 9) * {_SLICE} + kr * 128 + (((q_ & 7) ^ (kr & 7)) << 4)")
        w(f"{ind}cpa(sm, sb + (sso >> 1), {op}, src, 16 * ok)")


def _source(cfg, a_kmajor, b_kmajor):
    BM, BN, MI = cfg.BLOCK_M, cfg.BLOCK_N, cfg.MI
    stages, threads = cfg.STAGES, cfg.threads
    ring_stage = stage_bytes(cfg)      # bytes of one ring stage (A tile + B tile)
    a_bytes = BM * BLOCK_K * 2         # bytes of the A tile: the B tile follows it in a stage
    acc_regs = BN // 2                 # f32 accumulator registers a thread holds per m64 slice
    lines = []
    w = lines.append
    w(f"def wgmma_gemm({', '.join(FUSED_ARGS)}):")
    w("    sm = cuda.shared.array(0, uint16)")
    w("    tid = cuda.threadIdx.x")
    w("    wg = tid >> 7")
    w("    base = int64(ptx.cvta_shared(sm, 0))")
    w("    pad = (1024 - (base & 1023)) & 1023")
    w("    sa = base + pad")
    w("    pe = pad >> 1")
    # tile order (GROUP_M block rows at a time); 32-bit divisions only (see ptx.udiv32)
    w(f"    npm = (M + {BM - 1}) >> {BM.bit_length() - 1}" if BM & (BM - 1) == 0 else
      f"    npm = wp.udiv32(M + {BM - 1}, {BM})")
    w(f"    npn = wp.udiv32(N + {BN - 1}, {BN})")
    w("    pid = cuda.blockIdx.x")
    w(f"    width = {cfg.GROUP_M} * npn")
    w("    grp = wp.udiv32(pid, width)")
    w(f"    first = grp * {cfg.GROUP_M}")
    w(f"    gsize = min(npm - first, {cfg.GROUP_M})")
    w("    pw = pid - grp * width")
    w("    col = wp.udiv32(pw, gsize)")
    w(f"    m0 = (first + pw - col * gsize) * {BM}")
    w(f"    n0 = col * {BN}")
    w("    zi = cuda.blockIdx.y")
    w("    z1i = wp.udiv32(zi, B2)")
    w("    z = int64(zi)")
    w("    z1 = int64(z1i)")
    w("    z2 = int64(zi - z1i * B2)")
    w("    a_zo = z1 * a_z1 + z2 * a_z2")
    w("    b_zo = z1 * b_z1 + z2 * b_z2")
    w("    kch = (tid & 7) * 8")
    affine = _mn_affine(cfg)
    mn_ops = affine and not (a_kmajor and b_kmajor)
    if mn_ops:
        w("    kr0 = (tid >> 3) & 63")
    ops = (("a", a_kmajor, BM, "m0", "M", "lda", 0), ("b", b_kmajor, BN, "n0", "N", "ldb", a_bytes))
    for op, kmaj, rows, outer0, bound, ld, base in ops:
        _slot_setup(w, op, kmaj, threads, outer0, bound, ld, base, affine)
    da, db = desc_const(*(KMAJOR_DESC if a_kmajor else MNMAJOR_DESC)), \
        desc_const(*(KMAJOR_DESC if b_kmajor else MNMAJOR_DESC))
    w(f"    da0 = int64({da}) | ((sa + wg * {MI * _SLICE}) >> 4)")
    w(f"    db0 = int64({db}) | ((sa + {a_bytes}) >> 4)")
    for i in range(MI):
        w(f"    acc{i} = wp.acc_zeros({acc_regs})")

    def load_stage(ind, stage_expr, k0_expr):
        w(f"{ind}sb = pe + ({stage_expr}) * {ring_stage // 2}")
        w(f"{ind}k0 = {k0_expr}")
        if mn_ops:
            w(f"{ind}kl = K - kr0 - k0")
        for op, kmaj, rows, outer0, bound, ld, base in ops:
            if affine and not kmaj:
                w(f"{ind}{op}_gk = {op}_go0 + int64(k0) * {ld}")
            for i in range(rows * 8 // threads):
                _slot_lines(w, ind, op, kmaj, i, threads, ld, base, affine)

    w(f"    ktiles = (K + {BLOCK_K - 1}) // {BLOCK_K}")
    ahead = stages - 1 if cfg.EARLY else stages - 2    # k tiles the loads run ahead of the wgmma
    w(f"    for s in range({ahead}):")
    w("        if s < ktiles:")
    load_stage("            ", "s", f"s * {BLOCK_K}")
    w("        ptx.cp_async_commit()")
    w("    for kt in range(ktiles):")
    w(f"        ptx.cp_async_wait_group({ahead - 1})")
    w("        wp.fence_proxy_async()")
    w("        cuda.syncthreads()")
    w(f"        so = (kt - wp.udiv32(kt, {stages}) * {stages}) * {ring_stage >> 4}")
    w("        wp.wgmma_fence()")
    ka, kb = KSTEP_BYTES[bool(a_kmajor)], KSTEP_BYTES[bool(b_kmajor)]
    for kk in range(BLOCK_K // 16):
        for i in range(MI):
            w(f"        acc{i} = mma(sm, acc{i}, da0 + so + {(i * _SLICE + kk * ka) >> 4}, "
              f"db0 + so + {(kk * kb) >> 4}, 1)")
    w("        wp.wgmma_commit()")
    if cfg.EARLY:   # retire tile kt - 1's wgmma in every warpgroup, then refill its slot
        w("        wp.wgmma_wait(1)")
        w("        cuda.syncthreads()")
    w(f"        nk = kt + {ahead}")
    w("        if nk < ktiles:")
    load_stage("            ", f"nk - wp.udiv32(nk, {stages}) * {stages}", f"nk * {BLOCK_K}")
    w("        ptx.cp_async_commit()")
    if not cfg.EARLY:
        w("        wp.wgmma_wait(1)")
    for i in range(MI):
        w(f"    acc{i} = wp.wgmma_wait_acc(0, acc{i})")
    # epilogue (make_wgmma_gemm): the ring drained, the tile staged in shared memory, then stored
    w("    ptx.cp_async_wait_all()")
    w("    cuda.syncthreads()")
    w("    smf = cuda.shared.array(0, float32)")
    w("    fe = pad >> 2")
    w("    zc = z1 * c_z1 + z2 * c_z2")
    w("    zb = z * bias_z")
    w("    zr = z1 * res_z1 + z2 * res_z2")
    return lines


def _stage_f32(w, cfg, ind):
    """The f32 accumulators into the staged tile (rows of BLOCK_N + STAGE_PAD floats), then a barrier."""
    stage_row, MI = cfg.BLOCK_N + STAGE_PAD, cfg.MI    # floats per staged row
    w(f"{ind}fo = fe + (wg * {MI * 64} + ((tid >> 5) & 3) * 16 + ((tid & 31) >> 2)) * {stage_row} + 2 * (tid & 3)")
    for i in range(MI):
        w(f"{ind}wp.store_acc(smf, fo + {i * 64 * stage_row}, acc{i}, {stage_row})")
    w(f"{ind}cuda.syncthreads()")


def make_wgmma_gemm(cfg=None, a_kmajor=True, b_kmajor=True, in_dtype="bfloat16", epi=None,
                    bias_dtype="float32", res_dtype="float32"):
    """The kernel for ``cfg`` (default: the first of CONFIGS), these layouts / dtypes and epilogue spec
    (default: ``alpha * A @ B`` stored as bfloat16), cached. ``in_dtype`` bfloat16 / float16, or float32
    (TF32: both operands K-major, passed as uint16 halves)."""
    cfg = cfg or WgmmaConfig()
    in_name = dt.dtype_name(in_dtype)
    epi = epi or ep.EpilogueSpec((), "bfloat16")
    epi = ep.EpilogueSpec(epi.steps, dt.dtype_name(epi.out_dtype), "float32")
    key = (cfg, bool(a_kmajor), bool(b_kmajor), in_name, epi, dt.dtype_name(bias_dtype),
           dt.dtype_name(res_dtype))
    if key in _CACHE:
        return _CACHE[key]
    ok, why = check(cfg)
    if not ok:
        raise ValueError(f"wgmma config {cfg.name}: {why}")
    ab = AB.get(in_name)
    if ab is None:
        raise ValueError(f"wgmma GEMM inputs must be bfloat16, float16 or float32 (TF32), got {in_name}")
    if ab == "tf32" and not (a_kmajor and b_kmajor):
        raise ValueError("wgmma TF32 needs k-contiguous A and B (B stored (n, k)): tf32 wgmma has no transpose")
    if epi.out_dtype not in ("bfloat16", "float16", "float32"):
        raise ValueError(f"wgmma GEMM output must be bfloat16, float16 or float32, got {epi.out_dtype}")
    lines = _source(cfg, a_kmajor, b_kmajor)
    bias = epi.bias_axis

    def bo(r, c):
        return {"col": f"zb + int64({c}) * bias_i", "row": f"zb + int64({r}) * bias_i"}.get(bias, "zb")

    def ro(r, c):
        return f"zr + int64({r}) * res_m + int64({c}) * res_n" if epi.has_residual else "zr"
    stage_row = cfg.BLOCK_N + STAGE_PAD     # floats per row of the staged f32 tile
    w, ind = lines.append, "    "
    if cfg.EPI == 3 and epi.linear and epi.out_dtype in epi_vec.PACK:   # packed fast path, else the f32 one
        epi_vec.emit_packed(w, cfg, epi.out_dtype)
        lines.append("    else:")
        w = (lambda s: lines.append("    " + s))   # noqa: E731  (the else branch: one level deeper)
    _stage_f32(w, cfg, ind)
    if cfg.EPI:
        epi_vec.emit(w, cfg, epi.out_dtype, bo, ro, stage_row)
    else:
        epi_vec.emit_scalar_walk(w, cfg, "    ", bo, ro, stage_row)
    src = "\n".join(lines) + "\n"
    g = {"cuda": cuda, "ptx": ptx, "wp": wp, "float32": float32, "int32": int32, "int64": int64,
         "uint16": uint16, "uint32": uint32, "mma": wp.get_wgmma(cfg.BLOCK_N, ab, not a_kmajor, not b_kmajor),
         "cpa": wp.get_cp_async_l2(cfg.L2PF) if cfg.L2PF else ptx.cp_async_cg_16_zfill,
         "epi": ep.build(epi, bias_dtype, res_dtype).fn, "epv": epi_vec.value_fn(epi, bias_dtype, res_dtype),
         "lds4": epi_vec.lds4, "stg4": epi_vec.stg4, "stg4cs": epi_vec.stg4cs, "vaddr": epi_vec.vaddr}
    exec(compile(src, f"<wgmma_gemm {cfg.name}>", "exec"), g)
    fn = g["wgmma_gemm"]
    fn.__module__ = __name__
    wk = WgmmaKernel(cuda.jit(fn), cfg, bool(a_kmajor), bool(b_kmajor), in_name, epi.out_dtype,
                     smem_bytes(cfg), src, epi, dt.dtype_name(bias_dtype), dt.dtype_name(res_dtype))
    _CACHE[key] = wk
    return wk
