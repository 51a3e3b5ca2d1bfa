"""The benchmark suite under pytest-benchmark, over the same runners as ``ncudnn bench``.

One test per (case, implementation). Each implementation is first checked against the float64 truth
(a wrong result fails the test, an unsupported case skips it with the reason), then timed by the
harness's CUDA-event timer (cold L2, warm-up excluded): those figures -- median, p20, p80, TFLOP/s,
GB/s -- go into ``extra_info`` and are the ones to read. pytest-benchmark's own statistics come from
``benchmark.pedantic`` over ``flush (untimed setup); fn(); synchronize`` and are host wall time, launch
and synchronization latency included.

    pytest bench/ --bench-quick --benchmark-json=out.json
"""
import pytest

from bench import cases as C
from bench.harness import run_impl
from bench.suite import TUNE_BUDGET_S, case_setup, detect, mode_of
from bench.timing import BUDGET_S, REPS, WARMUP, make_clock

_state = {}   # the current case's inputs and implementations
_clock = {}   # one clock (and its L2-flush buffer) per session


@pytest.fixture(scope="session")
def env(request):
    e = detect()
    if e.simulator and not request.config.getoption("--bench-sim"):
        pytest.skip("no GPU: benchmarks need a real device (`ncudnn bench --sim` is the simulator smoke run)")
    return e


def _setup(case, env, tune):
    """Inputs and implementations of ``case``, kept while consecutive tests use the same case."""
    if _state.get("case") != case.id:
        _state.clear()
        _state["case"] = case.id
        impls, truth_fn, compare, keep = case_setup(case, env, tune)
        memo = {}

        def truth():
            if "v" not in memo:
                memo["v"] = truth_fn()
            return memo["v"]
        _state.update(impls={i.name: i for i in impls}, truth=truth, compare=compare, keep=keep)
    return _state


def test_case(case_impl, env, benchmark, request):
    case_id, name = case_impl
    case = C.by_id(case_id)
    quick = request.config.getoption("--bench-quick")
    if env.simulator:
        quick = False  # mode "sim" below
    mode = mode_of(quick, env.simulator)
    st = _setup(case, env, TUNE_BUDGET_S[mode] if request.config.getoption("--bench-tune") else False)
    impl = st["impls"].get(name)
    if impl is None:
        pytest.skip(f"{name} is not available here ({', '.join(env.missing) or 'not offered for this case'})")
    if "c" not in _clock:
        _clock["c"] = make_clock(env.torch_ok, env.simulator)
    clock = _clock["c"]
    captured = {}
    orig = impl.prepare

    def prepare():
        captured["p"] = orig()
        return captured["p"]
    impl.prepare = prepare
    try:
        row = run_impl(case, impl, st["truth"], st["compare"], clock, (BUDGET_S[mode], WARMUP[mode], *REPS[mode]))
    finally:
        impl.prepare = orig
    benchmark.extra_info.update({k: v for k, v in row.items() if k not in ("traceback",)})
    if row["status"] == "not supported":
        pytest.skip(f"not supported: {row['reason']}")
    if row["status"] in ("wrong", "error"):
        pytest.fail(f"{row['status']}: {row['reason']}")
    fn = captured["p"].fn

    def once():
        fn()
        clock.sync()

    def setup():
        clock.flush()
        clock.sync()
    benchmark.pedantic(once, setup=setup, rounds=min(row.get("reps", 5), 20), iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
@pytest.mark.parametrize("pad", [1, 0])
def test_avg_pool_bwd_reference_matches_oracle(layout, pad):
    """The torch average-pool backward reference (bench.ref_runners.avg_pool_bwd) against ncudnn's float64
    resample-backward oracle: channels-last with padding went wrong in torch's own kernel
    (pytorch/pytorch#188344), which the reference goes around. On the GPU when torch sees one, else the CPU."""
    torch = pytest.importorskip("torch")
    import numpy as np

    from ncudnn.reference.resample import resample_backward
    from ncudnn.testing import rel_err, size

    from bench.ref_runners import avg_pool_bwd

    n, c, h = size((2, 8, 13), (4, 64, 112))   # odd h: the last window row/column partly outside
    r, s = 3, 2
    p = C.conv_out(h, r, s, pad)
    dy64 = np.random.default_rng().standard_normal((n, c, p, p)).astype(np.float32)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dy = torch.tensor(dy64, device=dev)
    if layout == "nhwc":
        dy = dy.contiguous(memory_format=torch.channels_last)
    dx = avg_pool_bwd(dy, (n, c, h, h), r, s, pad)()["dx"]
    assert tuple(dx.shape) == (n, c, h, h)
    ref = resample_backward(dy64, "AVGPOOL_INCLUDE_PADDING", (r, r), (s, s), (pad, pad), (pad, pad), (n, c, h, h))
    assert rel_err(dx.double().cpu().numpy(), ref) < 1e-6
