"""Batched strided GEMM: ``C[z] = epilogue(alpha * A[z] @ B[z] + beta * C[z])``.

``make_gemm(cfg, a_layout, b_layout, dtypes, epilogue)`` builds (and caches) a :class:`GemmKernel`;
``run_gemm(kernel, a, b, c, ...)`` checks the problem, then launches it (plus the split-K reduce or
prescale kernel) on a stream. Arrays are flat 1-D numba device arrays (any dtype the kernel was built
for); shapes and element strides are given explicitly, so transposes, views and broadcast batches
(stride 0) need no copies.

Layouts name the contiguous index last: A "mk" (k contiguous) or "km" (m contiguous, or any
strides); B "kn" (n contiguous, or any strides) or "nk" (k contiguous).
"""
from numba import cuda
import numpy as np

from .config import GemmConfig
from .launch import BlockKernels, launch
from .operands import strided_operand, strided_output
from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep

_KERNELS = {}
_DUMMY = {}

A_LAYOUTS = {"mk": "k", "km": "outer"}
B_LAYOUTS = {"nk": "k", "kn": "outer"}


class GemmKernel:
    """A specialised GEMM: layouts, dtypes, epilogue and its :class:`BlockKernels`."""

    def __init__(self, cfg, a_layout, b_layout, dtypes, spec, sum_batch=False):
        if a_layout not in A_LAYOUTS or b_layout not in B_LAYOUTS:
            raise ValueError(f"layouts: A in {sorted(A_LAYOUTS)}, B in {sorted(B_LAYOUTS)}")
        self.cfg, self.a_layout, self.b_layout = cfg, a_layout, b_layout
        self.dtypes = tuple(dtypes)
        a_dt, b_dt, c_dt = self.dtypes[:3]
        self.ftype = dt.compute_type(self.dtypes[:3])
        self.spec = ep.EpilogueSpec(spec.steps, out_dtype=c_dt, ftype=self.ftype)
        bias_dt = self.dtypes[3] if len(self.dtypes) > 3 else c_dt
        res_dt = self.dtypes[4] if len(self.dtypes) > 4 else c_dt
        self.A = strided_operand(A_LAYOUTS[a_layout], a_dt, self.ftype)
        self.B = strided_operand(B_LAYOUTS[b_layout], b_dt, self.ftype)
        self.OUT = strided_output()
        self.sum_batch = sum_batch
        self.bk = BlockKernels(cfg, self.A, self.B, self.OUT, self.spec, bias_dt, res_dt, sum_batch)
        self.kernel = self.bk.kernel
        self.split = self.bk.split

    @property
    def deterministic(self):
        return self.bk.deterministic

    def workspace_size(self, M, N, batch=1):
        """Bytes of workspace ``run_gemm`` needs (exact; 0 unless workspace split-K)."""
        return self.bk.workspace_elems(M, N, _batch(batch)[2]) * np.dtype(self.ftype).itemsize


def make_gemm(cfg=GemmConfig(), a_layout="mk", b_layout="kn", dtypes=("float32",) * 3,
              epilogue=ep.EpilogueSpec(), sum_batch=False):
    """The cached :class:`GemmKernel` for these compile-time choices.

    ``dtypes``: (a, b, c[, bias[, residual]]) storage dtype names; fp32 accumulation unless all of
    a, b, c are float64 (then fp64 accumulation and epilogue). ``sum_batch``: C = sum over the batch
    of A[z] @ B[z] (one output; workspace partials per batch and split, see launch.py).
    """
    dtypes = tuple(dt.dtype_name(d) for d in dtypes)
    key = (cfg, a_layout, b_layout, dtypes, epilogue) + ((True,) if sum_batch else ())
    if key not in _KERNELS:
        _KERNELS[key] = GemmKernel(cfg, a_layout, b_layout, dtypes, epilogue, sum_batch)
    return _KERNELS[key]


def _batch(batch):
    b1, b2 = (batch, 1) if np.isscalar(batch) else tuple(batch)
    return int(b1), int(b2), int(b1) * int(b2)


def _strides(s):
    s = tuple(int(x) for x in s)
    if len(s) == 2:
        return (0, 0) + s
    if len(s) == 3:
        return (s[0], 0) + s[1:]
    if len(s) == 4:
        return s
    raise ValueError("strides: (row, col), (batch, row, col) or (batch1, batch2, row, col)")


def _extent(b1, b2, rows, cols, s):
    return (b1 - 1) * abs(s[0]) + (b2 - 1) * abs(s[1]) + (rows - 1) * abs(s[2]) + (cols - 1) * abs(s[3]) + 1


def dummy(dtype):
    """A 1-element device array standing in for an absent bias / residual."""
    if dtype not in _DUMMY:
        _DUMMY[dtype] = cuda.to_device(np.zeros(1, dtype=dt.storage_dtype(dtype)))
    return _DUMMY[dtype]


def run_gemm(kern, a, b, c, *, M, N, K, a_strides, b_strides, c_strides, batch=1, alpha=1.0,
             beta=0.0, bias=None, bias_strides=(0, 1), residual=None, residual_strides=None,
             workspace=None, stream=0):
    """Check, then launch ``kern`` on ``stream``. Strides are in elements: (row, col),
    (batch, row, col) or (batch1, batch2, row, col) for a (B1, B2) ``batch``; rows/cols of A are
    (m, k), of B (k, n), of C / residual (m, n). ``bias_strides = (s_batch, s_index)``."""
    packed = gemm_args(kern, a, b, c, M=M, N=N, K=K, a_strides=a_strides, b_strides=b_strides,
                       c_strides=c_strides, batch=batch, bias=bias, bias_strides=bias_strides,
                       residual=residual, residual_strides=residual_strides)
    launch(kern.bk, *packed, alpha, beta, workspace, stream)


def gemm_args(kern, a, b, c, *, M, N, K, a_strides, b_strides, c_strides, batch=1, bias=None,
              bias_strides=(0, 1), residual=None, residual_strides=None):
    """Checked (M, N, K, nb, a_args, b_args, o_args, bias_args, r_args) for :func:`launch`."""
    b1, b2, nb = _batch(batch)
    sa, sb, sc = _strides(a_strides), _strides(b_strides), _strides(c_strides)
    if min(M, N, K, nb) <= 0:
        raise ValueError("M, N, K and batch must be positive")
    if kern.a_layout == "mk" and sa[3] != 1:
        raise ValueError("A layout 'mk' needs unit k stride")
    if kern.b_layout == "nk" and sb[2] != 1:
        raise ValueError("B layout 'nk' needs unit k stride")
    for name, arr, rows, cols, s in (("A", a, M, K, sa), ("B", b, K, N, sb), ("C", c, M, N, sc)):
        if arr.ndim != 1:
            raise ValueError(f"{name} must be a flat 1-D array")
        if _extent(b1, b2, rows, cols, s) > arr.shape[0]:
            raise ValueError(f"{name} strides reach past its {arr.shape[0]} elements")
    a_args = (a, sa[0], sa[1], b2, sa[2], sa[3])
    b_args = (b, sb[0], sb[1], b2, sb[3], sb[2])     # outer index of B is n
    o_args = (c, sc[0], sc[1], b2, sc[2], sc[3])
    if kern.spec.bias_axis and bias is None:
        raise ValueError("epilogue has a bias step: pass bias")
    if kern.spec.has_residual and residual is None:
        raise ValueError("epilogue has a residual step: pass residual")
    bias_args = (bias if bias is not None else dummy(kern.dtypes[2]), int(bias_strides[0]),
                 int(bias_strides[1]))   # bias offset: z * s_batch + index * s_index (z flattened)
    if residual is not None:
        sr = _strides(residual_strides if residual_strides is not None else c_strides)
        if _extent(b1, b2, M, N, sr) > residual.shape[0]:
            raise ValueError("residual strides reach past its end")
        r_args = (residual, sr[0], sr[1], b2, sr[2], sr[3])
    else:
        r_args = (dummy(kern.dtypes[2]), 0, 0, 1, 0, 0)
    return M, N, K, nb, a_args, b_args, o_args, bias_args, r_args
