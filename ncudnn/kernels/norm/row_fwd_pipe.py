"""Layer / RMS norm forward, float32 rows of n <= 1024 elements (n % 128 == 0): a persistent grid of
warps, each streaming whole rows through a per-lane ``cp.async`` ring in shared memory.

Geometry: a grid of G blocks (SMs x blocks an SM: :func:`pipe_geometry`) of ``W`` warps. Warp ``w`` of
block ``b`` is global warp ``gw = w * G + b`` (so the last partial round of rows is spread over every
block) and takes rows ``gw, gw + G W, gw + 2 G W, ...``. Lane ``l`` owns the 16-byte vectors ``l, l + 32,
...`` of a row (``VPT = n / 128`` of them): each warp access is 512 contiguous bytes.

Pipeline (``S`` stages, one row each, per warp): the prologue issues the warp's first ``S`` rows as ``S``
commit groups of ``cp.async.cg`` 16-byte copies into the warp's ring ``[S][n]``; each iteration waits
for the oldest group (``cp.async.wait_group S-1``), reads the row's vectors from its slot into
registers, sums them per lane, then issues the copy of the row ``S`` rounds ahead into the same slot
(an empty commit group past the last row keeps the group count uniform). Every lane copies exactly the
chunks it reads itself, so the data needs no barrier (cp.async completion is per thread). Then the
warp-shuffle reductions and 16-byte stores of y (``cs``: ``st.global.cs``), lane 0 writing the
statistics.

Statistics (``stats``, layer norm):

- ``"shift"`` one pass of sums shifted by the row's first element (lane 0's, by a shuffle):
  sum e, sum e^2 with e = x - x[0]; var = E[e^2] - E[e]^2;
- ``"two"`` two passes in registers: the mean, then sum (x - mean)^2 (two shuffle reductions in series);
- ``"chan"`` each lane's own mean and sum of squared deviations, combined over the lanes by
  shuffles (Chan et al.'s pairwise update with equal counts).

RMS norm (``center`` False) is one reduction of sum x^2.

Scale / bias (``params``): ``"smem"`` copied once a block (``cp.async``, one more commit group before
the rows, one barrier) into the first ``n`` (``2 n``) floats of shared memory and read there each row;
``"regs"`` loaded once into registers (VPT x 4 floats each a lane).

``hint``: an L2 eviction policy (:data:`ncudnn.kernels.primitives.l2hint.POLICIES`, e.g. ``"evict_first"``) on x's copies
(:func:`ncudnn.kernels.primitives.l2hint.cp16_l2`) and, with ``hint_y`` (the default), y's stores. Evict-first y stores make
the kernel alone faster after an L2 flush but leave less of y in the L2 for the next kernel reading it (on the
H200 a torch.sum of y right after took longer): ``hint_y=False`` keeps y's stores plain.

A version fetching each row with one bulk (TMA) copy completed by an mbarrier was tried and stalled the H200, so
it was removed.

Used by engine "norm_rows" as forward KERNEL_CFG 20..29 (:mod:`ncudnn.engines.norm.rows_pipe`; 28, 4 warps x 4
stages x 3 blocks an SM, scale / bias in shared memory, x's copies evict-first, y's stores plain: the default for
FP32 rows of 512..1024). On the H200 at 8192 x 1024 it beats cuDNN in every round of an interleaved sweep
(experiments/probe_norm_sweep.py), at the speed of a torch copy of the same bytes, and still does without the L2
policy, by less (figures: dev/perf_notes.md, "Layer / RMS norm rows").

Dynamic shared memory: :func:`pipe_shared_bytes`; above 48 KB it needs the opt-in attribute
(:meth:`ncudnn.kernels.runtime.launch.CompiledKernel.prepare` sets it).
"""
import functools

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import dtype_name, loader
from ..primitives.l2hint import POLICIES, cp16_l2, st4_l2
from ..primitives.cshint import st4cs
from ..primitives.warp import shfl_idx, shfl_xor, warp_sum
from ...platform import simulator_enabled
from ..primitives.ptx import cp_async_cg_16, cp_async_commit, cp_async_wait_all, cp_async_wait_group
from ..primitives.vec import ld4, st4

__all__ = ["row_fwd_pipe_kernel", "pipe_shared_bytes", "pipe_geometry", "pipe_fits", "PIPE_STATS",
           "PIPE_PARAMS", "SMEM_PER_SM", "SMEM_PER_BLOCK", "SMEM_RESERVED"]

#: shared memory of an sm_90 SM, the most one block may take, and the driver's reserve a block
SMEM_PER_SM = 233472
SMEM_PER_BLOCK = 232448
SMEM_RESERVED = 1024
#: statistics methods (layer norm) and homes of scale / bias
PIPE_STATS = ("shift", "two", "chan")
PIPE_PARAMS = ("smem", "regs")
#: largest row the kernel takes (VPT = 8 vectors a lane)
N_MAX = 1024


def pipe_shared_bytes(n, warps, stages, has_bias=True, params="smem"):
    """Dynamic shared memory a block uses: the warps' rings (``warps * stages * n`` floats) plus scale
    (and bias) when ``params`` is ``"smem"``."""
    p = (2 if has_bias else 1) * n if params == "smem" else 0
    return 4 * (warps * stages * n + p)


def pipe_fits(n, warps, stages, bps, has_bias=True, params="smem"):
    """True when ``bps`` blocks of this configuration fit in one SM's shared memory (with the driver's
    1 KB reserve a block) and a block has at most 1024 threads."""
    s = pipe_shared_bytes(n, warps, stages, has_bias, params)
    return warps * 32 <= 1024 and s <= SMEM_PER_BLOCK and bps * (s + SMEM_RESERVED) <= SMEM_PER_SM


def pipe_geometry(n, warps, stages, bps, sms, has_bias=True, params="smem"):
    """(grid blocks, threads a block, dynamic shared bytes) of ``bps`` blocks on each of ``sms`` SMs."""
    return sms * bps, warps * 32, pipe_shared_bytes(n, warps, stages, has_bias, params)


def _tree(terms):
    """A balanced sum of the expression texts (shorter dependency chains than a running sum)."""
    terms = list(terms)
    while len(terms) > 1:
        nxt = [f"({terms[i]} + {terms[i + 1]})" for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


def _source(n, W, S, center, has_bias, write_stats, eps_array, stats, params, cs):
    vpt, nv, T = n // 128, n // 4, W * 32
    F = "float32"
    one, zero, inv_n = po.lit(1.0), po.lit(0.0), po.lit(1.0 / n)
    P = pipe_shared_bytes(n, W, 0, has_bias, params) // 4   # floats of scale / bias first, then the rings
    E = [f"v{k}_{j}" for k in range(vpt) for j in range(4)]      # this lane's elements of the row
    b = ["def kernel(x, scale, bias, y, s_mean, s_inv, eps_in, nrows):",
         f"buf = cuda.shared.array(0, {F})",
         "tid = cuda.threadIdx.x",
         "lane = tid % 32",
         "wid = tid // 32",
         "gw = wid * cuda.gridDim.x + cuda.blockIdx.x",
         f"step = cuda.gridDim.x * {W}",
         "eps = ld_eps(eps_in, 0)" if eps_array else f"eps = {F}(eps_in)",
         "xo = lane * 4",
         f"ring = {P} + wid * {S * n} + xo",
         f"rend = ring + {S * n}"]
    if params == "smem":     # scale (and bias) into shared memory: one commit group before the rows'
        for j in range(-(-nv // T)):
            o = f"(tid + {j * T}) * 4"
            cp = [f"cp_async_cg_16(buf, {o}, scale, {o})"]
            if has_bias:
                cp.append(f"cp_async_cg_16(buf, {n} + {o}, bias, {o})")
            if (j + 1) * T > nv:
                b.append(f"if tid < {nv - j * T}:")
                cp = ["    " + c for c in cp]
            b += cp
        b.append("cp_async_commit()")
    for s in range(S):       # prologue: the warp's first S rows, one commit group each
        b += [f"r = gw + {s} * step", "if r < nrows:", f"    src = r * {n} + xo"]
        b += [f"    cpx(buf, ring + {s * n + k * 128}, x, src + {k * 128})" for k in range(vpt)]
        b.append("cp_async_commit()")
    if params == "smem":
        b += [f"cp_async_wait_group({S})", "cuda.syncthreads()"]
    if params == "regs":
        for k in range(vpt):
            b.append(f"g{k}_0, g{k}_1, g{k}_2, g{k}_3 = ld4(scale, xo + {k * 128})")
            if has_bias:
                b.append(f"h{k}_0, h{k}_1, h{k}_2, h{k}_3 = ld4(bias, xo + {k * 128})")
    b += ["row = gw", f"nxt = gw + {S} * step", "slot = ring", "while row < nrows:"]
    L = [f"cp_async_wait_group({S - 1})"]
    L += [f"v{k}_0, v{k}_1, v{k}_2, v{k}_3 = ld4(buf, slot + {k * 128})" for k in range(vpt)]
    # per-lane partial sums first: they need every vector read, so the slot is free for the next copy
    if not center:
        L.append(f"s2 = {_tree(f'{e} * {e}' for e in E)}")
    elif stats == "shift":
        L.append("kk = shfl_idx(v0_0, 0)")
        L += [f"e{e} = {e} - kk" for e in E]
        L += [f"s1 = {_tree('e' + e for e in E)}", f"s2 = {_tree(f'e{e} * e{e}' for e in E)}"]
    elif stats == "two":
        L.append(f"s1 = {_tree(E)}")
    else:   # chan
        L.append(f"lm = {_tree(E)} * {po.lit(1.0 / (4 * vpt))}")
        L += [f"d{e} = {e} - lm" for e in E]
        L.append(f"m2 = {_tree(f'd{e} * d{e}' for e in E)}")
    L += ["if nxt < nrows:", f"    src = nxt * {n} + xo"]
    L += [f"    cpx(buf, slot + {k * 128}, x, src + {k * 128})" for k in range(vpt)]
    L.append("cp_async_commit()")
    if not center:
        L += [f"var = warp_sum(s2) * {inv_n}", f"mean = {zero}"]
        D = {e: e for e in E}
    elif stats == "shift":
        L += [f"m1 = warp_sum(s1) * {inv_n}", f"var = warp_sum(s2) * {inv_n} - m1 * m1",
              f"var = var if var > {zero} else {zero}", "mean = kk + m1"]
        D = {e: f"({e} - mean)" for e in E}
    elif stats == "two":
        L.append(f"mean = warp_sum(s1) * {inv_n}")
        L += [f"d{e} = {e} - mean" for e in E]
        L.append(f"var = warp_sum({_tree(f'd{e} * d{e}' for e in E)}) * {inv_n}")
        D = {e: f"d{e}" for e in E}
    else:
        c = 4 * vpt
        for off in (16, 8, 4, 2, 1):    # equal counts c: M2 = M2a + M2b + (ma - mb)^2 c / 2
            L += [f"om = shfl_xor(lm, {off})", f"o2 = shfl_xor(m2, {off})", "dm = om - lm",
                  f"m2 = (m2 + o2) + dm * dm * {po.lit(c / 2)}", f"lm = (lm + om) * {po.lit(0.5)}"]
            c *= 2
        L += ["mean = lm", f"var = m2 * {inv_n}"]
        D = {e: f"({e} - mean)" for e in E}
    L.append(f"inv = {one} / math.sqrt(var + eps)")
    if write_stats:
        L.append("if lane == 0:")
        if center:
            L.append("    s_mean[row] = mean")
        L.append("    s_inv[row] = inv")
    L.append(f"base = row * {n} + xo")
    for k in range(vpt):
        if params == "smem":
            L.append(f"g{k}_0, g{k}_1, g{k}_2, g{k}_3 = ld4(buf, xo + {k * 128})")
            if has_bias:
                L.append(f"h{k}_0, h{k}_1, h{k}_2, h{k}_3 = ld4(buf, xo + {n + k * 128})")
        vals = [f"{D[f'v{k}_{j}']} * inv * g{k}_{j}" + (f" + h{k}_{j}" if has_bias else "") for j in range(4)]
        L.append(f"sty(y, base + {k * 128}, {', '.join(vals)})")
    L += ["row += step", "nxt += step", f"slot += {n}", "if slot == rend:", "    slot = ring"]
    b += ["    " + ln for ln in L]
    b.append("cp_async_wait_all()")
    return "\n".join(b[:1] + ["    " + ln for ln in b[1:]]) + "\n"


@functools.lru_cache(maxsize=None)
def row_fwd_pipe_kernel(n, warps, stages, center, has_bias, write_stats, x_dt="float32", p_dt="float32",
                        y_dt="float32", s_dt="float32", eps_dt=None, stats="shift", params="smem", cs=False,
                        bps=None, hint=None, hint_y=True):
    """The kernel of the module docstring: arguments ``(x, scale, bias, y, s_mean, s_inv, eps, nrows)`` as
    :func:`ncudnn.kernels.norm.row_fwd_sub.row_fwd_sub_kernel`'s (x / y rows of ``n`` float32, flat; eps a float, or a
    1-element array when ``eps_dt`` is given). Launch: grid any number of blocks (persistent: SMs x
    ``bps``), ``warps * 32`` threads, :func:`pipe_shared_bytes` dynamic shared memory. ``bps`` (blocks an
    SM the launch targets) caps the registers at 65536 / (threads * bps) on a GPU.
    ``stats`` / ``params`` / ``cs`` / ``hint`` / ``hint_y``: the module docstring's options. Needs n % 128 == 0,
    n <= 1024, float32 x / scale / bias / y / statistics (other dtypes raise ValueError), every buffer 16-byte
    aligned. Returns (dispatcher, source)."""
    if n % 128 or not 0 < n <= N_MAX:
        raise ValueError(f"norm_row_fwd_pipe: rows of {n} elements (needs n % 128 == 0 and n <= {N_MAX})")
    for what, dt in (("x", x_dt), ("scale / bias", p_dt), ("y", y_dt), ("statistics", s_dt)):
        if dtype_name(dt) != "float32":
            raise ValueError(f"norm_row_fwd_pipe: {what} of {dtype_name(dt)} (float32 only)")
    if not 1 <= warps <= 32 or stages < 2:
        raise ValueError(f"norm_row_fwd_pipe: {warps} warps, {stages} stages (1..32 warps, >= 2 stages)")
    if stats not in PIPE_STATS or params not in PIPE_PARAMS:
        raise ValueError(f"norm_row_fwd_pipe: stats {stats!r} (one of {PIPE_STATS}), params {params!r} "
                         f"(one of {PIPE_PARAMS})")
    if hint is not None and (hint not in POLICIES or cs):
        raise ValueError(f"norm_row_fwd_pipe: L2 policy {hint!r} (one of {POLICIES}; not with .cs stores)")
    smem = pipe_shared_bytes(n, warps, stages, has_bias, params)
    if smem > SMEM_PER_BLOCK:
        raise ValueError(f"norm_row_fwd_pipe: {smem} bytes of shared memory a block > {SMEM_PER_BLOCK}")
    src = _source(n, warps, stages, center, has_bias, write_stats, eps_dt is not None, stats, params, cs)
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, warp_sum=warp_sum, shfl_idx=shfl_idx,
              shfl_xor=shfl_xor, ld4=ld4, st4=st4, st4cs=st4cs, cp_async_cg_16=cp_async_cg_16,
              cp_async_commit=cp_async_commit, cp_async_wait_group=cp_async_wait_group,
              cp_async_wait_all=cp_async_wait_all, ld_eps=loader(eps_dt or "float32"),
              cpx=cp16_l2(hint) if hint else cp_async_cg_16,
              sty=st4_l2(hint) if hint and hint_y else st4cs if cs else st4)
    exec(compile(src, "<norm row-fwd-pipe>", "exec"), ns)
    opts = {}
    if bps and not simulator_enabled():
        opts["max_registers"] = min(255, (65536 // (warps * 32 * bps)) // 8 * 8)
    return cuda.jit(ns["kernel"], **opts), src


def signature(eps_array=False):
    """numba signature text of the kernel (float32 arrays; eps by value or as a 1-element array)."""
    f = "float32[::1]"
    return f"void({f}, {f}, {f}, {f}, {f}, {f}, {f if eps_array else 'float64'}, int64)"


#: (n, warps, stages, bps, center, has_bias, stats, params, cs, L2 policy, policy on y's stores too) the sm_90
#: compile check holds to 65536 / (threads * bps) registers with no spills (8 warps at 3 blocks an SM, 80
#: registers, spill a few bytes with layer norm: those run at 2 blocks an SM here; registered by cases.py)
COMPILE_CASES = ((1024, 8, 2, 2, True, True, "shift", "smem", False, None, True),
                 (1024, 4, 4, 3, True, True, "two", "smem", True, None, True),
                 (1024, 4, 3, 4, True, True, "chan", "smem", False, None, True),
                 (1024, 4, 4, 3, True, True, "shift", "regs", False, None, True),
                 (1024, 8, 2, 3, False, False, "shift", "smem", False, None, True),
                 (512, 8, 4, 3, True, True, "shift", "smem", False, None, True),
                 (1024, 4, 4, 3, True, True, "shift", "smem", False, "evict_first", True),
                 (1024, 4, 4, 3, True, True, "shift", "regs", False, "evict_first", True),
                 (1024, 4, 4, 3, False, False, "shift", "regs", False, "evict_first", True),
                 # the engine's default (KERNEL_CFG 28: x's copies evict-first, y's stores plain)
                 (1024, 4, 4, 3, True, True, "shift", "smem", False, "evict_first", False),
                 (1024, 4, 4, 3, False, False, "shift", "smem", False, "evict_first", False),
                 (512, 4, 4, 3, True, True, "shift", "smem", False, "evict_first", False))
