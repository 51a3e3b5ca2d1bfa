"""The runnable examples of docs/guide.md and the README run as written: every ```python block whose first
line is "# example: NAME (simulator)" runs here (each checks its own result against the float64 oracle and
asserts it); "(GPU, torch)" blocks run where torch sees a GPU."""
import re
from pathlib import Path

import pytest

from ncudnn.testing import SIM

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(# example: ([\w-]+) \(([^)]*)\)\n.*?)```", re.S)


def examples(doc):
    return [(name, where, code) for code, name, where in BLOCK.findall((ROOT / doc).read_text())]


GUIDE = examples("docs/guide.md")
README = examples("README.md")


def test_the_guide_has_every_front_end():
    assert {n for n, _, _ in GUIDE} >= {"pygraph-torch", "pygraph-numba", "sdpa-torch", "sdpa-numba", "backend",
                                        "legacy"}
    assert [w for _, w, _ in GUIDE if "simulator" in w]


CASES = [("docs/guide.md", *e) for e in GUIDE] + [("README.md", *e) for e in README]


@pytest.mark.parametrize("doc,name,where,code", CASES, ids=[f"{d}:{n}" for d, n, _, _ in CASES])
def test_example_runs(doc, name, where, code, capsys):
    if "torch" in where:
        torch = pytest.importorskip("torch")
        if SIM or not torch.cuda.is_available():
            pytest.skip("a torch example: needs torch with a GPU")
    exec(compile(code, f"{doc}:{name}", "exec"), {"__name__": f"example_{name.replace('-', '_')}"})
    out = capsys.readouterr().out
    assert "relative error" in out
    err = float(re.findall(r"relative error ([0-9.e+-]+)", out)[-1])
    sixteen_bit = any(t in code for t in ("HALF", "half", "BFLOAT16", "bfloat16"))
    assert err < (2e-2 if sixteen_bit else 1e-5), out
