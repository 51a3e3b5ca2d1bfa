"""The fuzzer's comparison: results the output type cannot hold, sums that cancel, and which families a
short many-worker run reaches (each found by the 2026-12 H200 run as false "wrong" reports or as
families with no graph)."""
import numpy as np

from ncudnn.fuzz import runner
from ncudnn.fuzz.check import compare
from ncudnn.fuzz.families import FAMILIES
from ncudnn.fuzz.pool import cases_of, family_of
from ncudnn.fuzz.spec import VARIANTS


def test_an_overflowing_fp16_result_is_inf():
    ref = np.array([1.0, -1.0e5, 2.0e5, 65519.0])
    got = np.array([1.0, -np.inf, np.inf, 65504.0], np.float16)
    assert compare(got, ref, np.float16, 1.5e-2) is None
    # the wrong sign, or a finite value where rounding overflows, is still wrong
    assert compare(np.array([1.0, np.inf, np.inf, 65504.0], np.float16), ref, np.float16, 1.5e-2)
    assert compare(np.array([1.0, -65504.0, np.inf, 65504.0], np.float16), ref, np.float16, 1.5e-2)
    # FP32 holds 1e5: inf there is wrong
    assert compare(got.astype(np.float32), ref, np.float32, 1e-5)


def test_a_cancelling_sum_is_judged_against_the_magnitudes():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 256)
    x -= x.mean()                                   # the exact sum is ~0
    want = np.array([x.sum()])
    got = np.array([np.float32(want[0]) + np.float32(3e-6)], np.float32)   # float32 rounding of a 256-term sum
    assert compare(got, want, np.float32, 1e-5) is not None                 # relative to |sum|: "wrong"
    assert compare(got, want, np.float32, 1e-5, np.array([np.abs(x).sum()])) is None
    assert compare(np.array([1.0], np.float32), want, np.float32, 1e-5, np.array([np.abs(x).sum()]))


def test_the_oracle_gives_magnitudes_for_adding_reductions_only():
    class Node:
        OP = "reduction"

        def __init__(self, mode):
            self.mode = type("M", (), {"name": mode})()
    assert runner._sums(Node("CUDNN_REDUCE_TENSOR_ADD")) and runner._sums(Node("CUDNN_REDUCE_TENSOR_AVG"))
    assert not runner._sums(Node("CUDNN_REDUCE_TENSOR_MAX"))


def test_the_first_blocks_of_a_16_worker_run_cover_every_family():
    fams = list(FAMILIES)
    seen = {family_of(c, fams) for j in range(16) for c in list(cases_of(j, 16, 10 ** 6))[:2 * VARIANTS]}
    assert seen == set(fams)
    for jobs in (1, 2, len(fams), 2 * len(fams)):
        first = {family_of(c, fams) for j in range(jobs) for c in list(cases_of(j, jobs, 10 ** 6))[:len(fams) * VARIANTS]}
        assert first == set(fams), jobs
