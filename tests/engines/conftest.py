"""Fixtures shared by the engine-layer tests."""
import pytest


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
