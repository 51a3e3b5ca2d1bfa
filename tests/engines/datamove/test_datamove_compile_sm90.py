"""The data-movement copy kernels compile for sm_90 (no GPU needed) with no spills or local memory and
within 64 registers (the word-path memcpy here; every case with
``python -m ncudnn.kernels.runtime.compile_check ncudnn.kernels.datamove.strided_copy``)."""
from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.datamove import strided_copy as datamove_copy  # noqa: F401  (registers the cases)


def test_copy_kernels_compile_for_sm90():
    names = ["copy_memcpy_f32"]
    assert set(names) <= set(compile_check.registered_cases())
    results = compile_check.run_compile_check(names, timeout=300)
    assert len(results) == len(names)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
