"""Row norm forward with 16-byte accesses (``vec``) and rows-per-block variants vs the float64 oracle."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.norm import row as kn
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.testing import assert_close


def _dev(a, dtype="float32"):
    host = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    return cuda.to_device(to_storage(np.asarray(a).astype(host)))


def _poisoned(n, dtype="float32"):
    return _dev(np.full(n, np.nan, np.float32), dtype)


def _host(d, dtype="float32"):
    return from_storage(d.copy_to_host(), dtype)


# (n, block, rows per block, vec, dtype): warp per row (partial last vector group, several rows a
# block), block per row (guarded tail vectors), 16-bit I/O with 8 elements a vector
CASES = [(48, 32, 2, 4, "float32"), (136, 32, 4, 4, "float32"), (200, 64, 0, 4, "float32"),
         (64, 32, 0, 8, "bfloat16")]


@pytest.mark.parametrize("n,block,rpb,vec,dt", CASES, ids=[f"{c[0]}-{c[1]}-r{c[2]}-v{c[3]}-{c[4]}" for c in CASES])
@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
def test_row_norm_vec_forward(rng, n, block, rpb, vec, dt, rms):
    rows = 5
    assert kn.vec_ok(n, [2 if dt == "bfloat16" else 4], vec)
    assert kn.row_config(n, block, rpb, vec=vec)[2] > 0          # the vector register path runs
    x = (rng.standard_normal((rows, n)) * 2 + 3.0).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    xq = from_storage(to_storage(x.astype(getattr(ml_dtypes, dt, np.float32))), dt).astype(np.float64)
    eps = 1e-5
    y, mean, inv = _poisoned(rows * n, dt), _poisoned(rows), _poisoned(rows)
    kn.row_norm_forward(_dev(x, dt), _dev(scale), _dev(bias), y, None if rms else mean, inv, rows, n, eps,
                        rms=rms, x_dtype=dt, y_dtype=dt, block=block, rows_per_block=rpb, vec=vec)
    if rms:
        ey, einv = ref.rmsnorm_forward(xq, scale, eps, norm_axes=1, bias=bias)
    else:
        ey, emean, einv = ref.layernorm_forward(xq, scale, bias, eps, norm_axes=1)
        assert_close(_host(mean).reshape(rows, 1), emean, "float32", name="mean")
    assert_close(_host(y, dt).astype(np.float64).reshape(rows, n), ey, dt, name="y")
    assert_close(_host(inv).reshape(rows, 1), einv, "float32", name="inv_std")


def test_row_norm_vec_no_bias_no_stats(rng):
    rows, n = 3, 64
    x = rng.standard_normal((rows, n)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    y = _poisoned(rows * n)
    kn.row_norm_forward(_dev(x), _dev(scale), None, y, None, None, rows, n, 1e-5, block=32, vec=4)
    ey, _, _ = ref.layernorm_forward(x, scale, np.zeros(n), 1e-5, norm_axes=1)
    assert_close(_host(y).reshape(rows, n), ey, "float32", name="y")


# ------------------------------------------------------------------ sm_90 compile (no GPU needed)

def sm90_factory(n, rms, dt, vec, rpb, block=0):
    """The forward kernel of the real shape (a child process without the simulator compiles it)."""
    threads, blk, vpt, rpb = kn.row_config(n, block, rpb, vec=vec)
    if vec > 1:
        return kn.row_fwd_vec_kernel(n, blk, vpt, vec, not rms, True, True, dt, "float32", dt, "float32", rpb)[0]
    return kn.row_fwd_kernel(n, blk, vpt, not rms, True, True, dt, "float32", dt, "float32", rpb)[0]


#: (n, rms, dtype, vec, rows a block, BLOCK_SIZE): the last four are the engine's default configs
SM90 = [(1024, False, "float32", 4, 4, 0), (1024, True, "float32", 4, 8, 0), (4096, False, "float32", 4, 0, 0),
        (4096, True, "bfloat16", 8, 0, 0), (1024, False, "float32", 4, 0, 128), (4096, False, "float32", 4, 0, 256),
        (4096, True, "float32", 4, 0, 256), (8192, False, "float32", 4, 0, 256)]


@pytest.mark.slow
@pytest.mark.parametrize("n,rms,dt,vec,rpb,block", SM90,
                         ids=[f"{c[0]}-{'rms' if c[1] else 'ln'}-{c[2]}-v{c[3]}-r{c[4]}-b{c[5]}" for c in SM90])
def test_row_norm_vec_compiles_sm90(monkeypatch, n, rms, dt, vec, rpb, block):
    import os

    from ncudnn.kernels.runtime import kcache
    from ncudnn.kernels.runtime.dtypes import array_sig as a
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    sig = f"void({a(dt)}, {a('float32')}, {a('float32')}, {a(dt)}, {a('float32')}, {a('float32')}, float64, int64)"
    r = kcache.resource_usage_subprocess("test_row_norm_vec:sm90_factory", sig, args=(n, rms, dt, vec, rpb, block),
                                         cc=(9, 0))
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["local"] == 0, r
    assert r["registers"] <= 128, r


@pytest.mark.parametrize("kind", ["warp", "block"])
def test_row_norm_vec_bench_shape(rng, kind):
    """The bench shapes on a GPU (8192 x 1024 warp per row, 8192 x 4096 block per row), tiny here."""
    from ncudnn.testing import size
    rows, n = size((3, 64), (8192, 1024)) if kind == "warp" else size((2, 256), (8192, 4096))
    block = 32 if kind == "warp" else size(64, 256)
    x = (rng.standard_normal((rows, n)) + 1.0).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    for rms in (False, True):
        y, mean, inv = _poisoned(rows * n), _poisoned(rows), _poisoned(rows)
        kn.row_norm_forward(_dev(x), _dev(scale), _dev(bias), y, None if rms else mean, inv, rows, n, 1e-5, rms=rms,
                            block=block, vec=4)
        if rms:
            ey, einv = ref.rmsnorm_forward(x, scale, 1e-5, norm_axes=1, bias=bias)
        else:
            ey, emean, einv = ref.layernorm_forward(x, scale, bias, 1e-5, norm_axes=1)
            assert_close(_host(mean).reshape(rows, 1), emean, "float32", name="mean")
        assert_close(_host(y).reshape(rows, n), ey, "float32", name="y")
        assert_close(_host(inv).reshape(rows, 1), einv, "float32", name="inv_std")


def test_layer_norm_refuses_inv_std_without_mean():
    """Layer norm writes both statistics: an inv_std buffer with no mean buffer is refused, not an
    out-of-bounds write into a one-element dummy."""
    from numba import cuda

    from ncudnn.kernels.norm.row import row_norm_forward
    x = cuda.to_device(np.ones((4, 8), np.float32))
    y = cuda.to_device(np.zeros((4, 8), np.float32))
    inv = cuda.to_device(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="mean"):
        row_norm_forward(x, None, None, y, None, inv, 4, 8, 1e-5)
