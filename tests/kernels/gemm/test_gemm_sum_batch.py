"""GEMM ``sum_batch``: C = alpha * sum_z A[z] @ B[z] + beta * C through the split-K workspace (narrow and
wide reduce), on the fast mainloop (k-fast operands, the NCHW 1x1 wgrad shape) and the generic one;
simulator, float64 oracle, poisoned workspace."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.gemm import make_gemm, run_gemm, splitk
from ncudnn.kernels.gemm.config import FAST_SMALL, GemmConfig
from ncudnn.testing import assert_close, poison_value

GENERIC = GemmConfig(BLOCK_M=8, BLOCK_N=8, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0, UNROLL_K=1)


@pytest.mark.parametrize("cfg,split,beta", [(FAST_SMALL[2], 1, 0.0), (FAST_SMALL[2], 4, 0.5),
                                            (GENERIC, 2, -1.0)])
def test_w1k_sum_batch(rng, cfg, split, beta):
    nb, M, N, K = 3, 8, 12, 32
    a = rng.uniform(-1, 1, (nb, M, K)).astype(np.float32)          # "mk": k contiguous
    b = rng.uniform(-1, 1, (nb, N, K)).astype(np.float32)          # "nk": k contiguous
    c0 = rng.uniform(-1, 1, (M, N)).astype(np.float32) if beta else np.full((M, N), poison_value(np.float32),
                                                                            np.float32)
    kern = make_gemm(cfg.replace(SPLIT_K=split), "mk", "nk", sum_batch=True)
    assert kern.bk.split and kern.bk.reduce_shape(nb) == (nb * split, 1)
    ws_elems = kern.bk.workspace_elems(M, N, nb)
    assert ws_elems == nb * split * M * N
    ws = cuda.to_device(np.full(ws_elems, np.nan, np.float32))
    c = cuda.to_device(c0.reshape(-1).copy())
    run_gemm(kern, cuda.to_device(a.reshape(-1)), cuda.to_device(b.reshape(-1)), c, M=M, N=N, K=K,
             a_strides=(M * K, K, 1), b_strides=(N * K, 1, K), c_strides=(0, N, 1), batch=nb, alpha=1.5,
             beta=beta, workspace=ws)
    want = 1.5 * np.einsum("zmk,znk->mn", a.astype(np.float64), b.astype(np.float64))
    if beta:
        want += beta * c0
    assert_close(c.copy_to_host().reshape(M, N), want, "float32")
    if nb * split >= splitk.WIDE_FROM:
        assert split == 4                                          # this case ran the wide reduce


def test_w1k_sum_batch_refuses_atomic():
    with pytest.raises(ValueError, match="sum_batch"):
        make_gemm(FAST_SMALL[2].replace(SPLIT_K=2, SPLIT_MODE="atomic"), "mk", "nk", sum_batch=True)
