"""``python -m ncudnn.kernels show``: every registered engine prints the source of each kernel its default
config builds on its representative problem; knobs select other configs; a bad knob, value or engine exits
with status 2 and says what is allowed.

Every engine's output comes from one child process (a fresh interpreter records every generated source: a
kernel factory's cached result from an earlier test would leave nothing to record here)."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncudnn.engines import registry
from ncudnn.kernel_show import cli

ROOT = Path(__file__).resolve().parents[1]
ENGINES = [e.name for e in registry.engines()]

_ALL = """
import io, json, sys
from ncudnn.kernel_show import capture
capture.install()
from ncudnn.kernel_show import cli
out = {}
for name in sys.argv[1:]:
    o, e = io.StringIO(), io.StringIO()
    out[name] = [cli.main(["show", name], o, e), o.getvalue(), e.getvalue()]
print(json.dumps(out))
"""


def _env():
    return dict(os.environ, NUMBA_ENABLE_CUDASIM="1")


@pytest.fixture(scope="module")
def shown():
    """engine -> (exit status, stdout, stderr) of ``show ENGINE`` with its default config."""
    r = subprocess.run([sys.executable, "-c", _ALL, *ENGINES], capture_output=True, text=True, cwd=ROOT,
                       env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


def _sections(text):
    """The kernel sections of ``show``'s output: [(header line, body)]."""
    parts = text.split("\n# kernel ")[1:]
    return [(p.split("\n", 1)[0], p.split("\n", 1)[1]) for p in parts]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_prints_the_source_of_its_kernels(shown, engine):
    rc, out, err = shown[engine]
    assert rc == 0, err
    assert out.startswith(f"# engine {engine} "), out[:300]
    sections = _sections(out)
    assert sections, out[:2000]
    for head, body in sections:
        assert "generated before the source recorder" not in body, (head, body[:500])
        assert "no Python function" not in body, (head, body[:500])
        assert "# cache key: " in body, head
        code = [line for line in body.splitlines() if line.strip() and not line.startswith("#")]
        assert code or "the same generated module as kernel" in body, (head, body[:500])
        if code:
            assert any(line.lstrip().startswith("def ") for line in code), (head, body[:500])


def test_generated_kernels_print_their_whole_generated_module(shown):
    out = shown["conv_winograd_fused"][1]
    assert "# generated source (<winograd" in out
    assert "def wino_fused(" in out


def test_kernels_written_as_functions_print_their_definition_and_constants(shown):
    out = shown["attention_flash_fwd"][1]
    assert "# defined at " in out and "ncudnn/kernels/attention/fwd.py" in out
    assert "# constants: " in out and "BM=32" in out


def _main(*argv):
    o, e = io.StringIO(), io.StringIO()
    return cli.main(list(argv), o, e), o.getvalue(), e.getvalue()


def test_list_names_every_engine_with_its_knobs():
    rc, out, _ = _main("show", "--list")
    assert rc == 0
    for name in ENGINES:
        assert f"  {name}  [problem " in out
    assert "TILE_SIZE: 0..10 (default 0) [0=128x128x16 t8x8 vec4" in out
    assert "WINO_TILE: 2 | 4 (default 2) [2=F(2x2,3x3), 4=F(4x4,3x3)]" in out


def test_knobs_pick_the_config():
    rc, out, err = _main("show", "matmul_simt", "TILE_SIZE=8", "split_k=2")
    assert rc == 0, err
    assert "TILE_SIZE=8" in out.splitlines()[1] and "SPLIT_K=2" in out.splitlines()[1]
    assert "BLOCK_M=32, BLOCK_N=32" in out
    rc, out, err = _main("show", "conv_winograd_nonfused", "CUDNN_KNOB_TYPE_WINO_TILE=F(4x4,3x3)")
    assert rc == 0, err
    assert "WINO_TILE=4" in out.splitlines()[1]


@pytest.mark.parametrize("argv, message", [
    (("conv_implicit_precomp", "NOPE=1"), "unknown knob 'NOPE'"),
    (("conv_implicit_precomp", "TILE_SIZE=99"), "bad value '99' for knob TILE_SIZE"),
    (("conv_implicit_precomp", "TILE_SIZE"), "malformed knob 'TILE_SIZE'"),
])
def test_a_bad_knob_exits_2_listing_the_knobs(argv, message):
    rc, out, err = _main("show", *argv)
    assert rc == 2 and not out
    assert message in err
    assert "conv_implicit_precomp knobs: TILE_SIZE: 0..10 (default 0)" in err and "SPLIT_K: 1..256" in err


def test_unknown_engine_problem_or_dtype_exits_2():
    rc, _, err = _main("show", "no_such_engine")
    assert rc == 2 and "registered engines: pointwise_fused" in err
    rc, _, err = _main("show", "matmul_simt", "--problem", "nope")
    assert rc == 2 and "problems: pointwise" in err
    rc, _, err = _main("show", "matmul_simt", "--problem", "conv3x3")
    assert rc == 2 and "accepts none of the problems tried" in err


def test_the_module_entry_point_exits_2_on_a_bad_knob():
    r = subprocess.run([sys.executable, "-m", "ncudnn.kernels", "show", "matmul_small", "NOPE=1"],
                       capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120)
    assert r.returncode == 2, r.stderr
    assert "unknown knob 'NOPE'; matmul_small knobs: TILE_SIZE: 0..3" in r.stderr
