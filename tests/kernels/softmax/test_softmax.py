"""Softmax / log-softmax forward and backward kernels against the float64 oracle."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.softmax import axis as sm
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.testing import assert_close


def _dev(a, dtype="float32"):
    t = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    return cuda.to_device(to_storage(np.asarray(a).astype(t)))


def _poisoned(n, dtype="float32"):
    return _dev(np.full(n, np.nan, np.float32), dtype)


def _host(d, dtype="float32"):
    return from_storage(d.copy_to_host(), dtype)


CASES = [((5, 45), 32, "warp-registers"), ((1, 1100), 32, "warp-online"),
         ((2, 100), 64, "block-registers"), ((2, 1100), 64, "block-smem"), ((1, 2100), 64, "block-online")]


@pytest.fixture
def no_smem_rows(monkeypatch):
    """Rows too long for registers take the online path (shared-memory rows switched off)."""
    monkeypatch.setattr(sm, "SMEM_ROW_BYTES", 0)
    sm._fwd_kernel.cache_clear()
    yield
    sm._fwd_kernel.cache_clear()


@pytest.mark.parametrize("shape,block,path", CASES, ids=[c[2] for c in CASES])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log"])
def test_last_axis_forward_backward(rng, shape, block, path, log, request):
    outer, n = shape
    if path == "block-online":
        request.getfixturevalue("no_smem_rows")
    assert (sm.softmax_config(n, block)[2] == 0) == (path.endswith("online") or path.endswith("smem"))
    assert (sm._fwd_kernel(outer, n, 1, log, block, "float32", "float32")[1][2] > 0) == path.endswith("smem")
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x[0, :5] = -np.inf   # masked entries (attention-style)
    dy = rng.standard_normal(shape).astype(np.float32)
    y = _poisoned(x.size)
    sm.softmax_forward(_dev(x), y, outer, n, log=log, block=block)
    ey = (ref.log_softmax if log else ref.softmax)(x, axis=-1)
    got = _host(y).reshape(shape)
    assert_close(got, ey, "float32", name="y")
    dx = _poisoned(x.size)
    yin = ey.astype(np.float32)
    sm.softmax_backward(_dev(yin), _dev(dy), dx, outer, n, log=log, block=block)
    assert_close(_host(dx).reshape(shape), ref.softmax_backward(yin, dy, axis=-1, log=log),
                 "float32", name="dx")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log"])
def test_channel_axis_nchw(rng, log):
    shape = (2, 5, 3, 4)
    x = rng.standard_normal(shape).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    y = _poisoned(x.size)
    sm.softmax_forward(_dev(x), y, 2, 5, 12, log=log)
    ey = (ref.log_softmax if log else ref.softmax)(x, axis=1)
    assert_close(_host(y).reshape(shape), ey, "float32")
    dx = _poisoned(x.size)
    yin = ey.astype(np.float32)
    sm.softmax_backward(_dev(yin), _dev(dy), dx, 2, 5, 12, log=log)
    assert_close(_host(dx).reshape(shape), ref.softmax_backward(yin, dy, axis=1, log=log), "float32")


def test_fp16_in_bf16_out(rng):
    shape = (4, 64)
    x = (rng.standard_normal(shape) * 4).astype(np.float16)
    y = _poisoned(x.size, "bfloat16")
    sm.softmax_forward(_dev(x, "float16"), y, 4, 64, x_dtype="float16", y_dtype="bfloat16",
                       block=32)
    assert_close(_host(y, "bfloat16").reshape(shape), ref.softmax(x, axis=-1), "bfloat16")


def test_shared_memory_rows_bf16_in_f32_out(rng):
    """The shared-memory row path keeps x's storage (bf16) in shared memory; output fp32."""
    shape, block = (2, 1300), 64
    x = (rng.standard_normal(shape) * 4).astype(ml_dtypes.bfloat16)
    assert sm._fwd_kernel(2, 1300, 1, True, block, "bfloat16", "float32")[1][2] == 1300 * 2
    y = _poisoned(x.size)
    sm.softmax_forward(_dev(x, "bfloat16"), y, 2, 1300, log=True, x_dtype="bfloat16", block=block)
    assert_close(_host(y).reshape(shape), ref.log_softmax(x.astype(np.float64), axis=-1), "float32")


def test_instance_mode_all_but_batch(rng):
    shape = (2, 3, 2, 5)
    x = rng.standard_normal(shape).astype(np.float32)
    y = _poisoned(x.size)
    sm.softmax_forward(_dev(x), y, 2, 30, 1, block=32)
    assert_close(_host(y).reshape(shape), ref.softmax(x, axis=(1, 2, 3)), "float32")


GPU_CASES = {"smem-rows-f32": ((64, 32768), "float32", False), "smem-rows-bf16-log": ((64, 32768), "bfloat16", True),
             "warp-rows-1024": ((256, 1024), "float32", False), "online-65536-log": ((16, 65536), "float32", True)}


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(GPU_CASES))
def test_real_row_lengths_on_gpu(rng, case):
    """The benchmark's row lengths on the GPU: 128 KB shared-memory rows (past the 48 KB opt-in),
    1024-element warp rows (32 a lane), the online path beyond 160 KB; forward and backward."""
    shape, dt, log = GPU_CASES[case]
    outer, n = shape
    x = (rng.standard_normal(shape) * 3).astype(getattr(ml_dtypes, dt, None) or np.dtype(dt))
    x[0, :7] = -np.inf
    y = _poisoned(x.size, dt)
    sm.softmax_forward(_dev(x, dt), y, outer, n, log=log, x_dtype=dt, y_dtype=dt)
    ey = (ref.log_softmax if log else ref.softmax)(x.astype(np.float64), axis=-1)
    assert_close(_host(y, dt).reshape(shape), ey, dt, name="y")
    yin = ey.astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    dx = _poisoned(x.size)
    sm.softmax_backward(_dev(yin), _dev(dy), dx, outer, n, log=log)
    assert_close(_host(dx).reshape(shape), ref.softmax_backward(yin, dy, axis=-1, log=log), "float32", name="dx")
