"""The kernel pointwise_fused builds, compiled for sm_90 without a GPU (CI cannot run it there)."""
import os

from ncudnn.kernels.runtime import kcache

#: tests/engines, where the helper module the child process imports lives
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_pointwise_fused_kernel_compiles_for_sm90(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = kcache.resource_usage_subprocess("engine_graphs:sm90_pointwise_kernel",
                                         "engine_graphs:sm90_pointwise_signature", cc=(9, 0))
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["local"] == 0
    # the cost model assumes 24 + unroll * tensors registers (here 24 + 4 * 4)
    assert 16 <= r["registers"] <= 64, r
