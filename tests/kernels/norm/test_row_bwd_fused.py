"""The fused layer / RMS norm backward kernel (ncudnn.kernels.norm.row_bwd) launched directly, float64 I/O
(float64 compute, 2-element vectors) and float32 with element accesses, against float64 NumPy; the ordered
combine of its partial rows; the geometry search's refusals."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.norm import bn_cols as kc, row_bwd as kb
from ncudnn.testing import assert_close, poison_value


@pytest.mark.parametrize("dt,n,stages", [("float64", 18, 2), ("float32", 19, 1)], ids=["f64-vec2-prefetch", "f32-odd"])
@pytest.mark.parametrize("center", [True, False], ids=["layer", "rms"])
def test_fused_kernel_direct(rng, dt, n, stages, center):
    rows = 13
    vec = kb.fused_vec(n, [np.dtype(dt).itemsize])
    assert vec == (2 if dt == "float64" else 1)
    cfg = kb.fused_config(n, rows, 2, vec, block=32, rows=3, blocks_per_sm=1, stages=stages)
    assert cfg.grid == 2 and cfg.stages == stages
    k, _ = kb.fused_bwd_kernel(n, cfg.block, cfg.vpt, cfg.vec, cfg.rows, center, dt, dt, dt, dt, dt, cfg.stages)
    x, dy = rng.uniform(-1, 1, (rows, n)), rng.uniform(-1, 1, (rows, n))
    sc, mean, inv = rng.uniform(0.5, 1.5, n), rng.uniform(-1, 1, rows), rng.uniform(0.5, 2, rows)
    P = poison_value(np.dtype(dt))
    dev = [cuda.to_device(a.astype(dt).ravel()) for a in (x, dy, sc, mean, inv)]
    dx = cuda.to_device(np.full(rows * n, P, dt))
    p0, p1 = (cuda.to_device(np.full(cfg.grid * n, P, dt)) for _ in range(2))
    k[cfg.grid, cfg.block](*dev, dx, p0, p1, rows)
    ty = kc.combine_ty(cfg.grid)
    dbias, dscale = (cuda.to_device(np.full(n, P, dt)) for _ in range(2))
    kc.combine_kernel(dt, ty=ty)[(-(-n // kc.TX),), (kc.TX, ty)](p0, p1, dbias, dscale, cfg.grid, n)
    q = [a.astype(dt).astype(np.float64) for a in (x, dy, sc, mean, inv)]
    xh = ((q[0] - q[3][:, None]) if center else q[0]) * q[4][:, None]
    g = q[1] * q[2]
    want = q[4][:, None] * (g - (g.mean(1, keepdims=True) if center else 0) - xh * (g * xh).mean(1, keepdims=True))
    assert_close(dx.copy_to_host().reshape(rows, n), want, dt, name="dx")
    assert_close(dbias.copy_to_host(), q[1].sum(0), dt, name="dbias")
    assert_close(dscale.copy_to_host(), (q[1] * xh).sum(0), dt, name="dscale")


def test_geometry_search():
    assert kb.fused_config(1 << 14, 64, 132, 4) is None             # 64 values a thread at 1024 threads
    c = kb.fused_config(1 << 14, 64, 132, 4, block=1024, rows=1, stages=1)
    assert c.vpt == 4 and kb.reg_cap(c) == 64                       # asked for: kept, compiled to 64 registers
    assert kb.fused_config(1 << 16, 64, 132, 4, block=1024, rows=1, stages=1) is None   # 64 values a thread
    c = kb.fused_config(2048, 10, 132, 4)
    assert c.grid == -(-10 // c.rows) and kb.reg_cap(c) <= 255      # fewer row groups than blocks
    for n in (512, 1024, 2048, 4096, 8192):                          # the cap leaves the counted blocks resident
        c = kb.fused_config(n, 8192, 132, 4)
        assert c.block * c.blocks_per_sm * kb.reg_cap(c) <= 65536
