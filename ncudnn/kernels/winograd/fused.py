"""Fused Winograd F(2x2, 3x3) convolution kernel: input transform, the 16 transform-position
products as register-blocked GEMM tiles, output transform and the epilogue in one kernel.

A block owns BK output channels x BT output tiles (2x2 each) for all 16 positions xi. Per chunk of
BC input channels it (1) loads ``U[xi, c, k]`` (the transformed filter, from ``make_filter(2,
kfast=True)``) into shared memory, (2) transforms one BC x BT slice of input tiles into shared
memory (each thread: one (c, tile), predicated loads for padding), (3) accumulates: the threads of
position xi (``TPX = (BK/TK) * (BT/TT)`` of them) each own a TK x TT sub-tile (interleaved rows /
columns, as the SIMT GEMM) of ``M[xi] = U[xi]^T V[xi]``. After the last chunk the accumulators are
exchanged through shared memory, IP accumulator rows per pass, and each (k, tile) of the pass gets
``A^T M A`` and the epilogue. Everything lives in one flat shared array (operands, then reused for
the exchange).

Signature: ``kernel(x, u, y, bias, res, C, K, H, W, P, Q, TH, TW, T, pad_h, pad_w,
x_strides(4), y_strides(4), b_stride, r_strides(4), alpha, beta)``; grid ``(ceil(T/BT), ceil(K/BK))``,
``NT = 16 * TPX`` threads.
"""
from dataclasses import dataclass

from numba import cuda, float32, int64, uint64

from ..runtime import dtypes
from .kernels import input_window, sandwich, tile_origin
from .transforms import transform

_CACHE = {}


@dataclass(frozen=True)
class FusedConfig:
    BK: int = 32      # output channels per block
    BT: int = 32      # output tiles per block
    BC: int = 8       # input channels per chunk
    TK: int = 8       # accumulator rows (channels) per thread
    TT: int = 8       # accumulator columns (tiles) per thread
    IP: int = 4       # accumulator rows exchanged per pass
    PAD: int = 4      # extra words per shared row

    @property
    def tpx(self):
        return (self.BK // self.TK) * (self.BT // self.TT)

    @property
    def threads(self):
        return 16 * self.tpx

    @property
    def operand_words(self):
        return 16 * self.BC * (self.BK + self.PAD) + 16 * self.BC * (self.BT + self.PAD)

    @property
    def exchange_words(self):
        return 16 * self.IP * (self.BK // self.TK) * (self.BT + 1)

    def smem_bytes(self):
        return 4 * max(self.operand_words, self.exchange_words)


def check(cfg):
    """(ok, reason) for a FusedConfig."""
    if cfg.BK % cfg.TK or cfg.BT % cfg.TT or cfg.TK % cfg.IP:
        return False, "BK / BT must be multiples of TK / TT, TK of IP"
    nt = cfg.threads
    if nt > 1024 or nt % 16:
        return False, f"{nt} threads"
    if (16 * cfg.BC * cfg.BK) % nt:
        return False, "the U chunk does not split over the threads"
    if cfg.smem_bytes() > 48 * 1024:
        return False, f"{cfg.smem_bytes()} B of shared memory > 48 KB"
    return True, ""


def _source(cfg, cfast, has_res):
    t = transform(2)
    input_bt, output_at = t.BT, t.AT              # the input transform B^T and the output transform A^T
    BK, BT, BC, TK, TT, IP, PAD = cfg.BK, cfg.BT, cfg.BC, cfg.TK, cfg.TT, cfg.IP, cfg.PAD
    threads, per_position = cfg.threads, cfg.tpx  # threads of the block, of one transform position
    threads_k, threads_t = BK // TK, BT // TT     # thread grid of one position (channels x tiles)
    u_row, v_row = BK + PAD, BT + PAD             # words per shared row of U[xi, c, :] and V[xi, c, :]
    v_start = 16 * BC * u_row                     # V follows U in the shared array
    pass_rows = IP * threads_k                    # channels per exchange pass
    m_row = BT + 1                                # words per exchange row (+1: no bank conflicts)
    lines = [f"def wino_fused(x, u, y, bias, res, C, K, H, W, P, Q, TH, TW, T, pad_h, pad_w, s_n, s_c, s_h, s_w,",
             f"                sy_n, sy_k, sy_h, sy_w, b_s, sr_n, sr_k, sr_h, sr_w, alpha, beta):",
             f"    sm = cuda.shared.array({max(cfg.operand_words, cfg.exchange_words)}, float32)",
             f"    acc = cuda.local.array(({TK}, {TT}), float32)",
             f"    af = cuda.local.array({TK}, float32)",
             f"    bf = cuda.local.array({TT}, float32)",
             f"    tid = cuda.threadIdx.x",
             f"    t0 = cuda.blockIdx.x * {BT}",
             f"    k0 = cuda.blockIdx.y * {BK}",
             f"    xi = tid // {per_position}",
             f"    r = tid - xi * {per_position}",
             f"    tk = r // {threads_t}",
             f"    tt = r - tk * {threads_t}",
             f"    for i in range({TK}):",
             f"        for j in range({TT}):",
             f"            acc[i, j] = float32(0.0)",
             f"    for c0 in range(0, C, {BC}):",
             f"        for e0 in range(0, {16 * BC * BK}, {threads}):",
             f"            e = e0 + tid",
             f"            kk = e % {BK}",
             f"            q = e // {BK}",
             f"            cc = q % {BC}",
             f"            px = q // {BC}",
             f"            c = c0 + cc",
             f"            k = k0 + kk",
             f"            sm[uint64((px * {BC} + cc) * {u_row} + kk)] = u[uint64((px * C + c) * K + k)] if c < C and k < K else float32(0.0)",
             f"        for e in range(tid, {BC * BT}, {threads}):"]
    if cfast:
        lines += [f"            cc = e % {BC}", f"            ti = e // {BC}"]
    else:
        lines += [f"            ti = e % {BT}", f"            cc = e // {BT}"]
    lines += [f"            c = c0 + cc",
              f"            tg = t0 + ti",
              f"            ok = c < C and tg < T",
              ] + tile_origin("tg", " " * 12) + input_window(input_bt, 2, "ok", " " * 12)
    lines.append(f"            vo = {v_start} + cc * {v_row} + ti")
    lines += sandwich(input_bt, lambda k, j: f"d_{k}_{j}", "t",
                      lambda i, j, e: f"            sm[uint64(vo + {(i * 4 + j) * BC * v_row})] = {e}", " " * 12)
    lines += [f"        cuda.syncthreads()",
              f"        ub = xi * {BC * u_row} + tk",
              f"        vb = {v_start} + xi * {BC * v_row} + tt",
              f"        for cc in range({BC}):",
              f"            for i in range({TK}):",
              f"                af[i] = sm[uint64(ub + cc * {u_row} + i * {threads_k})]",
              f"            for j in range({TT}):",
              f"                bf[j] = sm[uint64(vb + cc * {v_row} + j * {threads_t})]",
              f"            for i in range({TK}):",
              f"                for j in range({TT}):",
              f"                    acc[i, j] += af[i] * bf[j]",
              f"        cuda.syncthreads()",
              # ---- exchange + output transform, IP accumulator rows per pass
              f"    for p in range({TK // IP}):",
              f"        for ii in range({IP}):",
              f"            for j in range({TT}):",
              f"                sm[uint64((xi * {pass_rows} + ii * {threads_k} + tk) * {m_row} + tt + j * {threads_t})] = acc[p * {IP} + ii, j]",
              f"        cuda.syncthreads()",
              f"        for e in range(tid, {pass_rows * BT}, {threads}):"]
    if cfast:
        lines += [f"            rho = e % {pass_rows}", f"            ti = e // {pass_rows}"]
    else:
        lines += [f"            ti = e % {BT}", f"            rho = e // {BT}"]
    lines += [f"            k = k0 + p * {pass_rows} + rho",
              f"            tg = t0 + ti",
              f"            if k < K and tg < T:"]
    for i in range(4):
        for j in range(4):
            lines.append(f"                m_{i}_{j} = sm[uint64(({i * 4 + j} * {pass_rows} + rho) * {m_row} + ti)]")
    lines += sandwich(output_at, lambda k, j: f"m_{k}_{j}", "s", lambda i, j, e: f"                o_{i}_{j} = {e}", " " * 16)
    lines += tile_origin("tg", " " * 16)
    lines += [
              f"                p0 = th * 2",
              f"                q0 = tw * 2",
              f"                yb = nimg * sy_n + k * sy_k + p0 * sy_h + q0 * sy_w",
              f"                rb = nimg * sr_n + k * sr_k + p0 * sr_h + q0 * sr_w",
              f"                b_off = uint64(k * b_s)"]
    for i in range(2):
        for j in range(2):
            r_off = f"uint64(rb + {i} * sr_h + {j} * sr_w)" if has_res else "uint64(0)"
            lines.append(f"                if p0 + {i} < P and q0 + {j} < Q:")
            lines.append(f"                    epi(o_{i}_{j}, y, uint64(yb + {i} * sy_h + {j} * sy_w), bias, b_off, res, "
                         f"{r_off}, alpha, beta)")
    lines.append(f"        cuda.syncthreads()")
    return "\n".join(lines) + "\n"


def make_fused(cfg, x_dtype, epi, cfast=False):
    """The fused F(2x2, 3x3) kernel for ``cfg`` (:class:`FusedConfig`), input dtype and built epilogue."""
    ok, why = check(cfg)
    if not ok:
        raise ValueError(f"bad fused Winograd config {cfg}: {why}")
    x_dtype = dtypes.dtype_name(x_dtype)
    key = (cfg, x_dtype, bool(cfast), epi.key)
    if key not in _CACHE:
        g = {"cuda": cuda, "float32": float32, "int64": int64, "uint64": uint64, "ld": dtypes.loader(x_dtype),
             "epi": epi.fn}
        src = _source(cfg, cfast, epi.RESIDUAL)
        exec(compile(src, f"<winograd fused {key}>", "exec"), g)
        _CACHE[key] = cuda.jit(g["wino_fused"])
    return _CACHE[key]
