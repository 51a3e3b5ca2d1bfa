"""The timing loop and the check-then-time harness, with a fake clock and fake implementations."""
import numpy as np
import pytest

from bench import harness, timing
from bench.graphs import Unsupported
from bench.harness import Impl, Prepared
from bench.cases import mem_case


class FakeClock:
    """Each fn() call advances device time by ``step`` ms; records the order of operations."""
    name, flush_bytes = "fake", 1 << 20

    def __init__(self, step):
        self.t, self.step, self.log = 0.0, step, []

    def run(self):
        self.t += self.step
        self.log.append("fn")

    def flush(self):
        self.log.append("flush")

    def pair(self):
        return [0.0, 0.0]

    def start(self, p):
        p[0] = self.t
        self.log.append("start")

    def stop(self, p):
        p[1] = self.t
        self.log.append("stop")

    def sync(self):
        pass

    def elapsed_ms(self, p):
        return p[1] - p[0]


def test_measure_flushes_before_each_rep_and_sizes_the_sample():
    clock = FakeClock(step=1.0)
    t = timing.measure(clock.run, clock, budget_s=0.05, warmup=2, min_reps=3, max_reps=100, warmup_s=0)
    assert t.median_ms == pytest.approx(1.0) and t.p20_ms == pytest.approx(1.0)
    assert 3 <= len(t.times_ms) <= 50
    assert clock.log[:2] == ["fn", "fn"]  # warm-up, untimed
    timed = clock.log[2:]
    for i in range(0, len(timed), 4):
        assert timed[i:i + 4] == ["flush", "start", "fn", "stop"]
    fast = FakeClock(step=1e-4)
    assert len(timing.measure(fast.run, fast, 1.0, 1, 5, 17).times_ms) == 17  # clamped to max_reps


def test_measure_warms_up_for_a_device_time_before_timing():
    """warmup_s: untimed (flush, fn) pairs for that long (sized by the first timed run plus the flush's
    estimate) between the first timed run and the timed loop; the timed loop itself is unchanged."""
    clock = FakeClock(step=1.0)
    t = timing.measure(clock.run, clock, budget_s=0.05, warmup=1, min_reps=3, max_reps=100, warmup_s=0.01)
    per = 1.0 + clock.flush_bytes / 3e12 * 1e3
    n_warm = int(10.0 / per)
    assert n_warm >= 9
    head = ["fn", "flush", "start", "fn", "stop"] + ["flush", "fn"] * n_warm
    assert clock.log[:len(head)] == head
    timed = clock.log[len(head):]
    assert len(timed) == 4 * len(t.times_ms) and all(timed[i:i + 4] == ["flush", "start", "fn", "stop"]
                                                      for i in range(0, len(timed), 4))


def test_quantiles_and_rates():
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert timing.quantile(xs, 0.5) == 3.0 and timing.quantile(xs, 0.2) == pytest.approx(1.8)
    assert timing.tflops(2e12, 1000.0) == pytest.approx(2.0)
    assert timing.gbps(4e9, 1.0) == pytest.approx(4000.0)


CASE = mem_case("pointwise", "relu", "8", dict(elems=8), 8, 8, 1)


def _impl(name, out, math="float32"):
    def prepare():
        if isinstance(out, Exception):
            raise out
        return Prepared(lambda: None, lambda: {"y": out}, math)
    return Impl(name, "ncudnn", prepare)


def test_harness_checks_before_timing():
    ref = np.linspace(-1, 1, 8)
    clock = timing.WallClock()
    budget = (0.0, 1, 2, 2)
    truth = lambda: {"y": ref}  # noqa: E731
    cmp = lambda o, r: float(np.linalg.norm(o - r) / np.linalg.norm(r))  # noqa: E731
    rows = harness.run_case(CASE, [_impl("good", ref * (1 + 1e-6)), _impl("bad", ref * 1.01),
                                   _impl("bf16", ref * 1.01, "bfloat16"), _impl("na", Unsupported("no engine")),
                                   _impl("boom", RuntimeError("kaput"))], truth, cmp, clock, budget, log=None)
    st = {r["impl"]: r for r in rows}
    assert st["good"]["status"] == "ok" and st["good"]["reps"] == 2
    assert st["bad"]["status"] == "wrong" and "median_ms" not in st["bad"]
    assert "rel err 1.000e-02" in st["bad"]["reason"]
    assert st["bf16"]["status"] == "ok"  # 1% is within the bfloat16 tolerance
    assert st["na"]["status"] == "not supported" and st["na"]["reason"] == "no engine"
    assert st["boom"]["status"] == "error" and "kaput" in st["boom"]["reason"]


def test_ncudnn_refusals_are_not_supported_other_statuses_are_errors():
    from ncudnn.errors import error_for
    from ncudnn.types import cudnnStatus_t as S

    from bench.ncudnn_runners import _unsupported

    ns = _unsupported(error_for(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, "no engine"))
    assert isinstance(ns, Unsupported) and "no engine" in str(ns)
    bad = error_for(S.CUDNN_STATUS_BAD_PARAM, "bad stride")
    assert _unsupported(bad) is bad


def test_suite_stops_after_a_sticky_cuda_error(monkeypatch):
    """After an illegal-address error the context is gone: later cases are skipped, not run into errors."""
    from bench import cases as C
    from bench import suite

    calls = []

    def fake_run_case(case, impls, truth_fn, compare, clock, budget, log):
        calls.append(case.id)
        return [{"case": case.id, "impl": "ncudnn", "status": "error",
                 "reason": "first run: CudaAPIError: CUDA_ERROR_ILLEGAL_ADDRESS"}]
    monkeypatch.setattr(suite, "run_case", fake_run_case)
    monkeypatch.setattr(suite, "case_setup", lambda case, env, tune: ([], None, None, None))
    cases = C.sim_cases()[:3]
    rows, _ = suite.run(cases, suite.Env(True, False, False), log=None)
    assert calls == [cases[0].id]
    assert [r["status"] for r in rows] == ["error", "skipped", "skipped"]
    assert "CUDA context lost" in rows[1]["reason"]
