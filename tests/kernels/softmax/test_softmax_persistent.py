"""Persistent softmax row kernel (rows in registers, next row prefetched by cp.async) vs the float64 oracle."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.softmax import axis as ksm
from ncudnn.kernels.softmax import persist as softmax_persist
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.testing import assert_close, poison_value, size


def _dev(a, dtype="float32"):
    host = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    return cuda.to_device(to_storage(np.asarray(a).astype(host)))


def _oracle(x, log):
    x = x.astype(np.float64)
    z = x - x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1, keepdims=True))
    return z - lse if log else np.exp(z - lse)


def _run(rng, rows, n, dt, log, block, prefetch, ctas):
    x = (rng.standard_normal((rows, n)) * 3).astype(np.float32)
    x[rows // 2, n // 3] = 30.0                      # a dominant element: the max shift matters
    xq = from_storage(to_storage(x.astype(getattr(ml_dtypes, dt, np.float32))), dt).astype(np.float64)
    y = _dev(np.full(rows * n, poison_value(np.float32), np.float32), dt)
    ksm.softmax_forward_persist(_dev(x, dt), y, rows, n, log=log, x_dtype=dt, y_dtype=dt, block=block,
                                prefetch=prefetch, ctas=ctas)
    got = from_storage(y.copy_to_host(), dt).astype(np.float64).reshape(rows, n)
    assert np.isfinite(got).all()
    assert_close(got, _oracle(xq, log), dt, name="y")


# (rows, n, dtype, log, block, prefetch, ctas): ctas < rows makes each block loop over several rows
CASES = [(5, 512, "float32", False, 64, True, 2),     # 2 vectors a thread, 3 rows on one block
         (3, 200, "float32", True, 64, True, 0),      # the last vector slot guarded (50 of 64 threads)
         (4, 256, "float32", False, 64, False, 3),    # registers only, no prefetch
         (3, 512, "bfloat16", False, 64, True, 2),    # 8 elements a vector, converted in registers
         (3, 512, "float16", True, 64, True, 1),
         (5, 512, "float32", False, 64, 2, 2),        # two rows buffered: the buffers rotate
         (4, 512, "bfloat16", True, 64, 2, 1)]


@pytest.mark.parametrize("rows,n,dt,log,block,prefetch,ctas", CASES,
                         ids=[f"{c[1]}-{c[2]}-{'log' if c[3] else 'sm'}-{f'pf{int(c[5])}' if c[5] else 'regs'}" for c in CASES])
def test_ksm_persist_forward(rng, rows, n, dt, log, block, prefetch, ctas):
    _run(rng, rows, n, dt, log, block, prefetch, ctas)


@pytest.mark.parametrize("prefetch", [0, 1], ids=["regs", "pf"])
def test_ksm_persist_bench_shape(rng, prefetch):
    """The bench shape on a GPU (8192 x 32768 FP32, 1024 threads, one block an SM), tiny here."""
    rows, n = size((3, 256), (8192, 32768))
    _run(rng, rows, n, "float32", False, 0 if rows > 3 else 64, prefetch, 0)


def test_ksm_persist_config():
    assert ksm.persist_config(32768, 4) == (1024, 8)          # FP32: 32 values a thread
    assert ksm.persist_config(32768, 8) == (1024, 4)          # BF16 / FP16
    assert ksm.persist_config(32768, 4, 512) == (512, 16)     # 64 values a thread below 1024 threads
    assert ksm.persist_config(16384, 4) == (512, 8)
    assert ksm.persist_config(65536, 4) is None and ksm.persist_config(65536, 4, 512) is None
    assert ksm.persist_config(1024, 4, 48) is None            # not a whole number of warps
    assert ksm.persist_ok(32768, [4, 4], 4) and ksm.persist_ok(32768, [2, 2], 2)
    assert not ksm.persist_ok(32766, [4, 4], 4)               # no 16-byte vectors
    assert ksm.persist_ok(32768, [4, 4], 4, 512) and not ksm.persist_ok(65536, [2, 2], 2)
    assert ksm.persist_ok(16384, [4, 4], 4, 0, 1) and not ksm.persist_ok(32768, [4, 4], 4, 0, 2)   # smem
    assert ksm.persist_ok(32768, [2, 2], 2, 0, 2)
    assert ksm.persist_grid(8192, 0, 132) == 132 and ksm.persist_grid(7, 0, 132) == 7
    assert ksm.persist_grid(8192, 500, 132) == 500


def test_ksm_persist_reexported():
    """softmax.py re-exports the persistent kernel's public names (the objects of softmax_persist), and
    its kernels are named in the softmax family (same symbols and compile-check module)."""
    for name in softmax_persist.__all__:
        assert getattr(ksm, name) is getattr(softmax_persist, name), name
    kern = softmax_persist.persist_kernel(1024, False, 4, 64, 1, "float32", "float32")[0]
    assert kern.py_func.__module__ == ksm.__name__


# ------------------------------------------------------------------ sm_90 compile (no GPU needed)

def sm90_factory(n, log, vec, block, prefetch, dt):
    return ksm.persist_kernel(n, log, vec, block, prefetch, dt, dt)[0]


SM90 = [(32768, False, 4, 1024, 1, "float32"), (32768, True, 4, 1024, 1, "float32"),
        (32768, False, 4, 512, 1, "float32"), (32768, False, 8, 1024, 1, "bfloat16"),
        (32768, False, 8, 1024, 2, "bfloat16")]


@pytest.mark.slow
@pytest.mark.parametrize("n,log,vec,block,prefetch,dt", SM90, ids=[f"{c[0]}-b{c[3]}-{c[5]}-{c[1]}" for c in SM90])
def test_ksm_persist_compiles_sm90(monkeypatch, n, log, vec, block, prefetch, dt):
    import os

    from ncudnn.kernels.runtime import kcache
    from ncudnn.kernels.runtime.dtypes import array_sig
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = kcache.resource_usage_subprocess("test_softmax_persistent:sm90_factory", f"void({array_sig(dt)}, {array_sig(dt)}, int64)",
                                         args=(n, log, vec, block, prefetch, dt), cc=(9, 0))
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["local"] == 0, r
    assert r["registers"] <= 65536 // block, r
    print(r)
