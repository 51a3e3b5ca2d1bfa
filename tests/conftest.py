"""Two places, one suite: with no GPU, kernels run in numba's CUDA simulator at tiny shapes.

`import ncudnn` decides (before numba loads) whether the simulator is on; shapes and tolerances come
from ncudnn.testing.size / TOL. Markers: gpu (skipped in the simulator), slow (NCUDNN_SLOW=1), heavy
(the tests tests/heavy_tests.txt lists: ``pytest -m "not heavy"`` is the fast tier).
"""
import os

import numpy as np
import pytest

import ncudnn  # noqa: F401  (selects GPU or simulator before numba is imported)
from ncudnn.testing import SIM

#: nodeids marked ``heavy`` (recorded timings, tools/record_heavy_tests.py): the fast tier is
#: ``pytest -m "not heavy"``
HEAVY_FILE = os.path.join(os.path.dirname(__file__), "heavy_tests.txt")


def _heavy_ids():
    try:
        with open(HEAVY_FILE) as f:
            return {ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()}
    except OSError:
        return set()


def pytest_report_header(config):
    return f"ncudnn: {'CUDA simulator (tiny shapes)' if SIM else 'GPU (real shapes)'}"


#: on a GPU run, the nodeids of finished tests go here (one per line), so a run restarted after a
#: test broke the CUDA context carries on with the tests not yet run (tools/gpu_tests.sh does that)
DONE_FILE = os.environ.get("NCUDNN_DONE_FILE")
#: on a GPU run, each failure's traceback is appended here as it happens (a run killed by its time cap
#: still leaves them), and each test's call duration goes to NCUDNN_TIMES_FILE ("seconds nodeid")
FAIL_LOG = os.environ.get("NCUDNN_FAIL_LOG")
TIMES_FILE = os.environ.get("NCUDNN_TIMES_FILE")


def _done_ids():
    try:
        with open(DONE_FILE) as f:
            return {ln.strip() for ln in f if ln.strip()}
    except (OSError, TypeError):
        return set()


#: "I/N": this process runs every N-th test from the I-th (after the done tests are dropped), so that
#: tools/gpu_tests.sh can spread one long file over N processes
SHARD = os.environ.get("NCUDNN_SHARD")


def _deselect(config, items, keep):
    if len(keep) != len(items):
        kept = set(map(id, keep))
        config.hook.pytest_deselected(items=[it for it in items if id(it) not in kept])
        items[:] = keep


def pytest_collection_modifyitems(config, items):
    if DONE_FILE:
        done = _done_ids()
        _deselect(config, items, [it for it in items if it.nodeid not in done])
    if SHARD:
        i, n = map(int, SHARD.split("/"))
        _deselect(config, items, items[i::n])
    skip_gpu = pytest.mark.skip(reason="needs a real GPU (running under the CUDA simulator)")
    skip_slow = pytest.mark.skip(reason="slow: set NCUDNN_SLOW=1")
    skip_sim_only = pytest.mark.skip(reason="meaningful only under the simulator")
    slow_on = os.environ.get("NCUDNN_SLOW") == "1"
    heavy, heavy_ids = pytest.mark.heavy, _heavy_ids()
    for item in items:
        if item.nodeid in heavy_ids:
            item.add_marker(heavy)
        if SIM and "gpu" in item.keywords:
            item.add_marker(skip_gpu)
        if not SIM and "sim_only" in item.keywords:
            item.add_marker(skip_sim_only)
        if "slow" in item.keywords and not slow_on:
            item.add_marker(skip_slow)


def pytest_runtest_logreport(report):
    if TIMES_FILE and report.when == "call":
        with open(TIMES_FILE, "a") as f:
            f.write(f"{report.duration:.3f} {report.nodeid}\n")
    if FAIL_LOG and report.failed:
        with open(FAIL_LOG, "a") as f:
            f.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext[-6000:]}\n")


@pytest.fixture
def rng():
    """A fresh generator each test (seed printed on failure): inputs differ every run."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"rng seed {seed}")  # shown by pytest when the test fails
    yield np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _cuda_context_guard(request):
    """On a GPU, a kernel that faults leaves the CUDA context unusable for every later test: stop the
    run there, naming the test, instead of reporting hundreds of unrelated failures."""
    yield
    if SIM:
        return
    from numba import cuda
    try:
        cuda.synchronize()
    except Exception as e:  # a sticky error (illegal address, launch failure ...)
        pytest.exit(f"CUDA context broken after {request.node.nodeid}: {e}", returncode=3)
    finally:
        if DONE_FILE:
            with open(DONE_FILE, "a") as f:
                f.write(request.node.nodeid + "\n")
