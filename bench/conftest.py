"""pytest-benchmark suite options: ``pytest bench/ [--bench-suite S] [--bench-quick] [--bench-tune]``.

The suite runs on a GPU machine; under the CUDA simulator every benchmark is skipped with the reason,
unless ``--bench-sim`` asks for the tiny simulator cases (a smoke run of the suite itself).
"""
import ncudnn  # noqa: F401  (selects GPU or simulator before numba is imported)


def pytest_addoption(parser):
    g = parser.getgroup("ncudnn bench")
    g.addoption("--bench-suite", default="all", help="conv|gemm|norm|pool|softmax|pointwise|attention|all")
    g.addoption("--bench-quick", action="store_true", help="the representative subset")
    g.addoption("--bench-tune", action="store_true", help="also ncudnn's autotuned best")
    g.addoption("--bench-sim", action="store_true", help="the tiny simulator cases (runs without a GPU)")


def pytest_generate_tests(metafunc):
    if "case_impl" not in metafunc.fixturenames:
        return
    from bench import cases as C
    from bench.suite import impl_names

    opt = metafunc.config.getoption
    sel = C.select(opt("--bench-suite"), opt("--bench-quick"), sim=opt("--bench-sim"))
    params = [(c.id, name) for c in sel for name in impl_names(c, opt("--bench-tune"))]
    metafunc.parametrize("case_impl", params, ids=[f"{cid}::{name}" for cid, name in params])
