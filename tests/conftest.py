"""Two places, one suite: with no GPU, kernels run in numba's CUDA simulator at tiny shapes.

`import ncudnn` decides (before numba loads) whether the simulator is on; shapes and tolerances come
from ncudnn.testing.size / TOL. Markers: gpu (skipped in the simulator), slow (NCUDNN_SLOW=1).
"""
import os

import numpy as np
import pytest

import ncudnn  # noqa: F401  (selects GPU or simulator before numba is imported)
from ncudnn.testing import SIM


def pytest_report_header(config):
    return f"ncudnn: {'CUDA simulator (tiny shapes)' if SIM else 'GPU (real shapes)'}"


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a real GPU (running under the CUDA simulator)")
    skip_slow = pytest.mark.skip(reason="slow: set NCUDNN_SLOW=1")
    skip_sim_only = pytest.mark.skip(reason="meaningful only under the simulator")
    slow_on = os.environ.get("NCUDNN_SLOW") == "1"
    for item in items:
        if SIM and "gpu" in item.keywords:
            item.add_marker(skip_gpu)
        if not SIM and "sim_only" in item.keywords:
            item.add_marker(skip_sim_only)
        if "slow" in item.keywords and not slow_on:
            item.add_marker(skip_slow)


@pytest.fixture
def rng():
    """A fresh generator each test (seed printed on failure): inputs differ every run."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"rng seed {seed}")  # shown by pytest when the test fails
    yield np.random.default_rng(seed)
