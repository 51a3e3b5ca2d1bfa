"""The narrow split-K reduce (kernels/gemm/splitk.make_reduce: one thread an output, slice loads issued
four at a time) sums the slices in their fixed order: bitwise equal to a sequential float32 sum of slices
0, 1, ..., S-1 for slice counts on and off the four-slice step, over a batch, with alpha / beta applied
(beta reads the poisoned-free prior output; the float64 oracle checks the whole result too)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.gemm import splitk
from ncudnn.kernels.gemm.operands import strided_output
from ncudnn.testing import assert_close, poison_value


@pytest.mark.parametrize("slices,batch,beta", [(4, 1, 0.0), (7, 2, 0.0), (3, 1, 0.5), (5, 1, 0.0)])
def test_skinny_reduce_fixed_order(rng, slices, batch, beta):
    M, N = 3, 5
    bk = ep.build(ep.EpilogueSpec(), "float32", "float32")
    kern = splitk.make_reduce(strided_output(), bk)
    parts = rng.uniform(-1, 1, (batch, slices, M, N)).astype(np.float32)
    parts *= np.float32(1e3) ** rng.integers(0, 3, parts.shape)     # magnitudes apart: order shows
    prior = rng.uniform(-1, 1, (batch, M, N)).astype(np.float32)
    out = cuda.to_device(prior.ravel().copy() if beta else np.full(batch * M * N, poison_value(np.float32),
                                                                    np.float32))
    o_args = (out, M * N, 0, 1, N, 1)
    dummy = cuda.to_device(np.zeros(1, np.float32))
    alpha = np.float32(0.75)
    splitk.launch_1d(kern, batch * M * N, 0, cuda.to_device(parts.ravel()), slices, o_args, (dummy, 0, 0),
                     (dummy, 0, 0, 1, 0, 0), batch, M, N, alpha, np.float32(beta))
    got = out.copy_to_host().reshape(batch, M, N)
    seq = np.zeros((batch, M, N), np.float32)
    for s in range(slices):
        seq = seq + parts[:, s]
    want32 = alpha * seq + (np.float32(beta) * prior if beta else np.float32(0))
    if not beta:
        assert np.array_equal(got, alpha * seq)
    assert_close(got, 0.75 * parts.astype(np.float64).sum(axis=1) + beta * prior.astype(np.float64), "float32")
    assert np.allclose(got, want32, rtol=1e-6, atol=1e-6 * np.abs(seq).max())
