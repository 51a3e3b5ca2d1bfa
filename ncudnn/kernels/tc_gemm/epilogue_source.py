"""Source generation of the fused tensor-core GEMM epilogue (``make_tc_gemm(..., epi=spec)``): the kernel's
argument list, the shared-memory strip the accumulators are staged through and the lines that run the shared
epilogue (kernels/pointwise/epilogue.py) on every output element, with the optional amax tap and FP8 scales.
"""
from ..primitives import ptx

__all__ = ["FUSED_ARGS", "STAGE_PAD", "staging_bytes", "fused_arg_names", "fused_epilogue"]


#: argument list of the fused kernel (``make_tc_gemm(..., epi=spec)``), after the mainloop's
FUSED_ARGS = ("a", "b", "c", "bias", "res", "M", "N", "K", "B2", "lda", "ldb", "a_z1", "a_z2", "b_z1",
              "b_z2", "ldc_m", "ldc_n", "c_z1", "c_z2", "bias_z", "bias_i", "res_m", "res_n", "res_z1",
              "res_z2", "alpha", "beta")


#: f32 padding of a staged epilogue row (keeps the fragment writes at most 2-way bank conflicted)
STAGE_PAD = 4


def staging_bytes(cfg):
    """Shared bytes the fused epilogue stages through (one 16-row f32 strip per warp), reusing the ring."""
    return cfg.WARPS_M * cfg.WARPS_N * 16 * (cfg.BLOCK_N // cfg.WARPS_N + STAGE_PAD) * 4


def fused_arg_names(amax=False, dscales=0, pscales=None):
    """The fused kernel's parameters: :data:`FUSED_ARGS`, then ``amax`` (if any), then ``palpha`` (when
    ``pscales`` is not None), then the ``dscales`` device scale arrays ``ds0``, ``ds1``, ..., then the
    ``pscales`` post-amax scale arrays ``ps0``, ..."""
    post = pscales is not None
    return (FUSED_ARGS + (("amax",) if amax else ()) + (("palpha",) if post else ())
            + tuple(f"ds{i}" for i in range(dscales)) + tuple(f"ps{i}" for i in range(pscales or 0)))


def fused_epilogue(w, cfg, frags_m, frags_n, warp_m, warp_n, epi, amax=False, dscales=0, pscales=None, raw=False):
    """The shared epilogue ``epi(v, c, o, bias, b_off, res, r_off, alpha, beta)`` (kernels/pointwise/epilogue.py:
    alpha / beta blend, bias, pointwise chain, residual, cast, store) on every output element.

    The accumulators go through shared memory (the drained cp.async ring) one 16-row strip of the warp
    tile at a time: each warp writes its strip as f32 (fragment layout), then its lanes walk the strip
    row by row (consecutive lanes, consecutive columns: coalesced stores) calling ``epi`` in a loop.
    So the kernel has frags_m epilogue call sites, not one per accumulator (numba compile time), and the
    stores are warp-contiguous. ``amax``: also ``amax[0] = max(amax[0], |alpha * acc|)`` over the
    output (a warp max, one atomic per warp). ``pscales`` (not None): the epilogue runs with
    ``alpha * palpha * ps0[0] * ...`` while amax still sees ``|alpha * acc|`` (cudnn-frontend's FP8
    pattern: amax of the descaled product, then the output scale). ``raw``: ``epi`` stores the accumulator
    as it is (split-K partials): no bias or residual offsets."""
    bias = None if raw else epi.bias_axis
    res = False if raw else epi.has_residual
    stage_row = warp_n + STAGE_PAD     # words per row of a warp's staging tile
    for i in range(dscales):   # FP8 descale / scale tensors in device memory (element 0) fold into alpha
        w(f"    alpha = alpha * ds{i}[0]")
    ealpha = "alpha"
    if pscales is not None:    # the scales after the amax tap: by value (palpha) and in device memory
        w("    ealpha = alpha * palpha" + "".join(f" * ps{i}[0]" for i in range(pscales)))
        ealpha = "ealpha"
    if amax:
        w("    am = float32(0.0)")
    w("    ptx.cp_async_wait_all()")
    w("    cuda.syncthreads()")
    w(f"    smf = cuda.shared.array(0, float32)" if ptx.SIM else
      "    smf = cuda.shared.array(0, float32, alignment=128)")
    w(f"    wbase = warp * {16 * stage_row}")
    w(f"    fo = wbase + (lane >> 2) * {stage_row} + 2 * (lane & 3)")
    w("    zc = z1 * c_z1 + z2 * c_z2")
    w("    zb = z * bias_z" if bias else "    zb = int64(0)")
    w("    zr = z1 * res_z1 + z2 * res_z2" if res else "    zr = int64(0)")
    w(f"    col0 = n0 + wn * {warp_n}")
    for i in range(frags_m):
        if i:
            w("    cuda.syncthreads()")
        for n in range(frags_n):
            for q in range(4):
                w(f"    smf[fo + {(q >> 1) * 8 * stage_row + n * 8 + (q & 1)}] = c{i}_{n}_{q}")
        w("    cuda.syncthreads()")
        w(f"    row0 = m0 + wm * {warp_m} + {i * 16}")
        if cfg.VERSION >= 3:    # row loop: lanes_per_row lanes a row, rows_per_pass rows a pass; offsets once a row
            lanes_per_row = min(32, warp_n)
            rows_per_pass = 32 // lanes_per_row
            w(f"    for rp in range(0, 16, {rows_per_pass}):")
            w(f"        rl = rp + (lane // {lanes_per_row})" if rows_per_pass > 1 else "        rl = rp")
            w("        rr = row0 + rl")
            w("        if rr < M:")
            w("            orow = zc + int64(rr) * ldc_m")
            w(f"            srow = wbase + rl * {stage_row}")
            if bias == "row":
                w("            brow = zb + int64(rr) * bias_i")
            if res:
                w("            rrow = zr + int64(rr) * res_m")
            # unsigned offsets (non-negative by construction): no negative-index wraparound code per element
            first = f"lane % {lanes_per_row}" if rows_per_pass > 1 else "lane"
            w(f"            for cl in range({first}, {warp_n}, {lanes_per_row}):")
            w("                cc = int32(col0 + cl)")
            w("                if cc < N:")
            w("                    v = smf[uint32(srow + cl)]")
            bo = {"col": "uint64(zb + int64(cc) * bias_i)", "row": "uint64(brow)"}.get(bias, "uint64(zb)")
            ro_ = "uint64(rrow + int64(cc) * res_n)" if res else "uint64(zr)"
            w(f"                    epi(v, c, uint64(orow + int64(cc) * ldc_n), bias, {bo}, res, {ro_}, {ealpha}, "
              "beta)")
            if amax:
                w("                    am = max(am, abs(alpha * v))")
            continue
        w(f"    for e in range(lane, {16 * warp_n}, 32):")
        w(f"        rl = e // {warp_n}")
        w(f"        cl = e - rl * {warp_n}")
        w("        rr = row0 + rl")
        w("        cc = col0 + cl")
        w("        if rr < M and cc < N:")
        w(f"            v = smf[wbase + rl * {stage_row} + cl]")
        bo = {"col": "zb + int64(cc) * bias_i", "row": "zb + int64(rr) * bias_i"}.get(bias, "zb")
        ro_ = "zr + int64(rr) * res_m + int64(cc) * res_n" if res else "zr"
        w(f"            epi(v, c, zc + int64(rr) * ldc_m + int64(cc) * ldc_n, bias, {bo}, res, {ro_}, {ealpha}, beta)")
        if amax:
            w("            am = max(am, abs(alpha * v))")
    if amax:
        w("    am = warp_max(am)")
        w("    if lane == 0:")
        w("        cuda.atomic.max(amax, 0, am)")
