"""Kernel arguments and launches of the GEMM-family engines: flat 1-D buffers as kernel arguments and their
numba types, :class:`BlockLaunch` (a :class:`~ncudnn.kernels.gemm.launch.BlockKernels` compiled through the
kernel cache, with its split-K reduce or prescale, prepared as ``cuLaunchKernel`` launches) and the
stable kernel-cache key text.
"""
import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support

from ...kernels.gemm import splitk
from ...kernels.gemm.launch import kernel_args
from ...kernels.runtime import dtypes as kdt
from ...kernels.runtime import kcache
from .dtypes import kdtype

__all__ = ["Flat", "flat", "typing_flat", "argtypes", "BlockLaunch", "runner", "key_text", "bytes_of"]

class Flat:
    """A flat 1-D buffer as a kernel argument (what kernels/runtime/launch.as_arg_view reads)."""

    __slots__ = ("ptr", "shape", "strides_bytes", "itemsize", "dtype", "ndim")

    def __init__(self, ptr, n, dtype):
        self.dtype = np.dtype(dtype)
        self.ptr, self.shape, self.ndim = int(ptr), (max(int(n), 1),), 1
        self.itemsize = self.dtype.itemsize
        self.strides_bytes = (self.itemsize,)


def flat(view, t):
    """The DeviceView ``view`` of tensor ``t`` as a Flat of its storage dtype, spanning its elements."""
    return Flat(view.ptr, t.span_elements(), kdt.storage_dtype(kdtype(t)))


def typing_flat(t_or_name, n=1):
    """A Flat with no memory behind it: only its type matters (signatures at build time)."""
    name = t_or_name if isinstance(t_or_name, str) else kdtype(t_or_name)
    return Flat(0, n, kdt.storage_dtype(name))


def argtypes(args):
    """numba types of kernel arguments (arrays are 1-D C-contiguous storage arrays)."""
    def ty(a):
        if isinstance(a, tuple):
            return types.Tuple([ty(x) for x in a])
        if isinstance(a, (bool, np.bool_)):
            return types.boolean
        if isinstance(a, (int, np.integer)) and not isinstance(a, np.generic):
            return types.int64
        if isinstance(a, np.generic):
            return numpy_support.from_dtype(a.dtype)
        if isinstance(a, float):
            return types.float64
        return types.Array(numpy_support.from_dtype(np.dtype(a.dtype)), 1, "C")
    return tuple(ty(a) for a in args)


class BlockLaunch:
    """A BlockKernels compiled through the kernel cache; :meth:`launches` prepares its launch sequence.
    The split-K reduce sums ``bk.reduce_shape(nb)`` slices (the batch's too with ``bk.sum_batch``):
    from ``splitk.WIDE_FROM`` slices, or with N % 4 == 0, through the wide reduce (``splitk.make_reduce_wide``:
    4 outputs a thread, 16-byte loads, 8 slices' loads in flight, stores transposed through shared memory;
    ``splitk.wide_grid`` picks its layout); otherwise one thread per output (same sums: slices in order).
    The wide reduce is the faster one from 2 slices on the H200 (dev/perf_notes.md, "SIMT GEMM")."""

    def __init__(self, key, bk, typing_packed):
        self.bk, self.cfg = bk, bk.cfg
        self.f = splitk.f(bk.ftype)
        ws = Flat(0, 1, bk.ftype) if bk.split and not bk.atomic else None
        args = kernel_args(bk, *typing_packed, 1.0, 0.0, ws)
        self.main = kcache.get_or_compile(key + "|main", lambda: bk.kernel, argtypes(args))
        self._key, self._types, self._fallback = key, argtypes(args), None
        M, N, K_, nb, a_args, b_args, o_args, bias_args, r_args = typing_packed
        self.reduce = self.prescale = self.wide = None
        f = self.f
        if bk.split and not bk.atomic:
            self._reduce_types = argtypes((ws, 1, o_args, bias_args, r_args, 1, 1, 1, f(1), f(0)))
            self.reduce = kcache.get_or_compile(key + "|reduce", lambda: bk.reduce, self._reduce_types)
            if bk.reduce_shape(nb)[0] >= splitk.WIDE_FROM:
                self._wide()
        elif bk.atomic:
            self.prescale = kcache.get_or_compile(key + "|prescale", lambda: bk.prescale,
                                                  argtypes((o_args, 1, 1, 1, f(0))))

    def _wide(self):
        if self.wide is None:
            bk = self.bk
            self.wide = kcache.get_or_compile(self._key + "|reduce_wide", lambda: bk.reduce_wide, self._reduce_types)
        return self.wide

    def launches(self, packed, alpha, beta, scratch):
        """PreparedLaunches of one run over ``packed`` (the kernels' pack output) with ``scratch``
        (a uint8 DeviceView holding the split-K partials, or None)."""
        bk, cfg, f = self.bk, self.cfg, self.f
        M, N, K_, nb, a_args, b_args, o_args, bias_args, r_args = packed
        ws = None
        if bk.split and not bk.atomic:
            item = np.dtype(bk.ftype).itemsize
            ws = Flat(scratch.ptr, scratch.nbytes // item, bk.ftype)
        args = kernel_args(bk, *packed, alpha, beta, ws)
        main = self.main
        if bk.uses_fallback(M, N, K_, a_args, b_args):     # fast mainloop's alignment not met
            if self._fallback is None:
                self._fallback = kcache.get_or_compile(self._key + "|main_generic", lambda: bk.fallback, self._types)
            main = self._fallback
        grid = (-(-N // cfg.BLOCK_N), -(-M // cfg.BLOCK_M), nb * cfg.SPLIT_K)
        out = []
        if self.prescale is not None:
            total = nb * M * N
            blocks = max(1, -(-total // splitk.REDUCE_THREADS))
            out.append(self.prescale.prepare(blocks, splitk.REDUCE_THREADS, (o_args, nb, M, N, f(beta))))
        out.append(main.prepare(grid, cfg.num_threads, args))
        if self.reduce is not None:
            slices, out_nb = bk.reduce_shape(nb)
            total = out_nb * M * N
            r_args_ = (ws, slices, o_args, bias_args, r_args, out_nb, M, N, f(alpha), f(beta))
            if slices >= splitk.WIDE_FROM or N % 4 == 0:   # the wide reduce's 16-byte path: faster from 2 slices
                out.append(self._wide().prepare(*splitk.wide_grid(total, splits=slices), r_args_))
            else:
                out.append(self.reduce.prepare(max(1, -(-total // splitk.REDUCE_THREADS)), splitk.REDUCE_THREADS,
                                               r_args_))
        return out


def runner(launches):
    """``run(stream)`` over prepared launches (one cuLaunchKernel each)."""
    if len(launches) == 1:
        one = launches[0].run
        return lambda stream: one(None, stream)

    def run(stream):
        for p in launches:
            p.run(None, stream)
    return run


def key_text(*parts):
    """A stable kernel-cache spec key from frozen dataclasses / tuples / strings."""
    return "|".join(str(p) for p in parts)


def bytes_of(name):
    return np.dtype(kdt.storage_dtype(name)).itemsize
