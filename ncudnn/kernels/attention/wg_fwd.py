"""Flash-attention forward on Hopper's warpgroup tensor cores (``wgmma.mma_async``, FP16 / BF16 in, FP32
accumulation), for head dims 64 and 128 and rows that ``cp.async`` can copy in 16-byte chunks.

One block per (query tile, head, batch) of WG warpgroups; warpgroup ``wg`` owns the 64 query rows
``i0 + 64 wg ..`` and, inside it, warp ``w`` rows ``16 w ..`` (lane (g, t) = (lane >> 2, lane & 3) holds rows
g and g + 8, columns 2t and 2t + 1 of every 8-column block: the wgmma accumulator layout).

Shared memory (dynamic, from the first 1024-byte aligned address; :mod:`ncudnn.kernels.wgmma.layout`): the Q
tile and two stages each of the K and the V tile, every tile as 64-column panels of 128-byte rows with the
128-byte swizzle. Q is the K-major A operand of S = Q K^T and K its K-major B operand; the same V rows are the
MN-major B operand of O = P V (the transpose flag), so K and V are copied alike.

Per key tile ``it`` (software-pipelined inside a warpgroup, so that the tensor cores run a product while the
warpgroup does the softmax of another):

1. wait for the copies of K_it and V_(it-1), barrier; issue the copies of K_(it+1) and V_it into the stages
   whose readers (S_(it-1), P_(it-2) V_(it-2)) every warpgroup retired before that barrier;
2. issue S = Q K_it^T (D / 16 wgmma, both operands from shared memory), then O += P_(it-1) V_(it-1) (TILE_N / 16
   wgmma, P from registers: the previous softmax's probabilities rounded to the input type, already in the A
   fragment layout); wait for S only;
3. scores in log2 units (tiles no mask cuts take the plain product), the online softmax's max, rescale and
   ``ex2.approx`` in registers while P V runs; wait for P V (``hold_regs`` keeps P_(it-1)'s registers until
   then) and rescale O.

Under a right band bound (causal) the grid takes the query tiles in reverse, so that the tiles with the most keys
start first. After the last tile O += P V once more; O = acc / l and Stats = (m + log2 l) ln 2, with the conventions of
:mod:`.tc_fwd` for rows without a kept key and padding rows. Dropout is not taken (attention_tc_fwd runs it).
The source is generated (one named scalar per score and P register) so that they stay in registers.
"""
import functools
import math
from dataclasses import dataclass, replace

from numba import cuda, float32, int32, int64, uint16, uint32

from ..primitives import ptx
from ..primitives.warp import shfl_xor
from ..runtime.dtypes import storer, loader
from ..wgmma import ptx as wp
from ..wgmma.layout import SWIZZLE_128B, desc_const
from .fwd import FWD_ARGS
from .spec import NEG_INF, AttnSpec, alibi_slope_fn, key_range, llvm_inlined, score_fn, seq_bounds, unmasked_fn
from .tc_fwd import HALF, LN2, LOG2E, emit_epilogue, emit_softmax

__all__ = ["WgAttnConfig", "wg_fwd_kernel", "wg_fwd_source", "wg_fwd_grid", "wg_check", "wg_configs",
           "wg_default", "wg_smem_bytes", "acc_regs", "regs_cap", "WG_HEAD_DIMS"]

SMEM_LIMIT = 227 * 1024
WG_COUNTS = (1, 2, 3)
KEY_TILES = (64, 128)
#: head dims the kernel takes (whole 64-column swizzle panels; O's registers)
WG_HEAD_DIMS = (64, 128)
#: f32 registers a thread may give S, O and two sets of P registers together
MAX_ACC_REGS = 192
#: registers a thread needs besides those (addresses, softmax state, descriptors)
OTHER_REGS = 48
#: threads x registers of one SM (a block must fit: 3 warpgroups leave 170 registers a thread)
SM_REGS = 65536
ALIGN = 1024


@dataclass(frozen=True)
class WgAttnConfig:
    WG: int = 2           # warpgroups: BLOCK_M = 64 WG query rows
    BLOCK_N: int = 128    # keys per streamed tile

    @property
    def BLOCK_M(self):
        return 64 * self.WG

    @property
    def THREADS(self):
        return 128 * self.WG

    def replace(self, **kw):
        return replace(self, **kw)


def _layout(cfg, d, dv):
    """Byte offsets (from the aligned base) of the Q tile, the two K stages, the two V stages, and the end."""
    q_bytes = cfg.BLOCK_M * d * 2
    k0 = q_bytes
    v0 = k0 + 2 * cfg.BLOCK_N * d * 2
    return 0, k0, v0, v0 + 2 * cfg.BLOCK_N * dv * 2


def wg_smem_bytes(cfg, d, dv):
    """Dynamic shared memory of a block: the tiles and the slack to the first 1024-byte aligned address."""
    return _layout(cfg, d, dv)[-1] + ALIGN


def acc_regs(cfg, dv):
    """f32 registers a thread holds in S (TILE_N / 2), O (D_V / 2) and two sets of P (TILE_N / 4 each)."""
    return cfg.BLOCK_N + dv // 2


def regs_cap(cfg):
    """Registers a thread may have for a block of ``cfg`` to fit an SM (at most 255)."""
    return min(255, (SM_REGS // cfg.THREADS) & ~7)


def wg_check(dtypes, d_qk, d_v, cfg=None):
    """(ok, reason): whether the wgmma forward takes these dtypes (Q, K, V), head dims (and ``cfg``)."""
    q, k, v = dtypes
    if q not in HALF or k != q or v != q:
        return False, f"Q / K / V {q} / {k} / {v}: the wgmma forward takes all three FP16 or all three BF16"
    for name, dd in (("Q/K head dim", d_qk), ("V head dim", d_v)):
        if dd not in WG_HEAD_DIMS:
            return False, f"{name} {dd}: the wgmma forward takes {' or '.join(map(str, WG_HEAD_DIMS))}"
    if cfg is None:
        return True, ""
    if cfg.WG not in WG_COUNTS or cfg.BLOCK_N not in KEY_TILES:
        return False, f"WG {cfg.WG} not in {WG_COUNTS} or BLOCK_N {cfg.BLOCK_N} not in {KEY_TILES}"
    nbytes = wg_smem_bytes(cfg, d_qk, d_v)
    if nbytes > SMEM_LIMIT:
        return False, f"{nbytes} bytes of shared memory > {SMEM_LIMIT}"
    regs = acc_regs(cfg, d_v)
    cap = min(MAX_ACC_REGS, regs_cap(cfg) - OTHER_REGS)
    if regs > cap:
        return False, (f"{cfg.BLOCK_N // 2} S, {d_v // 2} O and 2 x {cfg.BLOCK_N // 4} P registers a thread: more "
                       f"than {cap} with {cfg.THREADS} threads a block")
    return True, ""


def wg_configs(dtypes, d_qk, d_v):
    """Every config that builds, largest key tile and most warpgroups first."""
    return [c for n in reversed(KEY_TILES) for w in reversed(WG_COUNTS)
            for c in (WgAttnConfig(w, n),) if wg_check(dtypes, d_qk, d_v, c)[0]]


def wg_default(dtypes, d_qk, d_v):
    """2 warpgroups (128 query rows) and 128-key tiles, else the first config that builds (None: not taken)."""
    for c in (WgAttnConfig(2, 128), WgAttnConfig(2, 64)):
        if wg_check(dtypes, d_qk, d_v, c)[0]:
            return c
    cs = wg_configs(dtypes, d_qk, d_v)
    return cs[0] if cs else None


def wg_fwd_grid(cfg, B, H, SQ):
    return (max(1, math.ceil(SQ / cfg.BLOCK_M)), H, B)


def _copy(emit, cfg, arr, base, row_stride, rows, first, bound, d, dst):
    """Copy ``rows`` rows of ``d`` 16-bit values (global rows ``first ..``, zero past ``bound``) into the panel
    layout at shared byte address ``dst``: chunk c of row r at panel c >> 3, row r, 16-byte slot
    (c & 7) ^ (r & 7). Threads that tile the chunks evenly copy rows ``cr + k step`` of chunk ``cc`` (set up
    once, :func:`_copy_setup`: ``step`` is a multiple of 8, so the swizzle is the same in every pass)."""
    ch, nt = d // 8, cfg.THREADS
    if nt % ch == 0 and (rows * ch) % nt == 0:
        step = nt // ch
        for k in range(rows * ch // nt):
            emit(f"gr = {first} + cr{d} + {k * step}")
            emit(f"src = {base} + gr * {row_stride} + 8 * cc{d} if gr < {bound} else {base}")
            emit(f"cpa(sm, {dst} + so{rows}_{d} + {k * step * 128}, {arr}, src, 16 if gr < {bound} else 0)")
        return
    lg = ch.bit_length() - 1
    emit(f"for e in range(tid, {rows * ch}, {nt}):")
    emit(f"    r = e >> {lg}")
    emit(f"    c = e & {ch - 1}")
    emit(f"    gr = {first} + r")
    emit(f"    src = {base} + gr * {row_stride} + 8 * c if gr < {bound} else {base}")
    emit(f"    cpa(sm, {dst} + (c >> 3) * {rows * 128} + r * 128 + (((c & 7) ^ (r & 7)) << 4), {arr}, src, "
         f"16 if gr < {bound} else 0)")


def _copy_setup(emit, cfg, shapes):
    """Per-thread chunk (``cc{d}``), first row (``cr{d}``) and shared offset (``so{rows}_{d}``) of the even copies."""
    nt = cfg.THREADS
    for d in sorted({d for _, d in shapes}):
        ch = d // 8
        if nt % ch == 0:
            emit(f"cc{d} = tid % {ch}")
            emit(f"cr{d} = tid // {ch}")
    for rows, d in sorted(set(shapes)):
        ch = d // 8
        if nt % ch == 0 and (rows * ch) % nt == 0:
            emit(f"so{rows}_{d} = (cc{d} >> 3) * {rows * 128} + cr{d} * 128 + (((cc{d} & 7) ^ (cr{d} & 7)) << 4)")


def _source(spec, cfg):
    """The kernel's Python source for ``spec`` / ``cfg`` (names resolved from :func:`wg_fwd_kernel`'s globals)."""
    D, DV, BN, BM = spec.D_QK, spec.D_V, cfg.BLOCK_N, cfg.BLOCK_M
    QB, KB, VB, _ = _layout(cfg, D, DV)
    KST, VST = BN * D * 2, BN * DV * 2          # bytes of a K / V stage
    NS, NO = BN // 8, DV // 8                   # 8-column blocks of S and of O
    KS_QK, KS_PV = D // 16, BN // 16            # k16 steps of the two products
    kdesc = desc_const(16, 1024, SWIZZLE_128B)          # K-major: rows of 128 bytes, 8-row atoms 1024 apart
    vdesc = desc_const(BN * 128, 1024, SWIZZLE_128B)    # MN-major V: 64-wide d panels BN * 128 bytes apart
    L = [f"def attn_wg_fwd({', '.join(FWD_ARGS)}):"]
    body = []
    b = body.append
    b("sm = cuda.shared.array(0, uint16)")
    b("base0 = int64(ptx.cvta_shared(sm, 0))")
    b(f"sa = base0 + ((({ALIGN} - (base0 & {ALIGN - 1})) & {ALIGN - 1}))")
    b("tid = cuda.threadIdx.x")
    b("wg = tid >> 7")
    b("lane = tid & 31")
    b("g = lane >> 2")
    b("t = lane & 3")
    b("bz = int64(cuda.blockIdx.z)")
    b("h = int64(cuda.blockIdx.y)")
    if spec.HAS_RIGHT:   # a right band bound: the last query tiles have the most keys, so they start first
        b(f"i0 = int64(cuda.gridDim.x - 1 - cuda.blockIdx.x) * {BM}")
    else:
        b(f"i0 = int64(cuda.blockIdx.x) * {BM}")
    b("hk = int64(wp.udiv32(int32(h), wp.udiv32(H, HK)))")   # int64 division is a call: wgmma would serialize
    b("lq, lk, shift = bounds(seq_q, seq_kv, bz, SQ, SK)")
    b("sc = float32(scale)")
    if spec.SCALE is not None:
        b("sc = ld_scale(scale_arr, 0)")
    b("sc2 = sc * LOG2E")
    b("slope = float32(0.0)")
    if spec.ALIBI:
        b("slope = slope_of(h, H)")
    _copy_setup(b, cfg, ((BM, D), (BN, D), (BN, DV)))
    b("qbase = bz * qb + h * qh")
    b("kbase = bz * kb + hk * kh")
    b("vbase = bz * vb + hk * vh")
    b(f"j0, j1 = krange(i0, min(i0 + {BM}, lq), lk, shift, left, right)")
    b(f"nstart = (j0 // {BN}) * {BN}")
    b(f"ntiles = (j1 - nstart + {BN - 1}) // {BN} if j1 > nstart else 0")
    b("# descriptors: this warpgroup's 64 Q rows (A), the K stages (B, K-major), the V stages (B, MN-major)")
    b(f"dq0 = int64({kdesc}) | ((sa + {QB} + wg * {64 * 128}) >> 4)")
    b(f"dk0 = int64({kdesc}) | ((sa + {KB}) >> 4)")
    b(f"dv0 = int64({vdesc}) | ((sa + {VB}) >> 4)")
    b("r0 = wg * 64 + ((tid >> 5) & 3) * 16 + g     # this thread's rows in the tile: r0 and r0 + 8")
    b("ia = i0 + r0")
    b("ib = ia + 8")
    b("m_a = NEG_INF")
    b("m_b = NEG_INF")
    b("l_a = float32(0.0)")
    b("l_b = float32(0.0)")
    b(f"oacc = wp.acc_zeros({DV // 2})")
    b(f"sacc = wp.acc_zeros({BN // 2})")
    b("# ---- the Q tile and the first K tile, then S_0 while K_1 and V_0 are copied")
    _copy(b, cfg, "q", "qbase", "qs", BM, "i0", "SQ", D, f"sa + {QB}")
    b("if ntiles > 0:")
    blk = []
    _copy(blk.append, cfg, "k", "kbase", "ks", BN, "nstart", "lk", D, f"sa + {KB}")
    body += ["    " + s for s in blk]
    b("ptx.cp_async_commit()")
    b("ptx.cp_async_wait_group(0)")
    b("wp.fence_proxy_async()")
    b("cuda.syncthreads()")

    def loads(emit, it):
        """Copies of K_(it + 1) (if any) and V_it into their stages, one commit group."""
        emit(f"if {it} + 1 < ntiles:")
        blk = []
        _copy(blk.append, cfg, "k", "kbase", "ks", BN, f"(nstart + ({it} + 1) * {BN})", "lk", D,
              f"(sa + {KB} + (({it} + 1) & 1) * {KST})")
        for s in blk:
            emit("    " + s)
        emit(f"if {it} < ntiles:")
        blk = []
        _copy(blk.append, cfg, "v", "vbase", "vs", BN, f"(nstart + {it} * {BN})", "lk", DV,
              f"(sa + {VB} + ({it} & 1) * {VST})")
        for s in blk:
            emit("    " + s)
        emit("ptx.cp_async_commit()")

    def issue_s(emit, it):
        """S = Q K_it^T: D / 16 wgmma (Q panel kk // 4, 32 bytes a k16 step); the first ignores ``sacc``'s old
        values (scale-d 0), so no zeroing a tile."""
        emit("wp.wgmma_fence()")
        for kk in range(KS_QK):
            qoff = ((kk >> 2) * BM * 128 + (kk & 3) * 32) >> 4
            koff = ((kk >> 2) * BN * 128 + (kk & 3) * 32) >> 4
            emit(f"sacc = mma_qk(sm, sacc, dq0 + {qoff}, dk0 + (({it}) & 1) * {KST >> 4} + {koff}, {int(kk > 0)})")
        emit("wp.wgmma_commit()")

    def issue_pv(emit, it):
        """O += P V_it from the P registers ``p{ks}_{0..3}``."""
        for ks in range(KS_PV):
            emit(f"oacc = mma_pv(sm, oacc, p{ks}_0, p{ks}_1, p{ks}_2, p{ks}_3, dv0 + (({it}) & 1) * {VST >> 4} + "
                 f"{(ks * 16 * 128) >> 4}, 1)")
        emit("wp.wgmma_commit()")

    def softmax(emit):
        """Scores of tile ``n0`` from ``sacc`` into the packed P registers ``q{ks}_{0..3}`` (:func:`.tc_fwd.emit_softmax`);
        alpha_a / alpha_b the rescale."""
        emit(f"{', '.join(f's{n}_{e}' for n in range(NS) for e in range(4))}, = sacc")
        emit_softmax(emit, spec, BM, BN)
        for ks in range(KS_PV):
            emit(f"q{ks}_0 = pack(s{2 * ks}_0, s{2 * ks}_1)")
            emit(f"q{ks}_1 = pack(s{2 * ks}_2, s{2 * ks}_3)")
            emit(f"q{ks}_2 = pack(s{2 * ks + 1}_0, s{2 * ks + 1}_1)")
            emit(f"q{ks}_3 = pack(s{2 * ks + 1}_2, s{2 * ks + 1}_3)")

    def rescale(emit):
        emit("oacc = wp.acc_scale_rows(oacc, alpha_a, alpha_b)")

    def take_p(emit):
        for ks in range(KS_PV):
            for j in range(4):
                emit(f"p{ks}_{j} = q{ks}_{j}")

    b("if ntiles > 0:")
    blk = []
    e = blk.append
    loads(e, "0")
    issue_s(e, "0")
    e("sacc = wp.wgmma_wait_acc(0, sacc)")
    e("n0 = nstart")
    softmax(e)
    take_p(e)
    body += ["    " + s for s in blk]
    b("for it in range(1, ntiles):")
    lp = []
    c_ = lp.append
    c_(f"n0 = nstart + it * {BN}")
    c_("ptx.cp_async_wait_group(0)    # K_it and V_(it-1) landed")
    c_("wp.fence_proxy_async()")
    c_("cuda.syncthreads()")
    loads(c_, "it")
    issue_s(c_, "it")
    issue_pv(c_, "(it - 1)")
    c_("sacc = wp.wgmma_wait_acc(1, sacc)    # S retired; P_(it-1) V_(it-1) may still run")
    softmax(c_)
    c_("oacc = wp.wgmma_wait_acc(0, oacc)")
    for ks in range(KS_PV):
        c_(f"wp.hold_regs(p{ks}_0, p{ks}_1, p{ks}_2, p{ks}_3)")
    rescale(c_)
    take_p(c_)
    body += ["    " + s for s in lp]
    b("if ntiles > 0:")
    blk = []
    e = blk.append
    e("ptx.cp_async_wait_group(0)")
    e("wp.fence_proxy_async()")
    e("cuda.syncthreads()")
    e("wp.wgmma_fence()")
    issue_pv(e, "(ntiles - 1)")
    e("oacc = wp.wgmma_wait_acc(0, oacc)")
    for ks in range(KS_PV):
        e(f"wp.hold_regs(p{ks}_0, p{ks}_1, p{ks}_2, p{ks}_3)")
    body += ["    " + s for s in blk]
    b("ptx.cp_async_wait_all()")
    b(f"{', '.join(f'o{n}_{e}' for n in range(NO) for e in range(4))}, = oacc")
    # rcp.rn's slow path is a call, which would serialize every wgmma of the kernel
    emit_epilogue(b, spec, NO, recip="ptx.rcp_approx({})")
    L += ["    " + s for s in body]
    return "\n".join(L) + "\n"


def wg_fwd_source(spec: AttnSpec, cfg: WgAttnConfig):
    """The generated kernel source (what :func:`wg_fwd_kernel` compiles)."""
    return _source(spec, cfg)


@functools.lru_cache(maxsize=None)
def wg_fwd_kernel(spec: AttnSpec, cfg: WgAttnConfig):
    """The ``cuda.jit`` wgmma forward kernel (launch: :func:`wg_fwd_grid` x cfg.THREADS with
    :func:`wg_smem_bytes` of dynamic shared memory; FWD_ARGS; sm_90a)."""
    ok, why = wg_check((spec.Q, spec.K, spec.V), spec.D_QK, spec.D_V, cfg)
    if not ok:
        raise ValueError(f"wgmma attention forward config {cfg}: {why}")
    if spec.DROPOUT:
        raise ValueError("the wgmma attention forward does not take dropout")
    ab = "bf16" if spec.Q == "bfloat16" else "f16"
    g = dict(__name__=__name__, cuda=cuda, math=math, ptx=ptx, wp=wp, float32=float32, int32=int32, int64=int64,
             uint16=uint16, uint32=uint32, NEG_INF=NEG_INF, LOG2E=float32(LOG2E), LN2=float32(LN2),
             shfl_xor=llvm_inlined(shfl_xor, 2), cpa=ptx.cp_async_cg_16_zfill_a,
             mma_qk=wp.get_wgmma(cfg.BLOCK_N, ab), mma_pv=wp.get_wgmma_rs(spec.D_V, ab, trans_b=True),
             pack=ptx.pack_bf16x2 if ab == "bf16" else ptx.pack_f16x2, st_o=llvm_inlined(storer(spec.O), 3),
             st_s=storer("float32"), ld_scale=loader(spec.SCALE) if spec.SCALE is not None else None,
             bounds=seq_bounds(spec), krange=key_range(spec), score=llvm_inlined(score_fn(spec), 17),
             unmasked=llvm_inlined(unmasked_fn(spec), 12),
             slope_of=alibi_slope_fn())
    exec(compile(_source(spec, cfg), f"<attn_wg_fwd {spec.D_QK}x{spec.D_V} {cfg}>", "exec"), g)
    if ptx.SIM or regs_cap(cfg) >= 255:
        return cuda.jit(g["attn_wg_fwd"])
    # three warpgroups: ptxas must keep to the registers a block of 384 threads can have, or the launch fails
    return cuda.jit(g["attn_wg_fwd"], max_registers=regs_cap(cfg))
