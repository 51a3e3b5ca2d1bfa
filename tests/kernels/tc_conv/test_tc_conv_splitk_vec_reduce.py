"""The tensor-core conv's vector split-K reduce (kernels/tc_conv/splitk.make_split_reduce_vec): four
slices' loads at once (batch 4) or one (batch 1), bit-identical sums, against the float64 oracle with a
column bias and relu, poisoned output, strided output rows."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.tc_conv import splitk as tsk
from ncudnn.testing import assert_close, poison_value


@pytest.mark.parametrize("S", [3, 8, 9])
def test_skw_tcvec_batches(rng, S):
    M, N, ldc = 5, 12, 16
    spec = ep.EpilogueSpec((ep.bias("col"), ep.relu()))
    ws_h = rng.uniform(-1, 1, S * M * N).astype(np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    ws, b = cuda.to_device(ws_h), cuda.to_device(bias)
    want = np.maximum(0.5 * ws_h.astype(np.float64).reshape(S, M, N).sum(0) + bias, 0)
    outs = []
    for batch in (1, 4):
        y = cuda.to_device(np.full(M * ldc, poison_value(np.float32), np.float32))
        kern = tsk.make_split_reduce_vec(spec, "float32", "float32", batch)
        grid, block = tsk.vec_launch(M, N)
        kern[grid, block](*tsk.vec_args(ws, S, y, b, y, M, N, ldc, 1, alpha=0.5))
        h = y.copy_to_host().reshape(M, ldc)
        assert np.isnan(h[:, N:]).all() or (h[:, N:] == poison_value(np.float32)).all()   # padding untouched
        assert_close(h[:, :N], want, "float32")
        outs.append(h[:, :N])
    assert np.array_equal(outs[0], outs[1])
