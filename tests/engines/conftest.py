"""Fixtures shared by the engine-layer tests.

The engine tests sit in one folder per engine family (tests/engines/<family>/, as ncudnn/engines/), the
engine layer's core at the top with the shared helpers (engine_graphs, membound_util, conv_rank_graphs,
membound_sm90_cases); a test may import another family's test module: this folder and every family folder
go on sys.path, so any one file runs on its own."""
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
for _d in [_HERE] + sorted(os.path.join(_HERE, n) for n in os.listdir(_HERE)):
    if os.path.isdir(_d) and not os.path.basename(_d).startswith(("_", ".")) and _d not in sys.path:
        sys.path.insert(0, _d)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh NCUDNN_CACHE_DIR (autotune stores, heuristics tables) for the test, forgotten before and after."""
    from ncudnn.engines import autotune, heuristics

    monkeypatch.setenv("NCUDNN_CACHE_DIR", str(tmp_path))
    autotune.forget_stores()
    heuristics.forget_tables()
    yield tmp_path
    autotune.forget_stores()
    heuristics.forget_tables()
