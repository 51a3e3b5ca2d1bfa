"""docs/support.md is what tools/gen_support_table.py writes from the engine registry today: a stale table
fails here (rewrite it with `python tools/gen_support_table.py`), and the table follows the engines'
check_support (an engine that refuses drops out of its rows)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_support_table", ROOT / "tools" / "gen_support_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def text(gen):
    return gen.render()


def test_committed_table_is_current(text):
    committed = (ROOT / "docs" / "support.md").read_text()
    assert committed == text, "docs/support.md is stale: run `python tools/gen_support_table.py` and commit it"


def test_every_registered_engine_is_listed(text):
    from ncudnn.engines import registry

    for e in registry.engines():
        assert f"| {e.global_index} | `{e.name}` |" in text


def test_the_table_follows_check_support(gen, monkeypatch):
    """An engine made to refuse everything leaves the rows it held: its ops read "not supported" with its reason."""
    from ncudnn.engines import api, registry
    from ncudnn.types import cudnnStatus_t as S

    resample = registry.get("resample")
    monkeypatch.setattr(resample, "check_support",
                        lambda sub, ctx: (S.CUDNN_STATUS_NOT_SUPPORTED, "resample: refused by the test"))
    api.forget_rankings()
    pool = gen.rows(suites=("pool",))
    assert [r[0] for r in pool] == ["pool/max_pool", "pool/avg_pool", "pool/max_pool_bwd", "pool/avg_pool_bwd"]
    assert all(r[4] == "—" and "refused by the test" in r[5] for r in pool), pool
    monkeypatch.undo()
    api.forget_rankings()
    assert all(r[4] == "`resample`" and r[5] == "" for r in gen.rows(suites=("pool",)))
