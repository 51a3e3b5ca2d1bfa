"""Plane-contiguous (NCHW) batch-norm kernels (ncudnn.kernels.norm.bn_planes) against float64 NumPy."""
import math

import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.norm import bn_cols as kc, bn_planes as kp
from ncudnn.testing import assert_close, poison_value

N, C, HW = 5, 3, 75
P32 = poison_value(np.float32)


def _q(a):
    return a.astype(np.float32).astype(np.float64)


def _dev(a):
    return cuda.to_device(a.astype(np.float32).ravel())


@pytest.mark.parametrize("bwd", [False, True])
def test_planes_partial_sums(rng, bwd):
    x = rng.uniform(-1, 1, (N, C, HW)) + (0.0 if bwd else 5.0)
    dy, mean = rng.uniform(-1, 1, (N, C, HW)), rng.uniform(-1, 1, C)
    T = kp.threads_for(HW)
    chunks, per = kp.planes_config(N, C, sms=2)
    assert chunks > 1
    kern, _ = kp.partial_kernel(C, HW, C * HW, T, "float32", "float32" if bwd else None, unroll=2)
    p0, p1 = (cuda.to_device(np.full(chunks * C, P32, np.float32)) for _ in range(2))
    kern[(C, chunks), T](_dev(x), _dev(dy), _dev(mean), p0, p1, N, per)
    o0, o1 = (cuda.to_device(np.full(C, P32, np.float32)) for _ in range(2))
    kc.combine_kernel("float32", ty=2)[1, (kc.TX, 2)](p0, p1, o0, o1, chunks, C)
    qx, qd = _q(x), _q(dy)
    if bwd:
        want0, want1 = qd.sum((0, 2)), (qd * (qx - _q(mean)[None, :, None])).sum((0, 2))
    else:
        d = qx - qx[0, :, 0][None, :, None]
        want0, want1 = d.sum((0, 2)), (d * d).sum((0, 2))
    assert_close(o0.copy_to_host(), want0, "float32", name="s0")
    assert_close(o1.copy_to_host(), want1, "float32", name="s1")


@pytest.mark.parametrize("bwd", [False, True])
def test_planes_apply(rng, bwd):
    x, dy = rng.uniform(-1, 1, (N, C, HW)), rng.uniform(-1, 1, (N, C, HW))
    e = [rng.uniform(-1, 1, C) for _ in range(3)]
    T = 32
    kern, _ = kp.apply_kernel(C, HW, C * HW, T, "float32", "float32", "float32" if bwd else None, unroll=2)
    per_plane = kp.apply_grid(HW, T, unroll=2, max_elems=40)
    assert per_plane == 2
    out = cuda.to_device(np.full(N * C * HW, P32, np.float32))
    kern[(N * C, per_plane), T](_dev(x), _dev(dy), *map(_dev, e), out, math.ceil(HW / per_plane))
    q, b = [_q(a) for a in (x, dy)], [_q(a)[None, :, None] for a in e]
    want = q[1] * b[0] + q[0] * b[1] + b[2] if bwd else q[0] * b[0] + b[1]
    assert_close(out.copy_to_host().reshape(N, C, HW), want, "float32", name="out")
