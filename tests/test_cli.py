"""The ncudnn command: info (versions, API level, device, engines), demo, --help everywhere."""
import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

import ncudnn
from ncudnn import cli


def test_info_text(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"ncudnn {ncudnn.__version__}: cuDNN API level {ncudnn.CUDNN_VERSION} " \
                       f"({ncudnn.types.MACROS['CUDNN_MAJOR']}.{ncudnn.types.MACROS['CUDNN_MINOR']}." \
                       f"{ncudnn.types.MACROS['CUDNN_PATCHLEVEL']})"
    if ncudnn.SIMULATOR:
        assert lines[1].startswith("device: CUDA simulator")
    else:
        assert "compute capability" in lines[1] and " SMs" in lines[1]
    for dist in ("numba", "numba-cuda", "cuda-python"):
        try:
            assert f"{dist} {metadata.version(dist)}" in lines[2]
        except metadata.PackageNotFoundError:  # the GPU machine has cuda-bindings without cuda-python
            assert dist in lines[2]
    assert any(line.startswith("engines: ") for line in lines)


def test_info_json_matches_the_facts(capsys):
    assert cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["cudnn_api_level"] == ncudnn.cudnnGetVersion() == ncudnn.CUDNN_VERSION
    assert info["ncudnn"] == ncudnn.__version__
    assert info["packages"]["numba"] == metadata.version("numba")
    assert info["device"]["simulator"] is ncudnn.SIMULATOR
    try:
        from ncudnn.engines import registry
    except ModuleNotFoundError:
        assert info["engines"] is None
    else:
        assert [tuple(e) for e in info["engines"]] == [(e.global_index, e.name) for e in registry.engines()]


def test_info_without_engine_layer(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_engines", lambda: (None, None))
    cli.main(["info"])
    assert "engines: none registered yet" in capsys.readouterr().out


def test_info_without_a_device(capsys, monkeypatch):
    from ncudnn import handle
    from ncudnn.errors import NotInitializedError

    def no_device():
        raise NotInitializedError("no CUDA driver or device was found")

    monkeypatch.setattr(handle, "device_info", no_device)
    assert cli.main(["info"]) == 0
    assert "device: none usable (no CUDA driver or device was found)" in capsys.readouterr().out


@pytest.mark.parametrize("status", [0, 1, 2])
def test_demo_runs_the_demo_and_returns_its_status(monkeypatch, status):
    """The command's wiring (the demo itself is tested in tests/test_demo.py)."""
    import ncudnn.demo

    calls = []
    monkeypatch.setattr(ncudnn.demo, "run", lambda: calls.append(1) or status)
    assert cli.main(["demo"]) == status and calls == [1]


@pytest.mark.parametrize("argv", [["--help"], ["info", "--help"], ["demo", "--help"]])
def test_help_everywhere(capsys, argv):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ncudnn") and ("info" in out or "demo" in out)


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 0
    assert "usage: ncudnn" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["frobnicate"])
    assert e.value.code == 2


def test_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "ncudnn", "info"], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"ncudnn {ncudnn.__version__}: cuDNN API level {ncudnn.CUDNN_VERSION}")
