"""One specialised block kernel with its split-K companions, and the launch sequence they share.

GEMM and the convolutions build a :class:`BlockKernels` from their operands / output / epilogue and
call :func:`launch` with their argument tuples; split-K (workspace + reduce, or prescale + atomics)
is handled here once.

``sum_batch=True`` (a reduction over the batch too, e.g. an NCHW 1x1 weight gradient summed over
images): every (batch, split) block writes raw partials to the workspace, even at SPLIT_K = 1, and
the reduce sums all ``batch * SPLIT_K`` slices in a fixed order into one output (batch index 0).
"""
import numpy as np

from . import splitk
from .config import check
from .fastloop import fast_ok, make_fast_kernel
from .mainloop import make_block_kernel
from .operands import strided_output
from ..pointwise import epilogue as ep


def fast_applies(cfg, A, B, ftype):
    """Whether ``cfg`` runs on the fast mainloop: MAINLOOP="fast" over strided fp32 A and B with fp32
    accumulation (anything else uses the generic mainloop with the same tiles)."""
    return (cfg.MAINLOOP == "fast" and ftype == "float32"
            and all(op.key[0] == "strided" and op.key[2] == "float32" for op in (A, B)))


def _block_kernel(cfg, A, B, OUT, EPI, ftype):
    """(kernel, fallback): the fast kernel and the generic kernel of the same tile (without the fast
    config's register cap) for launches the fast kernel cannot take (fastloop.fast_ok); or
    (generic kernel, None)."""
    if fast_applies(cfg, A, B, ftype):
        generic = make_block_kernel(cfg.replace(MAINLOOP="generic", MAX_REGS=0), A, B, OUT, EPI, ftype)
        return make_fast_kernel(cfg, A, B, OUT, EPI), generic
    return make_block_kernel(cfg, A, B, OUT, EPI, ftype), None


class BlockKernels:
    def __init__(self, cfg, A, B, OUT, spec, bias_dtype, res_dtype, sum_batch=False):
        ok, why = check(cfg, 8 if spec.ftype == "float64" else 4)
        if not ok:
            raise ValueError(f"bad config {cfg}: {why}")
        if sum_batch and cfg.SPLIT_K > 1 and cfg.SPLIT_MODE == "atomic":
            raise ValueError("sum_batch needs workspace split-K (deterministic partials)")
        self.cfg, self.spec, self.ftype = cfg, spec, spec.ftype
        self.sum_batch = bool(sum_batch)
        self.EPI = ep.build(spec, bias_dtype, res_dtype)
        self.split = cfg.SPLIT_K > 1 or self.sum_batch
        self.atomic = self.split and cfg.SPLIT_MODE == "atomic"
        # the main kernel stages its accumulators through local memory when its epilogue is big
        # (see mainloop.py): that many bytes of stack are expected, the mainloop stays in registers
        staged = not self.split and self.EPI.STAGE
        item = 8 if self.ftype == "float64" else 4
        self.local_bytes = (item * cfg.THREAD_M * cfg.THREAD_N + 16 * (cfg.THREAD_M + cfg.THREAD_N)
                            if staged else 0)
        if self.atomic:
            if not spec.linear or spec.out_dtype not in ("float32", "float64"):
                raise ValueError("atomic split-K needs an alpha/beta-only epilogue and fp32/fp64 output")
            self.kernel, self.fallback = _block_kernel(cfg, A, B, OUT, ep.atomic(), self.ftype)
            self.prescale = splitk.make_prescale(OUT, self.ftype)
        elif self.split:
            # partials go to a plain [batch*SPLITS, M, N] workspace, whatever the real output is
            self.kernel, self.fallback = _block_kernel(cfg, A, B, strided_output(), ep.raw(self.ftype), self.ftype)
            self.reduce = splitk.make_reduce(OUT, self.EPI, self.ftype)
            self.reduce_wide = splitk.make_reduce_wide(OUT, self.EPI, self.ftype)
        else:
            self.kernel, self.fallback = _block_kernel(cfg, A, B, OUT, self.EPI, self.ftype)
        self.A, self.B = A, B

    @property
    def deterministic(self):
        return not self.atomic

    def uses_fallback(self, M, N, K, a_args, b_args):
        """Whether a launch over these operands must run :attr:`fallback` (the generic mainloop)
        instead of the fast :attr:`kernel`."""
        return self.fallback is not None and not fast_ok(self.cfg, self.A, self.B, M, N, K, a_args, b_args)

    def workspace_elems(self, M, N, batch):
        if not self.split or self.atomic:
            return 0
        return batch * self.cfg.SPLIT_K * M * N

    def reduce_shape(self, nb):
        """(slices summed per output, output batch) of the split-K reduce over a batch of ``nb``."""
        return (nb * self.cfg.SPLIT_K, 1) if self.sum_batch else (self.cfg.SPLIT_K, nb)


def kernel_args(bk, M, N, K, nb, a_args, b_args, o_args, bias_args, r_args, alpha, beta,
                workspace=None):
    """The block kernel's argument tuple (the workspace replaces the output for split-K partials)."""
    cfg = bk.cfg
    f = splitk.f(bk.ftype)
    splits = cfg.SPLIT_K
    kslice = splitk.k_slice(K, splits, cfg.BLOCK_K) if splits > 1 else K
    out = splitk.workspace_args(workspace, M, N) if bk.split and not bk.atomic else o_args
    return (a_args, b_args, out, bias_args, r_args, int(M), int(N), int(K), int(kslice), int(splits),
            f(alpha), f(beta))


def signature(args):
    """numba signature text of a kernel taking ``args`` (arrays must be 1-D C-contiguous), in the
    form ``cuda.compile_ptx`` and the compile-check registry parse."""
    from numba import typeof, types

    def fmt(t):
        if isinstance(t, types.Array):
            if t.ndim != 1:
                raise ValueError("kernel arrays are 1-D")
            return f"{t.dtype}[::1]"
        if isinstance(t, types.UniTuple):
            return f"UniTuple({fmt(t.dtype)}, {t.count})"
        if isinstance(t, types.BaseTuple):
            return "Tuple((" + ", ".join(fmt(x) for x in t.types) + ",))"
        return str(t)
    return "void(" + ", ".join(fmt(typeof(a)) for a in args) + ")"


def launch(bk, M, N, K, nb, a_args, b_args, o_args, bias_args, r_args, alpha, beta, workspace,
           stream):
    """Launch ``bk`` over a (nb, M, N, K) problem; ``workspace``: ``ftype`` array for split-K."""
    cfg = bk.cfg
    f = splitk.f(bk.ftype)
    splits = cfg.SPLIT_K
    grid = (-(-N // cfg.BLOCK_N), -(-M // cfg.BLOCK_M), nb * splits)
    if grid[1] > 65535 or grid[2] > 65535:
        raise ValueError(f"grid {grid} too large")
    if bk.split and not bk.atomic:
        need = bk.workspace_elems(M, N, nb)
        if workspace is None or workspace.shape[0] < need or workspace.dtype != np.dtype(bk.ftype):
            raise ValueError(f"split-K needs a {bk.ftype} workspace of {need} elements")
    args = kernel_args(bk, M, N, K, nb, a_args, b_args, o_args, bias_args, r_args, alpha, beta,
                       workspace)
    if bk.atomic:
        splitk.launch_1d(bk.prescale, nb * M * N, stream, o_args, nb, M, N, f(beta))
    kernel = bk.fallback if bk.uses_fallback(M, N, K, a_args, b_args) else bk.kernel
    kernel[grid, cfg.num_threads, stream](*args)
    if bk.split and not bk.atomic:
        slices, out_nb = bk.reduce_shape(nb)
        args = (workspace, slices, o_args, bias_args, r_args, out_nb, M, N, f(alpha), f(beta))
        if slices >= splitk.WIDE_FROM:
            blocks, threads = splitk.wide_grid(out_nb * M * N)
            bk.reduce_wide[blocks, threads, stream](*args)
        else:
            splitk.launch_1d(bk.reduce, out_nb * M * N, stream, *args)
