"""Layer / RMS norm dscale / dbias column sums (ncudnn.kernels.norm.row_dparams + the ordered combine)
against float64 NumPy, with a partial column tile and several row chunks."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.norm import bn_cols as kc, row_dparams as kd
from ncudnn.testing import assert_close, poison_value

P32 = poison_value(np.float32)


@pytest.mark.parametrize("center", [True, False], ids=["layer", "rms"])
def test_row_dparams(rng, center):
    rows, n = 45, 40
    x, dy = rng.uniform(-1, 1, (rows, n)), rng.uniform(-1, 1, (rows, n))
    mean, inv = rng.uniform(-1, 1, rows), rng.uniform(0.5, 2, rows)
    cfg = kc.cols_config(rows, n, sms=2, blocks_per_sm=4, unroll=2)
    assert cfg.chunks > 1 and cfg.tiles == 2
    kern, _ = kd.dparams_partial_kernel(n, "float32", "float32", "float32", center, unroll=2)
    p0, p1 = (cuda.to_device(np.full(cfg.chunks * n, P32, np.float32)) for _ in range(2))
    dev = [cuda.to_device(a.astype(np.float32).ravel()) for a in (x, dy, mean, inv)]
    kern[(cfg.tiles, cfg.chunks), (cfg.tx, cfg.ty)](*dev, p0, p1, rows, cfg.chunk_rows)
    bf = ml_dtypes.bfloat16
    dbias = cuda.to_device(np.full(n, P32, np.float32))
    dscale = cuda.to_device(np.full(n, 0xFFFF, np.uint16))       # bfloat16 storage, poisoned (NaN)
    kc.combine_kernel("float32", "float32", "bfloat16", ty=2)[(2, 1), (kc.TX, 2)](p0, p1, dbias, dscale, cfg.chunks, n)
    q = [a.astype(np.float32).astype(np.float64) for a in (x, dy, mean, inv)]
    xhat = ((q[0] - q[2][:, None]) if center else q[0]) * q[3][:, None]
    assert_close(dbias.copy_to_host(), q[1].sum(0), "float32", name="dbias")
    got = dscale.copy_to_host().view(bf).astype(np.float64)
    assert_close(got, (q[1] * xhat).sum(0), "bfloat16", name="dscale")
