"""Softmax forward with 16-byte accesses (registers and online paths) vs the float64 oracle."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.softmax import axis as ksm
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.testing import assert_close


def _dev(a, dtype="float32"):
    host = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    return cuda.to_device(to_storage(np.asarray(a).astype(host)))


def _oracle(x, log):
    x = x.astype(np.float64)
    z = x - x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1, keepdims=True))
    return z - lse if log else np.exp(z - lse)


# (n, vec, block, rows per block, unroll, dtype, path)
CASES = [(72, 4, 32, 2, 4, "float32", "warp-registers"), (96, 4, 64, 0, 4, "float32", "block-registers"),
         (200, 4, 32, 0, 1, "float32", "warp-online"), (600, 4, 64, 0, 2, "float32", "block-online"),
         (64, 8, 32, 0, 4, "bfloat16", "warp-registers")]


@pytest.mark.parametrize("n,vec,block,rpb,unroll,dt,path", CASES, ids=[f"{c[6]}-{c[0]}-v{c[1]}-{c[5]}" for c in CASES])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log"])
def test_softmax_vec_forward(rng, n, vec, block, rpb, unroll, dt, path, log):
    rows = 3
    online = path.endswith("online")
    assert (ksm.softmax_vec_config(n, vec, block, rpb, online)[2] == 0) == online
    x = (rng.standard_normal((rows, n)) * 3).astype(np.float32)
    x[1, 5] = 40.0                                      # a dominant element: the max shift matters
    xq = from_storage(to_storage(x.astype(getattr(ml_dtypes, dt, np.float32))), dt).astype(np.float64)
    y = _dev(np.full(rows * n, np.nan, np.float32), dt)
    ksm.softmax_forward(_dev(x, dt), y, rows, n, log=log, x_dtype=dt, y_dtype=dt, block=block, vec=vec,
                        rows_per_block=rpb, unroll=unroll, online=online)
    got = from_storage(y.copy_to_host(), dt).astype(np.float64).reshape(rows, n)
    assert np.isfinite(got).all()
    assert_close(got, _oracle(xq, log), dt, name="y")


def test_vec_ok():
    assert ksm.vec_ok(1024, [4], 4) and not ksm.vec_ok(1022, [4], 4) and not ksm.vec_ok(1024, [4], 8)


# ------------------------------------------------------------------ sm_90 compile (no GPU needed)

def sm90_factory(n, vec, block, rpb, unroll, online):
    return ksm.fwd_vec_kernel(8192, n, False, vec, block, rpb, unroll, "float32", "float32", online)[0]


SM90 = [(1024, 4, 32, 4, 4, False), (32768, 4, 512, 0, 4, True), (32768, 4, 1024, 0, 4, True),
        (32768, 4, 512, 0, 8, True)]           # the last: the engine's default for long rows


@pytest.mark.slow
@pytest.mark.parametrize("n,vec,block,rpb,unroll,online", SM90, ids=[f"{c[0]}-b{c[2]}-u{c[4]}" for c in SM90])
def test_softmax_vec_compiles_sm90(monkeypatch, n, vec, block, rpb, unroll, online):
    import os

    from ncudnn.kernels.runtime import kcache
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = kcache.resource_usage_subprocess("test_softmax_vec:sm90_factory", "void(float32[::1], float32[::1], int64)",
                                         args=(n, vec, block, rpb, unroll, online), cc=(9, 0))
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["local"] == 0, r
    print(r)


@pytest.mark.parametrize("kind", ["warp-registers", "block-online"])
def test_softmax_vec_bench_shape(rng, kind):
    """The bench shapes on a GPU (8192 x 1024 warp rows, 8192 x 32768 online rows), tiny here."""
    from ncudnn.testing import size
    if kind == "warp-registers":
        rows, n = size((3, 64), (8192, 1024))
        kw = dict(block=32, rows_per_block=4)
    else:
        rows, n = size((2, 640), (8192, 32768))
        kw = dict(block=size(64, 512), unroll=size(2, 4), online=True)
    x = (rng.standard_normal((rows, n)) * 3).astype(np.float32)
    y = _dev(np.full(rows * n, np.nan, np.float32))
    ksm.softmax_forward(_dev(x), y, rows, n, vec=4, **kw)
    assert_close(y.copy_to_host().astype(np.float64).reshape(rows, n), _oracle(x, False), "float32", name="y")
