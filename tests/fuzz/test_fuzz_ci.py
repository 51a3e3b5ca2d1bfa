"""The CI tier of the differential fuzzer (ncudnn.fuzz): fixed seeds over every op family in the
simulator, every execution compared with the float64 oracle; a wrong answer or an error fails with its
repro line. Every registered engine runs its plans on at least one generated graph
(``test_engine_runs``). The GPU tier is tools/gpu_fuzz.sh.

KNOWN lists cases that fail today, each with the issue item it belongs to; they run as
xfail(strict=True), so the test fails once they are fixed and the entry must go."""
import numpy as np
import pytest

from ncudnn.fuzz import report, runner
from ncudnn.fuzz.bind import Buffer
from ncudnn.fuzz.check import compare, tolerance
from ncudnn.fuzz.families import FAMILIES, VARIANT_FAMILIES, generate
from ncudnn.fuzz.pool import cases_of
from ncudnn.fuzz.report import registered_engines
from ncudnn.fuzz.spec import VARIANTS
from ncudnn.ir import TensorDesc
from ncudnn.types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as DT

SEED = 1
#: graphs per family: a count (cases 0, 1, ...) or the case numbers (the variant families: one case per
#: block of VARIANTS, each its own structure, and case 1, block 0's structure at other sizes). The
#: simulator runs a few plans of each, one input draw. These cases of seed 1 cover every kind each new
#: generator draws (matmul_tc: FP16 / BF16, TF32, FP8; conv_fast: Winograd fprop / dgrad / wgrad,
#: tensor-core and its 3-channel stem, 1x1; sdpa: forward and backward; stats: GENSTATS through pygraph
#: and the backend, BN finalize, BN backward weights; rng: the three distributions)
CASES = {"conv": (0, 1, 4, 8, 12, 16, 20, 24), "matmul": (0, 1) + tuple(range(4, 44, 4)), "pointwise": 10, "norm": 6,
         "pool": 10, "reduce": 10, "softmax": 3, "move": 12, "matmul_tc": (0, 1, 4, 8, 12),
         "conv_fast": (0, 1, 4, 12, 32, 40, 200), "sdpa": 5, "stats": 9, "rng": 15}
DRAWS, MAX_PLANS = 1, 2
#: every registered engine -> a case (seed SEED) whose built plans include it, directly or as a part of a
#: composite plan: the cheapest such case of the first 16 of each family
ENGINE_CASES = {
    "pointwise_fused": ("pointwise", 6), "composite": ("reduce", 1), "reduction": ("reduce", 1),
    "genstats": ("stats", 4), "bn_finalize": ("stats", 8), "norm_batch": ("norm", 2), "norm_rows": ("norm", 5),
    "resample": ("pool", 8), "rng_philox": ("rng", 10), "softmax_fused": ("softmax", 8),
    "bn_bwd_weights": ("stats", 1), "matmul_simt": ("matmul", 14), "matmul_small": ("matmul", 14),
    "conv_implicit_gemm": ("conv", 7), "conv_implicit_precomp": ("conv_fast", 14),
    "conv_gemm_1x1": ("conv_fast", 14), "conv_winograd_nonfused": ("conv_fast", 1),
    "conv_winograd_fused": ("conv_fast", 1), "matmul_tc": ("matmul_tc", 14), "conv_tc": ("conv_fast", 9),
    "data_movement": ("move", 3), "conv_direct": ("conv_fast", 1), "matmul_wgmma": ("matmul_tc", 14),
    "attention_flash_fwd": ("sdpa", 11), "attention_flash_bwd": ("sdpa", 15), "attention_tc_fwd": ("sdpa", 8),
    "attention_tc_bwd": ("sdpa", 2), "attention_wgmma_fwd": ("sdpa", 31),
}
#: engines of ops no graph front end has (pygraph and the backend build no such node): each is tested against
#: the oracle by the tests named here instead of a fuzz case
LEGACY_ONLY = {"ctc": "tests/legacy/test_ctc.py: the CTC loss exists only as the legacy cudnnCTCLoss / _v8"}
#: (family, case) -> the issue item it belongs to
KNOWN = {}


def _params():
    out = []
    for fam, n in CASES.items():
        for c in (range(n) if isinstance(n, int) else n):
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


def test_every_registered_engine_has_a_case():
    assert not set(ENGINE_CASES) & set(LEGACY_ONLY)
    assert set(ENGINE_CASES) | set(LEGACY_ONLY) == set(registered_engines())


@pytest.mark.parametrize("engine", sorted(ENGINE_CASES))
def test_engine_runs(engine):
    """The engine's first plan on its case executes and matches the oracle (a generator that stops
    reaching the engine fails here, as a wrong answer does)."""
    family, case = ENGINE_CASES[engine]
    r = runner.run_case(family, SEED, case, draws=1, engine=engine, max_plans=1)
    lines = [f"{x['kind']}: {x['repro']}  # {x['what'][:400]}" for x in r["failures"]]
    assert r["outcome"] == "ok", f"{r['desc']}: {r.get('why', '')}\n" + "\n".join(lines)
    assert r["executions"] >= 1, f"{family}:{SEED}:{case} ({r['desc']}) built no plan of {engine}"


@pytest.mark.parametrize("family,case", [("move", 0), ("stats", 8)])
def test_fuzzer_finds_a_wrong_answer(monkeypatch, family, case):
    """The fuzzer can fail: an oracle off by 1% makes every execution of a case wrong, with a repro line
    (a pygraph case and a backend-API operation: BN finalize)."""
    real = runner.run_node

    def off(node, ins, *a, **k):
        return {p: np.asarray(v, np.float64) * 1.01 for p, v in real(node, ins, *a, **k).items()}

    monkeypatch.setattr(runner, "run_node", off)
    r = runner.run_case(family, SEED, case, draws=1, max_plans=1)
    assert r["outcome"] == "wrong" and r["failures"]
    assert r["failures"][0]["repro"].startswith(f"python -m ncudnn.fuzz --repro {family}:{SEED}:{case}")


def test_report_lists_every_registered_engine():
    """Engines no case reached are in the per-engine table with 0 cases, and named as unreached."""
    res = [{"family": "move", "seed": SEED, "case": 0, "outcome": "ok", "executions": 2, "failures": [],
            "plans": [{"name": "composite()[reduction(X=1); pointwise_fused(Y=2)]", "engine": "composite",
                       "parts": ["reduction", "pointwise_fused"], "first_of": ["A"], "executions": 2, "wrong": 0,
                       "errors": 0}]}]
    s = report.summarize(res, {"seed": SEED})
    names = registered_engines()
    assert set(names) <= set(s["per_engine"])
    assert s["per_engine"]["reduction"]["part_executions"] == 2 and s["per_engine"]["composite"]["executions"] == 2
    md = report.markdown(s)
    for name in names:
        assert f"| {name} |" in md
    assert "Engines no case reached: " in md and "matmul_wgmma" in md.split("Engines no case reached: ")[1]
    merged = report.merge([s, s])
    assert set(names) <= set(merged["per_engine"]) and merged["per_engine"]["reduction"]["part_executions"] == 4


def _structure(spec):
    """What a kernel-cache key may name of a graph: its ops, tensor types and dim orders (not sizes)."""
    spec.graph.validate()
    ir = spec.graph.ir
    return ([n.OP for n in ir.nodes],
            [(d.dtype, d.is_virtual, tuple(np.argsort(d.strides, kind="stable")) if d.strides else ())
             for d in sorted(ir.tensors().values(), key=lambda d: d.name) if not d.is_virtual])


@pytest.mark.parametrize("family", sorted(VARIANT_FAMILIES))
def test_variant_cases_share_a_structure(family):
    """The cases of one block differ in sizes only (so they compile the same kernels); every case of a
    run goes to exactly one worker, a block's cases to the same one, in a row."""
    a, b = generate(family, SEED, 0), generate(family, SEED, 1)
    assert _structure(a)[0] == _structure(b)[0]
    assert [t[0] for t in _structure(a)[1]] == [t[0] for t in _structure(b)[1]]
    runs = [list(cases_of(j, 3, 30)) for j in range(3)]
    assert sorted(c for r in runs for c in r) == list(range(30))
    assert runs[1][:VARIANTS] == list(range(VARIANTS, 2 * VARIANTS))


def test_deadline_cuts_a_case_between_blocks(monkeypatch):
    """Past the deadline a case stops after its first block of draws, saying how many draws ran."""
    monkeypatch.setattr(runner, "BLOCK_DRAWS", 1)
    r = runner.run_case("move", SEED, 3, draws=3, max_plans=1, deadline=0.0)
    assert r["outcome"] == "ok" and r["cut"] == 1 and r["executions"] == len(r["plans"])


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
