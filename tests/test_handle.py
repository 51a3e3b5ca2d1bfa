"""ncudnn.handle: create / destroy, streams of every kind, runtime-error queries, the handle's pool and
caches, and the statuses of misuse (C-style: status tuples, never an exception)."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

import ncudnn
from ncudnn import handle as hmod
from ncudnn import log
from ncudnn.errors import BadParamError, cudnnGetLastErrorString
from ncudnn.platform import gpu_present
from ncudnn.testing import random

S = ncudnn.cudnnStatus_t
Q = ncudnn.cudnnErrQueryMode_t


@pytest.fixture
def h():
    err, handle = ncudnn.cudnnCreate()
    assert err == S.CUDNN_STATUS_SUCCESS
    yield handle
    if not handle.destroyed:
        # tests set made-up raw stream handles: back to the default stream before Destroy synchronizes
        assert ncudnn.cudnnSetStream(handle, 0) == (S.CUDNN_STATUS_SUCCESS,)
        assert ncudnn.cudnnDestroy(handle) == (S.CUDNN_STATUS_SUCCESS,)


def test_create_gives_a_live_handle(h):
    assert isinstance(h, hmod.Handle)
    assert hmod.get_handle_or_raise(h) is h
    assert h.caches == {} and h.workspace.capacity == 0
    assert len(h.compute_capability) == 2 and tuple(h.compute_capability) >= hmod.MIN_COMPUTE_CAPABILITY
    assert h.sm_count > 0 and h.device_id == 0
    if h.simulator:
        assert h.device_name == "CUDA simulator"
    assert ncudnn.cudnnGetStream(h) == (S.CUDNN_STATUS_SUCCESS, 0)


def test_handles_are_independent():
    _, a = ncudnn.cudnnCreate()
    _, b = ncudnn.cudnnCreate()
    assert a is not b
    ncudnn.cudnnSetStream(a, 11)
    a.caches["plan"] = 1
    assert ncudnn.cudnnGetStream(b)[1] == 0 and b.caches == {}
    ncudnn.cudnnSetStream(a, 0)
    ncudnn.cudnnDestroy(a)
    assert hmod.get_handle_or_raise(b) is b
    ncudnn.cudnnDestroy(b)


@pytest.mark.parametrize("bad", [None, 0, "handle", 12345, object()])
def test_invalid_handle_is_bad_param_everywhere(bad):
    assert ncudnn.cudnnDestroy(bad) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert ncudnn.cudnnSetStream(bad, 0) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert ncudnn.cudnnGetStream(bad) == (S.CUDNN_STATUS_BAD_PARAM, None)
    assert ncudnn.cudnnQueryRuntimeError(bad, Q.CUDNN_ERRQUERY_RAWCODE, None) == (S.CUDNN_STATUS_BAD_PARAM, None)
    assert "cudnnQueryRuntimeError" in cudnnGetLastErrorString()
    with pytest.raises(BadParamError):
        hmod.get_handle_or_raise(bad)


def test_destroyed_handle_is_bad_param(h):
    h.caches["k"] = object()
    h.workspace_view(4096)
    assert h.workspace.capacity >= 4096
    assert ncudnn.cudnnDestroy(h) == (S.CUDNN_STATUS_SUCCESS,)
    assert h.destroyed and h.caches == {} and h.workspace.capacity == 0
    assert ncudnn.cudnnDestroy(h) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert "destroyed" in cudnnGetLastErrorString()
    assert ncudnn.cudnnSetStream(h, 0) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert ncudnn.cudnnGetStream(h) == (S.CUDNN_STATUS_BAD_PARAM, None)
    with pytest.raises(BadParamError, match="destroyed"):
        hmod.get_handle_or_raise(h)


# ------------------------------------------------------------------------------------ streams

class TorchStream:  # torch.cuda.Stream look-alike
    def __init__(self, raw):
        self.cuda_stream = raw


class CoreStream:  # cuda.core Stream look-alike: the __cuda_stream__ protocol
    def __init__(self, raw):
        self._raw = raw

    def __cuda_stream__(self):
        return (0, self._raw)


class HandleStream:  # an object exposing .handle as a ctypes pointer (older numba streams)
    def __init__(self, raw):
        self.handle = ctypes.c_void_p(raw)


class PyCudaHandle:  # cuda-python handle types: getPtr()
    def __init__(self, raw):
        self._raw = raw

    def getPtr(self):
        return self._raw


@pytest.mark.parametrize("make,raw", [
    (lambda: 0, 0), (lambda: None, 0), (lambda: 0x7f00, 0x7f00), (lambda: TorchStream(0x1234), 0x1234),
    (lambda: CoreStream(0x5678), 0x5678), (lambda: HandleStream(0x9abc), 0x9abc),
    (lambda: ctypes.c_void_p(0x4444), 0x4444), (lambda: ctypes.c_void_p(None), 0),
    (lambda: PyCudaHandle(0x2222), 0x2222), (lambda: np.uint64(0x3333), 0x3333),
])
def test_stream_kinds(h, make, raw):
    stream = make()
    assert ncudnn.cudnnSetStream(h, stream) == (S.CUDNN_STATUS_SUCCESS,)
    assert h.stream == raw
    err, got = ncudnn.cudnnGetStream(h)
    assert err == S.CUDNN_STATUS_SUCCESS
    assert got is stream if stream is not None else got == 0


def test_cuda_python_stream_objects(h):
    from cuda.bindings import driver, runtime

    for s in (driver.CUstream(0xBEEF), runtime.cudaStream_t(0xCAFE)):
        assert ncudnn.cudnnSetStream(h, s) == (S.CUDNN_STATUS_SUCCESS,)
        assert h.stream == int(s) and ncudnn.cudnnGetStream(h)[1] is s


def test_numba_stream_is_the_launch_stream(h, rng):
    s = cuda.stream()
    assert ncudnn.cudnnSetStream(h, s) == (S.CUDNN_STATUS_SUCCESS,)
    assert h.launch_stream() is s
    assert ncudnn.cudnnGetStream(h)[1] is s

    @cuda.jit
    def add_one(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += np.float32(1.0)

    host = random(rng, (8,), np.float32)
    d = cuda.to_device(host)
    add_one[1, 8, h.launch_stream()](d)
    h.synchronize()
    np.testing.assert_array_equal(d.copy_to_host(), host + np.float32(1.0))
    # back to the default stream
    assert ncudnn.cudnnSetStream(h, None) == (S.CUDNN_STATUS_SUCCESS,)
    assert h.stream == 0 and h.launch_stream() is not s


@pytest.mark.parametrize("bad", ["stream", -1, True, 1.5, TorchStream("x"), CoreStream(-5)])
def test_bad_stream_is_bad_param_and_keeps_the_old_one(h, bad):
    ncudnn.cudnnSetStream(h, 0x77)
    assert ncudnn.cudnnSetStream(h, bad) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert "cudnnSetStream" in cudnnGetLastErrorString()
    assert ncudnn.cudnnGetStream(h) == (S.CUDNN_STATUS_SUCCESS, 0x77) and h.stream == 0x77


# ------------------------------------------------------------------------ runtime-error query

def test_query_runtime_error_modes(h):
    for mode in Q:
        assert ncudnn.cudnnQueryRuntimeError(h, mode, None) == (S.CUDNN_STATUS_SUCCESS, S.CUDNN_STATUS_SUCCESS)

    @cuda.jit
    def report_overflow(flag, x):
        i = cuda.grid(1)
        if i < x.size and x[i] > np.float32(1e30):
            flag[0] = 1007  # CUDNN_STATUS_RUNTIME_FP_OVERFLOW

    x = cuda.to_device(np.array([1.0, 3e38, 2.0], np.float32))
    report_overflow[1, 4, h.launch_stream()](h.runtime_error_flag(), x)
    assert ncudnn.cudnnQueryRuntimeError(h, Q.CUDNN_ERRQUERY_BLOCKING) == \
        (S.CUDNN_STATUS_SUCCESS, S.CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
    # read once, then cleared
    assert ncudnn.cudnnQueryRuntimeError(h, Q.CUDNN_ERRQUERY_RAWCODE) == (S.CUDNN_STATUS_SUCCESS, S.CUDNN_STATUS_SUCCESS)
    report_overflow[1, 4, h.launch_stream()](h.runtime_error_flag(), x)
    h.synchronize()
    assert ncudnn.cudnnQueryRuntimeError(h, Q.CUDNN_ERRQUERY_NONBLOCKING)[1] == S.CUDNN_STATUS_RUNTIME_FP_OVERFLOW


@pytest.mark.parametrize("mode,tag", [(7, None), ("blocking", None), (Q.CUDNN_ERRQUERY_RAWCODE, object())])
def test_query_runtime_error_bad_args(h, mode, tag):
    assert ncudnn.cudnnQueryRuntimeError(h, mode, tag) == (S.CUDNN_STATUS_BAD_PARAM, None)


# -------------------------------------------------------------------------- pool, logging, init

def test_workspace_pool_of_the_handle(h):
    a = h.workspace_view(1 << 12)
    b = h.workspace_view(100)
    assert a.ptr == b.ptr and b.nbytes == 100 and h.workspace.grow_count == 1
    assert h.workspace_view(1 << 14).nbytes == 1 << 14 and h.workspace.grow_count == 2


def test_calls_logged_at_info():
    calls = []
    log.cudnnSetCallback(log.CUDNN_SEV_INFO_EN, None, lambda sev, u, dbg, msg: calls.append((dbg, msg)))
    try:
        err, handle = ncudnn.cudnnCreate()
        ncudnn.cudnnSetStream(handle, 0x10)
        ncudnn.cudnnSetStream(handle, None)
        ncudnn.cudnnDestroy(handle)
    finally:
        log.reload_from_env({})
    msgs = [m for _, m in calls]
    assert msgs[0].startswith("function cudnnCreate() called:")
    assert msgs[1].startswith("function cudnnSetStream() called:") and "streamId: 16" in msgs[1]
    assert msgs[2].startswith("function cudnnSetStream() called:") and "streamId: 0" in msgs[2]
    assert msgs[3].startswith("function cudnnDestroy() called:")
    assert calls[1][0].handle is handle


def test_old_gpu_is_arch_mismatch(monkeypatch):
    monkeypatch.setattr(hmod, "device_info", lambda: {"name": "Tesla P100", "compute_capability": (6, 0),
                                                       "sm_count": 56, "device_id": 0, "simulator": False})
    assert ncudnn.cudnnCreate() == (S.CUDNN_STATUS_ARCH_MISMATCH, None)
    assert "sm_60" in cudnnGetLastErrorString()


@pytest.mark.skipif(gpu_present(), reason="needs a machine without a GPU")
def test_no_device_is_not_initialized_with_reason():
    code = ("import ncudnn\n"
            "err, h = ncudnn.cudnnCreate()\n"
            "print(int(err), h)\n"
            "print(ncudnn.cudnnGetLastErrorString())\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, msg = out.stdout.splitlines()[:2]
    assert first == f"{int(S.CUDNN_STATUS_NOT_INITIALIZED)} None"
    assert msg.startswith("CUDNN_STATUS_NOT_INITIALIZED: cudnnCreate: no CUDA driver or device was found")
    assert "NUMBA_ENABLE_CUDASIM=1" in msg
