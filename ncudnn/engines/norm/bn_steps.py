"""The Steps of the dedicated batch-norm kernels on packed NHWC ("cols") and NCHW ("planes") tensors: the layout
test (:func:`bn_layout`), the KERNEL_CFG variant tables, the statistics pass, the fused chunk combine +
coefficients, the apply pass and the one-kernel (cooperative) backward. Engine "norm_batch"
(:mod:`ncudnn.engines.norm.batch`) chooses among them.
"""
from numba.cuda import types

from ...kernels.norm import bn_cols as kcols
from ...kernels.norm import bn_finalize as kbf
from ...kernels.norm import bn_colsv as kcolsv
from ...kernels.norm import bn_fin as kfin
from ...kernels.primitives import grid_sync as kgsync
from ...kernels.norm import bn_persist as kpersist
from ...kernels.norm import bn_planes as kplanes
from ...kernels.primitives import warp as kprim
from ...platform import simulator_enabled
from ..membound.common import Arg, Step, kdtype, src_key, tensor_bytes
from .bn_finalize import group_desc, tensor_arg

__all__ = ["bn_layout", "COLS_VARIANTS", "COLS_LABELS", "PERSIST_VARIANTS", "PLANES_LABELS", "var_cpb", "var_persist",
           "persist_geometry", "persist_step", "var_align", "bn_stats_steps", "fin_step", "l2_reuse_bytes",
           "bn_apply_step"]


def bn_layout(x):
    """The dedicated BN kernels' view of ``x``: ("cols", rows, C) when the channel is innermost and the
    other dims pack rows of C (NHWC), ("planes", N, C, HW, sN) when each (n, c) plane of the spatial
    dims is contiguous at offset n * sN + c * HW (NCHW), else None (the generic reduce path)."""
    dims, st = tuple(int(d) for d in x.dims), tuple(int(s) for s in x.strides)
    C = dims[1]
    spatial = [d for d in range(2, len(dims))]
    hw = 1
    for d in reversed(spatial):                                        # NCHW: spatial dims row-major
        if dims[d] > 1 and st[d] != hw:
            break
        hw *= dims[d]
    else:
        if (C == 1 or st[1] == hw) and (dims[0] == 1 or st[0] >= C * hw):
            return ("planes", dims[0], C, hw, st[0] if dims[0] > 1 else C * hw)
    acc = C                                                            # NHWC: rows of C contiguous channels
    if C > 1 and st[1] != 1:
        return None
    for d in reversed([0] + spatial):
        if dims[d] > 1 and st[d] != acc:
            return None
        acc *= dims[d]
    return ("cols", acc // C, C)


#: KERNEL_CFG values: which kernels run packed NHWC batch norm. None: :mod:`ncudnn.kernels.norm.bn_cols`
#: (statistics and apply with their own grids); else (vec, reverse, hint, fin) of :mod:`ncudnn.kernels.norm.bn_colsv`
#: (one geometry for both passes; reverse: the apply pass walks each chunk backwards, starting on the rows
#: the statistics pass left in the L2; hint: streaming loads / stores in the apply pass; fin: the chunk
#: combine and the coefficients in one kernel, :mod:`ncudnn.kernels.norm.bn_fin`). Entries of 6:
#: (vec, reverse, hint, fin, cpb, align): ``cpb`` channels per block of the fused combine (< 32: the
#: many-block tree combine of :func:`ncudnn.kernels.norm.bn_fin.tree_geometry`), ``align``: chunk rows a
#: multiple of TY * unroll and the threads' last rows loaded at once (no one-row tail trips).
COLS_VARIANTS = (None, (4, True, True, False), (4, True, False, False), (4, False, False, False),
                 (1, True, False, False), (4, False, True, False), (4, True, True, True), (4, True, False, True),
                 (1, True, False, True),
                 (4, True, True, True, 8, False), (4, True, True, True, 4, False), (4, True, True, True, 32, True),
                 (4, True, True, True, 8, True), (4, True, True, True, 4, True))
COLS_LABELS = ("cols", "colsv4_rev_hint", "colsv4_rev", "colsv4", "colsv1_rev", "colsv4_hint", "colsv4_rev_hint_fin",
               "colsv4_rev_fin", "colsv1_rev_fin",
               "colsv4_rev_hint_fin8", "colsv4_rev_hint_fin4", "colsv4_rev_hint_fin_al", "colsv4_rev_hint_fin8_al",
               "colsv4_rev_hint_fin4_al")
#: the one-kernel backward (:mod:`ncudnn.kernels.norm.bn_persist`, a cooperative grid of one block an SM keeping
#: rows of (x, dy) in registers and shared memory between the sums and the dx pass): (threads, register rows,
#: shared rows, unroll) a thread; appended to COLS_VARIANTS as 7-entry tuples whose last entry is ("persist", ...)
PERSIST_VARIANTS = kpersist.PERSIST_CASES
COLS_VARIANTS += tuple((4, True, True, True, 8, True, ("persist",) + v) for v in PERSIST_VARIANTS)
COLS_LABELS += tuple("persist_t%d_r%d_s%d_u%d" % v[:4] + ("_cp" if v[4] else "") + ("_pf%d" % v[5] if v[5] else "")
                     for v in PERSIST_VARIANTS)
#: KERNEL_CFG values of packed NCHW batch norm: the apply pass in the statistics pass's plane order, or reversed
PLANES_LABELS = ("planes", "planes_rev")


def var_cpb(var):
    """Channels per block of a variant's fused combine (32: the (32, TY) combine)."""
    return var[4] if var is not None and len(var) > 4 else 32


def var_persist(var):
    """(threads, register rows, shared rows, unroll, cp.async, prefetched rows) of a one-kernel backward variant,
    else None."""
    return var[6][1:] if var is not None and len(var) > 6 else None


def _persist_blocks():
    """Co-resident blocks of the one-kernel backward: one an SM (the simulator runs blocks one after another:
    one)."""
    return 1 if simulator_enabled() else kprim.sm_count()


def persist_geometry(lay, var):
    """(PersistConfig, dynamic shared bytes) of a one-kernel variant on layout ``lay``, or (None, why).
    One block an SM (the simulator runs blocks one after another: one block there)."""
    threads, nr, ns, unroll, _, pf = var_persist(var)
    _, rows, C = lay
    blocks = _persist_blocks()
    g = kpersist.persist_config(rows, C, blocks, threads, fill=True)
    if g is None:
        return None, f"the one-kernel backward needs C % 4 == 0 and at most {blocks * 256} channels " \
            f"({blocks} co-resident blocks of 256 channels)"
    if g.tiles * g.chunks != blocks:
        return None, f"the one-kernel backward's grid must fill all {blocks} SMs (its barrier's condition): " \
            f"C = {C} makes {g.tiles} channel tiles of 256, which do not divide {blocks}"
    shared = kpersist.shared_bytes(threads, ns, pf)
    if shared + kpersist.static_bytes(threads) > kpersist.SMEM_LIMIT:
        return None, f"{ns} shared rows of {threads} threads exceed {kpersist.SMEM_LIMIT} bytes of shared memory"
    return g, shared


def persist_step(lay, scratch, x, dy, dx, tensors, var):
    """The one-kernel backward Step (sums, combine + coefficients, dx; two grid barriers)."""
    threads, nr, ns, unroll, acache, pf = var_persist(var)
    _, rows, C = lay
    g, shared = persist_geometry(lay, var)
    p0, p1 = scratch.take(g.chunks * C, "float32"), scratch.take(g.chunks * C, "float32")
    coef = scratch.take(3 * C, "float32")
    descs, cargs = _descs(tensors, [(n, None) for n in kpersist.CHANNEL_ARRAYS])
    cpb, _ = kpersist.phase2_geometry(C, g.tiles * g.chunks, threads)
    # the inline barrier on the device's one counter: the grid fills every SM with one block each (the shared
    # memory padded to guarantee it), so no block of another such grid starts before this one's last barrier
    fargs = (C, descs, g.txv, g.ty, g.tiles, nr, ns, unroll, cpb, True, acache, 0, True, pf, True)
    args = [Arg.tensor(x), Arg.tensor(dy), Arg.tensor(dx), p0, p1, coef] + cargs + \
        [Arg.const(rows), Arg.const(g.chunk_rows), Arg.const(g.chunks), Arg.const(float(rows), types.float64),
         Arg.device(kgsync.device_counter, 1, "uint32")]
    shared = max(shared, kpersist.ONE_BLOCK_SHARED)
    on_chip = min(rows, g.chunks * g.ty * (nr + ns)) * C * 8
    step = Step("norm_bn_persist_bwd:" + src_key(fargs), lambda: kpersist.persist_bwd_kernel(*fargs)[0],
                (g.tiles, g.chunks), (g.txv, g.ty), args, shared=shared,
                nbytes=tensor_bytes(x, dy, dx) + tensor_bytes(x, dy) - on_chip)
    step.cooperative = True     # co-residency checked by the driver (an error, never a hang)
    step.inflight = unroll * 32
    step.align = {0: 16, 1: 16, 2: 16}
    return step


def var_align(var):
    """Whether a variant aligns the chunk rows and loads the threads' last rows at once."""
    return bool(var is not None and len(var) > 5 and var[5])


def _colsv_geometry(lay, var, bwd, occupancy, unroll):
    vec = var[0]
    per_sm = occupancy or (4 if bwd else 5)
    return kcolsv.colsv_config(lay[1], lay[2], kprim.sm_count(), vec=vec, blocks_per_sm=per_sm, unroll=unroll,
                               align=var_align(var))


def _colsv_twin(g, C):
    """The VEC 1 geometry with the same chunks (the element-load twin of a VEC 4 step)."""
    one = kcolsv.colsv_config(g.chunk_rows * g.chunks, C, 1, vec=1, blocks_per_sm=1, unroll=g.unroll)
    return kcolsv.ColsVConfig(one.txv, one.ty, 1, g.unroll, one.tiles, g.chunks, g.chunk_rows)


def bn_stats_steps(lay, scratch, x, out0, out1, ct, dy=None, mean=None, var=None, occupancy=0, unroll=4):
    """Steps writing per-channel sums into scratch Args ``out0`` / ``out1`` with the dedicated kernels:
    forward (``dy`` None) sum (x - K), sum (x - K)^2 with K = x[0, c, 0...]; backward sum dy,
    sum dy * (x - mean). ``var``: a :data:`COLS_VARIANTS` entry for the "cols" layout."""
    sms = kprim.sm_count()
    x_dt, dy_dt = kdtype(x), (kdtype(dy) if dy is not None else None)
    m_dt = kdtype(mean) if mean is not None else "float32"
    m_st = (mean.strides[1] if mean.dims[1] > 1 else 0) if mean is not None else 1
    ins = [Arg.tensor(x), Arg.tensor(dy) if dy is not None else Arg.dummy(x_dt),
           Arg.tensor(mean) if mean is not None else Arg.dummy("float32")]
    nbytes = tensor_bytes(x, dy)
    ct = ct if dy is not None else "float64"   # the forward partial sums (and out0 / out1) are float64
    if lay[0] == "cols" and var is not None:
        _, rows, C = lay
        g = _colsv_geometry(lay, var, dy is not None, occupancy, unroll)
        p0, p1 = scratch.take(g.chunks * C, ct), scratch.take(g.chunks * C, ct)
        args = ins + [p0, p1, Arg.const(rows), Arg.const(g.chunk_rows)]

        def step(g):
            fargs = (C, x_dt, dy_dt, m_dt, m_st, g.txv, g.ty, g.vec, g.unroll, var_align(var))
            s = Step("norm_bn_colsv_partial:" + src_key(fargs), lambda: kcolsv.partial_kernel(*fargs)[0],
                     (g.tiles, g.chunks), (g.txv, g.ty), args, nbytes=nbytes)
            s.inflight = g.unroll * g.vec * 4 * (2 if dy is not None else 1)
            return s
        main = step(g)
        if g.vec > 1:
            main.fallback = step(_colsv_twin(g, C))
            main.align = {0: 16, 1: 16} if dy is not None else {0: 16}
        cty = kcols.combine_ty(g.chunks)
        comb = Step(f"norm_bn_colsv_combine:{ct}:{cty}", lambda: kcolsv.combine_kernel(ct, cty)[0],
                    max(1, -(-C // 32)), (32, cty), [p0, p1, out0, out1, Arg.const(g.chunks), Arg.const(C)],
                    nbytes=g.chunks * C * 2 * (8 if ct == "float64" else 4))
        return [main, comb]
    elif lay[0] == "cols":
        _, rows, C = lay
        cfg = kcols.cols_config(rows, C, sms)
        fargs = (C, x_dt, dy_dt, m_dt, m_st, cfg.tx, cfg.ty, cfg.unroll)
        p0, p1 = scratch.take(cfg.chunks * C, ct), scratch.take(cfg.chunks * C, ct)
        main = Step("norm_bn_cols_partial:" + src_key(fargs), lambda: kcols.partial_kernel(*fargs)[0],
                    (cfg.tiles, cfg.chunks), (cfg.tx, cfg.ty),
                    ins + [p0, p1, Arg.const(rows), Arg.const(cfg.chunk_rows)], nbytes=nbytes)
        chunks = cfg.chunks
    else:
        _, n, C, hw, sn = lay
        chunks, per = kplanes.planes_config(n, C, sms)
        T = kplanes.threads_for(hw)
        fargs = (C, hw, sn, T, x_dt, dy_dt, m_dt, m_st)
        p0, p1 = scratch.take(chunks * C, ct), scratch.take(chunks * C, ct)
        main = Step("norm_bn_planes_partial:" + src_key(fargs), lambda: kplanes.partial_kernel(*fargs)[0],
                    (C, chunks), T, ins + [p0, p1, Arg.const(n), Arg.const(per)], nbytes=nbytes)
    cty = kcols.combine_ty(chunks)
    comb = Step(f"norm_bn_combine:{ct}:{cty}", lambda: kcols.combine_kernel(ct, ty=cty), max(1, -(-C // kcols.TX)),
                (kcols.TX, cty), [p0, p1, out0, out1, Arg.const(chunks), Arg.const(C)],
                    nbytes=chunks * C * 2 * (8 if ct == "float64" else 4))
    return [main, comb]


def _descs(tensors, names):
    """(dtype, sN, sC) and Arg per name, as the finalize steps lay them out (scratch: dense per channel)."""
    descs, args = [], []
    for name, _ in names:
        t = tensors.get(name)
        if isinstance(t, tuple):
            descs.append((t[2], 0, 1))
            args.append(t[1])
        else:
            descs.append(group_desc(t))
            args.append(tensor_arg(t))
    return tuple(descs), args


def fin_step(comb, tensors, C, count, eps=None, mom=None, shift=None, kout=None, cpb=32):
    """The combine Step ``comb`` of the colsv statistics replaced by the fused combine + coefficients
    kernel (:mod:`ncudnn.kernels.norm.bn_fin`): forward when ``eps`` is given (``tensors`` as for
    finalize_step; ``kout``: the scratch Arg receiving K per channel), else backward (as for bwd_weights_step).
    ``cpb`` < 32: the tree combine on ceil(C / cpb) blocks of (cpb, lanes)."""
    p0, p1, chunks = comb.args[0], comb.args[1], comb.args[4]
    cty, nper, grid, block = comb.block[1], 4, comb.grid, comb.block
    if cpb != 32:
        cty, nper = kfin.tree_geometry(chunks.value, cpb)
        grid, block = max(1, -(-C // cpb)), (cpb, cty)
    if eps is not None:
        descs, args = _descs(dict(tensors, shift=shift), kbf.FINALIZE_ARRAYS)
        writes = frozenset(n for n in ("saved_mean", "saved_inv", "next_mean", "next_var") if tensors.get(n) is not None)
        scalars = tuple((n, a.dtype) for n, a in (("eps", eps), ("mom", mom)) if a.kind == "tensor")
        key = "norm_bn_fin_fwd:" + src_key(descs, sorted(writes), scalars, cty, cpb, nper)
        factory = lambda: kfin.fin_kernel(descs, writes, scalars, cty, 4, cpb, nper)[0]  # noqa: E731
        tail = [eps, mom]
        args = args + [kout]
    else:
        descs, args = _descs(tensors, kbf.BWD_ARRAYS)
        key = "norm_bn_fin_bwd:" + src_key(descs, cty, cpb, nper)
        factory = lambda: kfin.bwd_kernel(descs, cty, 4, cpb, nper)[0]  # noqa: E731
        tail = []
    return Step(key, factory, grid, block,
                [p0, p1] + args + [chunks, Arg.const(C), Arg.const(count, types.float64)] + tail,
                nbytes=comb.nbytes + C * 4 * 8)


def l2_reuse_bytes(lay, var, device_l2, *ts):
    """DRAM bytes the reverse apply pass is expected to find in the L2 (about half the L2 worth of
    what the statistics pass read last; with streaming hints about three quarters)."""
    if lay[0] != "cols" or not isinstance(var, tuple) or not var[1]:
        return 0
    share = 0.75 if var[2] else 0.5
    return int(min(tensor_bytes(*ts), device_l2) * share)


def bn_apply_step(lay, x, out, coefs, ct, dy=None, var=None, occupancy=0, unroll=4):
    """The dedicated apply pass: ``out = (x - K) * e0 + e1`` (forward; K = x[0, c, 0...], e1 the
    shifted eq_bias) or ``dy * e0 + x * e1 + e2`` (backward, ``dy`` given); ``coefs``: per-channel
    scratch Args in ``ct``; ``var``: a :data:`COLS_VARIANTS` entry for the "cols" layout, True for the
    reverse plane order of "planes"."""
    shifted = dy is None
    x_dt, o_dt, dy_dt = kdtype(x), kdtype(out), (kdtype(dy) if dy is not None else None)
    ins = [Arg.tensor(x), Arg.tensor(dy) if dy is not None else Arg.dummy(x_dt)]
    e = list(coefs) + [Arg.dummy(ct)] * (3 - len(coefs))
    nbytes = tensor_bytes(x, dy, out)
    if lay[0] == "cols" and var is not None:
        _, rows, C = lay
        g = _colsv_geometry(lay, var, dy is not None, occupancy, unroll)
        args = ins + e + [Arg.tensor(out), Arg.const(rows), Arg.const(g.chunk_rows)]

        def step(g):
            fargs = (C, x_dt, o_dt, dy_dt, ct, g.txv, g.ty, g.vec, g.unroll, shifted, var[1], var[2],
                     shifted and len(coefs) == 3, var_align(var))
            s = Step("norm_bn_colsv_apply:" + src_key(fargs), lambda: kcolsv.apply_kernel(*fargs)[0],
                     (g.tiles, g.chunks), (g.txv, g.ty), args, nbytes=nbytes)
            s.inflight = g.unroll * g.vec * 4 * (2 if dy is not None else 1)
            return s
        main = step(g)
        if g.vec > 1:
            main.fallback = step(_colsv_twin(g, C))
            main.align = {0: 16, 1: 16, 5: 16} if dy is not None else {0: 16, 5: 16}
        return main
    if lay[0] == "cols":
        _, rows, C = lay
        fargs = (C, x_dt, o_dt, dy_dt, ct, kcols.TX, kcols.TY, 4, shifted)
        grid = kcols.apply_grid(rows, C, kprim.sm_count())
        return Step("norm_bn_cols_apply:" + src_key(fargs), lambda: kcols.apply_kernel(*fargs)[0], grid,
                    (kcols.TX, kcols.TY), ins + e + [Arg.tensor(out), Arg.const(rows)], nbytes=nbytes)
    _, n, C, hw, sn = lay
    T = kplanes.threads_for(hw)
    per_plane = kplanes.apply_grid(hw, T)
    gx, order = n * C, None
    if var:      # reverse plane order: the planes the statistics pass read last first
        gx, (chunks, per) = kplanes.reverse_grid(n, C, kprim.sm_count())
        order = (n, chunks, per)
    fargs = (C, hw, sn, T, x_dt, o_dt, dy_dt, ct, 4, shifted, order)
    return Step("norm_bn_planes_apply:" + src_key(fargs), lambda: kplanes.apply_kernel(*fargs)[0],
                (gx, per_plane), T, ins + e + [Arg.tensor(out), Arg.const(-(-hw // per_plane))], nbytes=nbytes)
