"""The user-facing files hold together: every relative link of the README, the guide, the docs and the
benchmark pages points at a file in the tree (no links to dropped runs), the license is the Apache-2.0 text
pyproject declares, the changelog has its Unreleased section, the package ships py.typed, the demo's
scikit-learn is an extra."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "bench/README.md", "bench/results/HISTORY.md",
         "experiments/README.md", "dev/README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_resolve(page):
    path = ROOT / page
    if not path.exists():
        pytest.skip(f"{page} is not in this checkout")
    text = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", path.read_text(), flags=re.S))   # code is not links
    dead = [t for t in LINK.findall(text)
            if "://" not in t and not t.startswith("mailto:") and not (path.parent / t).exists()]
    assert not dead, f"{page}: links to missing files {dead}"


def test_readme_links_no_past_run():
    text = (ROOT / "README.md").read_text()
    assert not re.search(r"bench/results/[^)\s]*/20\d\d-\d\d-\d\d", text)
    assert "docs/guide.md" in text and "bench/results/NVIDIA_H200/full/report.md" in text


def test_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text
    assert len(text.splitlines()) > 150
    tomllib = pytest.importorskip("tomllib")
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "Apache-2.0"}


def test_changelog_has_an_unreleased_section():
    heads = [ln for ln in (ROOT / "CHANGELOG.md").read_text().splitlines() if ln.startswith("## ")]
    assert heads and heads[0] == "## Unreleased"


def test_py_typed_and_the_demo_extra():
    tomllib = pytest.importorskip("tomllib")
    import ncudnn

    assert (Path(ncudnn.__file__).parent / "py.typed").exists()
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in conf["tool"]["setuptools"]["package-data"]["ncudnn"]
    assert any(req.startswith("scikit-learn") for req in conf["project"]["optional-dependencies"]["demo"])
