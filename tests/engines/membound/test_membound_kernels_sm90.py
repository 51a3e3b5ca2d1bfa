"""Every kernel launch the memory-bound engines plan for benchmark-sized problems compiles for sm_90
(no GPU needed) without spills or local memory. The softmax case runs by default; all with NCUDNN_SLOW=1."""
import os

import pytest

from ncudnn.kernels.runtime import kcache

import membound_sm90_cases

#: tests/engines, where the helper module the child process imports lives
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c == "softmax_rows" else (pytest.mark.slow,))
                                  for c in membound_sm90_cases.CASES])
def test_engine_kernels_compile_for_sm90(monkeypatch, case):
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    engine, steps = membound_sm90_cases.steps(case)
    assert steps
    for k in range(len(steps)):
        r = kcache.resource_usage_subprocess("membound_sm90_cases:factory", "membound_sm90_cases:signature", args=(case, k), cc=(9, 0))
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["local"] == 0, (engine, k, r)
        assert r["registers"] <= 128, (engine, k, r)
