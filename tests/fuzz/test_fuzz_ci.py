"""The CI tier of the differential fuzzer (ncudnn.fuzz): fixed seeds over every op family in the
simulator, every execution compared with the float64 oracle; a wrong answer or an error fails with its
repro line. The GPU tier is tools/gpu_fuzz.sh.

KNOWN lists cases that fail today, each with the issue item it belongs to; they run as
xfail(strict=True), so the test fails once they are fixed and the entry must go."""
import numpy as np
import pytest

from ncudnn.fuzz import runner
from ncudnn.fuzz.bind import Buffer
from ncudnn.fuzz.check import compare, tolerance
from ncudnn.fuzz.families import FAMILIES
from ncudnn.ir import TensorDesc
from ncudnn.types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as DT

SEED = 1
#: graphs per family (the simulator runs a few plans of each, one input draw: about 3 minutes in all)
CASES = {"conv": 8, "matmul": 12, "pointwise": 10, "norm": 6, "pool": 10, "reduce": 10, "softmax": 3, "move": 12}
DRAWS, MAX_PLANS = 1, 2
#: (family, case) -> the issue item it belongs to
KNOWN = {}


def _params():
    out = []
    for fam, n in CASES.items():
        for c in range(n):
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN[(fam, c)])] if (fam, c) in KNOWN else []
            out.append(pytest.param(fam, c, marks=marks, id=f"{fam}:{SEED}:{c}"))
    return out


def test_every_family_is_fuzzed():
    assert set(CASES) == set(FAMILIES)


@pytest.mark.parametrize("family,case", _params())
def test_fuzz_case(family, case):
    r = runner.run_case(family, SEED, case, draws=DRAWS, max_plans=MAX_PLANS)
    lines = [f"{x['kind']}: {x['repro']}  # {x['what'][:400]}" for x in r["failures"]]
    assert r["outcome"] in ("ok", "refused"), f"{r['desc']}\n" + "\n".join(lines)
    assert r["outcome"] != "invalid", f"generator made an invalid graph: {r.get('why')}"


def test_fuzzer_finds_a_wrong_answer(monkeypatch):
    """The fuzzer can fail: an oracle off by 1% makes every execution of a case wrong, with a repro line."""
    real = runner.run_node

    def off(node, ins, *a, **k):
        return {p: np.asarray(v, np.float64) * 1.01 for p, v in real(node, ins, *a, **k).items()}

    monkeypatch.setattr(runner, "run_node", off)
    r = runner.run_case("move", SEED, 0, draws=1, max_plans=1)
    assert r["outcome"] == "wrong" and r["failures"]
    assert r["failures"][0]["repro"].startswith(f"python -m ncudnn.fuzz --repro move:{SEED}:0")


def test_buffer_sees_writes_outside_the_view_and_changed_inputs(rng):
    d = TensorDesc(1, (2, 3), (4, 1), DT.CUDNN_DATA_FLOAT, name="y")
    out = Buffer(d, output=True)
    out.fill()
    got, same = out.read()
    assert same and np.isnan(got).all()
    host = out.dev.copy_to_host()
    host[out.guard + 3] = 0.0            # the gap after row 0
    out.dev.copy_to_device(host)
    assert not out.read()[1]
    x = Buffer(TensorDesc(2, (2, 3), (4, 1), DT.CUDNN_DATA_HALF, name="x"), output=False)
    held = x.fill(rng.uniform(-1, 1, (2, 3)))
    assert x.unchanged() and held.dtype == np.float64
    host = x.dev.copy_to_host()
    host[x.guard] = np.float16(5.0)
    x.dev.copy_to_device(host)
    assert not x.unchanged()


def test_tolerance_follows_types_and_notes():
    assert tolerance([DT.CUDNN_DATA_FLOAT], ())[0] == "float32"
    assert tolerance([DT.CUDNN_DATA_FLOAT], (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,))[0] == "tf32"
    assert tolerance([DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_BFLOAT16], ())[0] == "bfloat16"
    assert tolerance([DT.CUDNN_DATA_DOUBLE], ())[0] == "float64"
    # FP32 operands on tensor cores run as TF32: the engines note TENSOR_CORE and DOWN_CONVERT_INPUTS
    tf32 = (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE, NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
    assert tolerance([DT.CUDNN_DATA_FLOAT], tf32)[0] == "tf32"
    assert tolerance([DT.CUDNN_DATA_FLOAT], (NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,))[0] == "float16"
    assert tolerance([DT.CUDNN_DATA_HALF], tf32)[0] == "float16"
    assert tolerance([DT.CUDNN_DATA_BFLOAT16], (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,))[0] == "bfloat16"
    assert tolerance([DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FLOAT], (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,))[0] == "fp8"
    assert tolerance([DT.CUDNN_DATA_BFLOAT16], (NN.CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION,))[0] == "bfloat16"
    assert tolerance([DT.CUDNN_DATA_FLOAT], (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD,))[1] == pytest.approx(4e-5)
    ref = np.linspace(-1, 1, 10)
    assert compare(ref * (1 + 1e-7), ref, np.float32, 1e-5) is None
    assert "rel_err" in compare(ref * 1.001, ref, np.float32, 1e-5)
    assert compare(np.where(ref > 0, np.nan, ref), ref, np.float32, 1e-5) is not None
