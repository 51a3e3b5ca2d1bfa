"""The split-K reduces (narrow: one thread per output; wide: 32 outputs x 16 slice rows a block) end in
one shared epilogue store (splitk.make_store): column bias, a residual add and alpha / beta through
both, against the float64 oracle with a poisoned output."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.gemm import GemmConfig, make_gemm, run_gemm, splitk
from ncudnn.testing import assert_close, poison_value

SMALL = GemmConfig(BLOCK_M=8, BLOCK_N=8, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0, UNROLL_K=1)


@pytest.mark.parametrize("split", [2, 8])
def test_dup_splitk_store_bias_residual(rng, split):
    M, N, K = 6, 10, 40
    spec = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))
    kern = make_gemm(SMALL.replace(SPLIT_K=split), "mk", "kn", epilogue=spec)
    assert kern.bk.reduce_shape(1) == (split, 1) and (split >= splitk.WIDE_FROM) == (split == 8)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    res = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    c = cuda.to_device(np.full(M * N, poison_value(np.float32), np.float32))
    ws = cuda.to_device(np.full(kern.bk.workspace_elems(M, N, 1), np.nan, np.float32))
    run_gemm(kern, cuda.to_device(a.ravel()), cuda.to_device(b.ravel()), c, M=M, N=N, K=K,
             a_strides=(K, 1), b_strides=(N, 1), c_strides=(N, 1), alpha=0.75, bias=cuda.to_device(bias),
             residual=cuda.to_device(res.ravel()), workspace=ws)
    want = np.maximum(0.75 * (a.astype(np.float64) @ b) + bias + res, 0)
    assert_close(c.copy_to_host().reshape(M, N), want, "float32")
