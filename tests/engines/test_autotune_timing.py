"""The autotuner measures as bench/timing.py does: an L2 flush before every timed rep (spied at the Python
level, through api.autotune too), events (here: the clock's start / stop) around the run only, the
median of the reps, a warm-up first, rep counts sized by the time budget."""
import dataclasses
import statistics

import numpy as np
import pytest

import ncudnn
from ncudnn.engines import api, autotune
from ncudnn.engines.device import H200
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendHeurMode_t as HM

import engine_graphs as G


class SpyClock(autotune.WallClock):
    """Records the calls; each rep 'takes' the next of ``fake_ms`` (cycled) when given."""

    def __init__(self, log, fake_ms=None, nbytes=0):
        super().__init__()
        self.log, self.fake, self.nbytes, self.i = log, fake_ms, nbytes, 0

    def flush(self):
        self.log.append("flush")

    def start(self):
        self.log.append("start")
        super().start()

    def stop(self):
        self.log.append("stop")
        super().stop()
        if self.fake is not None:
            self._times[-1] = self.fake[self.i % len(self.fake)]
            self.i += 1


def test_atf_flush_before_every_rep_and_warmup_first():
    log = []
    clock = SpyClock(log)
    times = autotune.measure(clock, lambda: log.append("run"), warmup=2, runs=4)
    assert len(times) == 4
    assert log == ["run", "run"] + ["flush", "start", "run", "stop"] * 4


def test_atf_median_not_mean_or_min():
    clock = SpyClock([], fake_ms=[5.0, 1.0, 100.0, 4.0, 6.0])
    times = autotune.measure(clock, lambda: None, warmup=0, runs=5)
    assert sorted(times) == [1.0, 4.0, 5.0, 6.0, 100.0]
    assert statistics.median(times) == 5.0


@pytest.mark.parametrize("run_ms,budget_s", [(1.0, 0.05), (0.01, 0.1), (30.0, 0.1), (200.0, 0.1)])
def test_atf_reps_fit_the_budget(run_ms, budget_s):
    log = []
    clock = SpyClock(log, fake_ms=[run_ms], nbytes=256 << 20)
    times = autotune.measure(clock, lambda: None, warmup=1, budget_s=budget_s)
    flush_ms = clock.nbytes / 3e12 * 1e3
    spent = (len(times) + 1) * (run_ms + flush_ms) * 1e-3       # + the sizing rep
    assert autotune.MIN_REPS <= len(times) <= autotune.MAX_REPS
    if (run_ms + flush_ms) * 1e-3 * (autotune.MIN_REPS + 1) <= budget_s:
        assert spent <= budget_s * 1.0001, (len(times), spent)
    if len(times) < autotune.MAX_REPS:       # not cut short: one more rep would not have fit
        assert len(times) == autotune.MIN_REPS or spent + (run_ms + flush_ms) * 1e-3 > budget_s
    assert log.count("flush") == log.count("start") == len(times) + 1


def test_atf_reps_for_clamps():
    assert autotune.reps_for(1.0, 0.0, 0.05) == 50
    assert autotune.reps_for(1000.0, 0.1, 0.1) == autotune.MIN_REPS
    assert autotune.reps_for(1e-4, 0.0, 10.0) == autotune.MAX_REPS


def test_atf_flush_bytes_cover_four_l2s():
    assert autotune.flush_bytes(H200) == 256 << 20
    assert autotune.flush_bytes(dataclasses.replace(H200, l2_bytes=96 << 20)) == 4 * (96 << 20)
    assert isinstance(autotune.make_clock(0, H200), autotune.WallClock) == ncudnn.SIMULATOR


def test_atf_autotune_flushes_before_every_rep(rng, cache_dir, monkeypatch):
    dims = (1, 2, 2, 4)
    g = G.bias_relu_mul(dims)
    ecs = [ec for ec in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A) if ec.config.get(29) == 128][:2]
    log = []
    clocks = []

    def spy(stream_obj, device):
        clocks.append(SpyClock(log, fake_ms=[3.0, 1.0, 2.0]))
        return clocks[-1]
    monkeypatch.setattr(autotune, "make_clock", spy)
    x, b, y = (rng.uniform(-1, 1, s).astype(np.float32) for s in (dims, (1, 2, 1, 1), dims))
    out = G.poisoned(dims)
    res = api.autotune(g, ecs, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out}, None, runs=3,
                       store=False)
    assert len(res) == 2 and len(clocks) == 1
    assert log == ["flush", "start", "stop"] * 6          # 3 reps x 2 configs, a flush before each
    assert all(r.times_ms == (3.0, 1.0, 2.0) and r.median_ms == 2.0 for r in res)
    assert_close(out.copy_to_host(), (x.astype(np.float64) + b) * np.maximum(y, 0), "float32")


def test_atf_autotune_budget_split_over_configs(rng, cache_dir, monkeypatch):
    dims = (1, 2, 2, 4)
    g = G.bias_relu_mul(dims)
    ecs = [ec for ec in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A) if ec.config.get(29) == 128][:2]
    seen = []
    real = autotune.measure

    def spy(clock, fn, warmup=1, runs=None, budget_s=autotune.CONFIG_BUDGET_S):
        seen.append((warmup, runs, budget_s))
        return real(clock, fn, warmup, 3, budget_s)           # 3 reps: the simulator is slow
    monkeypatch.setattr(autotune, "measure", spy)
    x, b, y = (rng.uniform(-1, 1, s).astype(np.float32) for s in (dims, (1, 2, 1, 1), dims))
    pack = {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: G.poisoned(dims)}
    api.autotune(g, ecs, pack, None, store=False, budget_s=0.5)
    from ncudnn.platform import simulator_enabled
    runs = 3 if simulator_enabled() else None               # simulator: 3 reps; a GPU sizes them by the budget
    assert seen == [(1, runs, 0.25)] * 2                    # 0.5 s over 2 configs


@pytest.mark.gpu
def test_atf_event_clock_on_a_gpu():
    """On a GPU: the flush buffer is allocated once and reused; the flushed event times are positive. (The H200
    run of 2026-12-01 saw 0.078 ms for the first rep and 0.003-0.009 after it: the host's first timed launch.)"""
    from numba import cuda

    from ncudnn.engines.device import current

    dev = current()
    c1 = autotune.make_clock(0, dev)
    c2 = autotune.make_clock(0, dev)
    assert isinstance(c1, autotune.EventClock) and c1.nbytes >= max(256 << 20, 4 * dev.l2_bytes)
    assert sum(k[0] == dev.slug for k in autotune._flush_bufs) == 1       # one buffer, shared
    x = cuda.to_device(np.zeros(1024, np.float32))

    @cuda.jit
    def tiny(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1.0
    times = autotune.measure(c2, lambda: tiny[4, 256](x), warmup=1, runs=10)
    # no bound on the times themselves (a unit test asserts no timing): ten positive event times
    assert len(times) == 10 and all(t > 0 for t in times), times
    assert (x.copy_to_host() == 11).all()          # warm-up + 10 reps
