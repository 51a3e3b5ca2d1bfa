"""Channel-innermost batch-norm kernels (ncudnn.kernels.norm.bn_cols) against float64 NumPy."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.norm import bn_cols as kc
from ncudnn.testing import assert_close, poison_value


def _run_partial(x, dy=None, mean=None, unroll=2):
    rows, C = x.shape
    cfg = kc.cols_config(rows, C, sms=2, unroll=unroll)
    kern, _ = kc.partial_kernel(C, "float32", None if dy is None else "float32", unroll=unroll)
    p0 = cuda.to_device(np.full(cfg.chunks * C, poison_value(np.float32), np.float32))
    p1 = cuda.to_device(np.full(cfg.chunks * C, poison_value(np.float32), np.float32))
    dx = cuda.to_device(x.astype(np.float32).ravel())
    ddy = cuda.to_device((dy if dy is not None else x).astype(np.float32).ravel())
    dm = cuda.to_device((mean if mean is not None else np.zeros(C)).astype(np.float32))
    kern[(cfg.tiles, cfg.chunks), (cfg.tx, cfg.ty)](dx, ddy, dm, p0, p1, rows, cfg.chunk_rows)
    o0 = cuda.to_device(np.full(C, poison_value(np.float32), np.float32))
    o1 = cuda.to_device(np.full(C, poison_value(np.float32), np.float32))
    kc.combine_kernel("float32", ty=2)[(2, 1), (kc.TX, 2)](p0, p1, o0, o1, cfg.chunks, C)
    return cfg, o0.copy_to_host(), o1.copy_to_host()


def test_cols_forward_sums_shifted(rng):
    x = rng.uniform(-1, 1, (37, 40)) + 3.0
    x32 = x.astype(np.float32).astype(np.float64)
    cfg, s0, s1 = _run_partial(x)
    assert cfg.chunks > 1 and cfg.tiles == 2
    d = x32 - x32[0]
    assert_close(s0, d.sum(0), "float32", name="sum")
    assert_close(s1, (d * d).sum(0), "float32", name="sqsum")


def test_cols_backward_sums(rng):
    x, dy, mean = rng.uniform(-1, 1, (29, 5)), rng.uniform(-1, 1, (29, 5)), rng.uniform(-1, 1, 5)
    q = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731
    _, s0, s1 = _run_partial(x, dy, mean, unroll=1)
    assert_close(s0, q(dy).sum(0), "float32", name="dy_sum")
    assert_close(s1, (q(dy) * (q(x) - q(mean))).sum(0), "float32", name="dyx_sum")


@pytest.mark.parametrize("bwd", [False, True])
def test_cols_apply(rng, bwd):
    rows, C = 23, 36
    x, dy = rng.uniform(-1, 1, (rows, C)), rng.uniform(-1, 1, (rows, C))
    e = [rng.uniform(-1, 1, C) for _ in range(3)]
    kern, _ = kc.apply_kernel(C, "float32", "float32", "float32" if bwd else None, unroll=2)
    out = cuda.to_device(np.full(rows * C, poison_value(np.float32), np.float32))
    dev = [cuda.to_device(a.astype(np.float32).ravel()) for a in (x, dy, *e)]
    grid = kc.apply_grid(rows, C, sms=1, blocks_per_sm=2, unroll=2)
    kern[grid, (kc.TX, kc.TY)](*dev, out, rows)
    q = [a.astype(np.float32).astype(np.float64) for a in (x, dy, *e)]
    want = q[1] * q[2] + q[0] * q[3] + q[4] if bwd else q[0] * q[2] + q[3]
    assert_close(out.copy_to_host().reshape(rows, C), want, "float32", name="out")
