"""Packaging: a non-editable install ships every module and data file of the package."""
from fnmatch import fnmatch
from pathlib import Path

import pytest

import ncudnn

ROOT = Path(ncudnn.__file__).parent
PYPROJECT = ROOT.parent / "pyproject.toml"


def _dirs():
    return [d for d in [ROOT, *ROOT.rglob("*")] if d.is_dir() and d.name != "__pycache__"]


def test_every_directory_with_modules_is_a_package():
    """setuptools' find_packages skips (and does not descend into) a directory without __init__.py."""
    missing = [str(d.relative_to(ROOT.parent)) for d in _dirs()
               if any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert not missing, f"add an __init__.py to {missing}"


def test_data_files_are_package_data():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    if not PYPROJECT.exists():
        pytest.skip("an installed copy: no pyproject.toml beside the package")
    conf = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["ncudnn"]
    data = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.json")]
    assert "_data/cudnn_api.json" in data
    left_out = [p for p in data if not any(fnmatch(p, pat) for pat in conf)]
    assert not left_out, f"not in [tool.setuptools.package-data]: {left_out}"
    assert "engines/tuned/*.json" in conf  # mode-B tables shipped with the package
