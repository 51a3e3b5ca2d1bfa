"""The simulator's notice on a large launch and its progress reports (kernels/runtime/launch_sim.py):
a launch over the threshold says once per kernel, grid and block what it runs and that it takes a
while, to stderr when no log destination takes it or to the log callback when one is set; a launch at
or under the threshold says nothing; NCUDNN_SIM_NOTICE_THREADS moves or (0) switches off the threshold."""
import numpy as np
import pytest

import ncudnn  # noqa: F401  (switches the simulator on without a GPU)
from ncudnn import log
from ncudnn.kernels.runtime import launch_sim
from ncudnn.kernels.runtime.launch import CompiledKernel
from numba import cuda

pytestmark = pytest.mark.sim_only


@cuda.jit
def _fill(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = 1.0


NOTICE = "simulator: _fill runs 128 threads (grid 4x1x1, block 32x1x1) on the CPU; expect minutes"


@pytest.fixture
def notices(monkeypatch):
    """A fresh notice state, threshold 64 threads, no log callback (restored after)."""
    monkeypatch.setattr(launch_sim, "NOTICE_THREADS", 64)
    monkeypatch.setattr(launch_sim, "_announced", set())
    monkeypatch.delenv("NCUDNN_SIM_NOTICE_THREADS", raising=False)
    _, mask, udata, fptr = log.cudnnGetCallback()
    log.cudnnSetCallback(0, None, None)
    yield
    log.cudnnSetCallback(mask, udata, fptr)


def _launch(threads_per_block=32, blocks=4):
    out = np.zeros(blocks * threads_per_block, np.float32)
    CompiledKernel(_fill).launch((blocks, 1, 1), (threads_per_block, 1, 1), (out,))
    assert (out == 1.0).all()


def test_large_launch_announced_once_on_stderr(notices, capsys):
    _launch()
    _launch()
    err = capsys.readouterr().err
    assert err.count(NOTICE) == 1, err
    _launch(threads_per_block=64)   # another size: its own notice
    assert "runs 256 threads (grid 4x1x1, block 64x1x1)" in capsys.readouterr().err


def test_small_launch_says_nothing(notices, capsys):
    _launch(threads_per_block=16)   # 64 threads: at the threshold
    assert capsys.readouterr().err == ""


def test_env_threshold(notices, capsys, monkeypatch):
    monkeypatch.setenv("NCUDNN_SIM_NOTICE_THREADS", "0")
    _launch()
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("NCUDNN_SIM_NOTICE_THREADS", "1000")
    _launch()
    assert capsys.readouterr().err == ""


def test_notice_and_progress_through_the_log_callback(notices, capsys, monkeypatch):
    monkeypatch.setattr(launch_sim, "PROGRESS_SECONDS", 0.001)
    got = []
    log.cudnnSetCallback(log.CUDNN_SEV_WARNING_EN | log.CUDNN_SEV_INFO_EN, None,
                         lambda sev, udata, dbg, msg: got.append((int(sev), msg)))
    _launch()
    assert capsys.readouterr().err == ""        # the callback took it: nothing on stderr
    assert got.count((int(log.SEV.CUDNN_SEV_WARNING), NOTICE)) == 1
    progress = [m for s, m in got if s == int(log.SEV.CUDNN_SEV_INFO)]
    assert progress and all(m.startswith("simulator: _fill ") for m in progress), got
    assert any(m.startswith("simulator: _fill block ") and "/4, " in m for m in progress), got
