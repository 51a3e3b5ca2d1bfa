"""The scaffolding of the sm_90 compile tests that check a module's registered cases
(ncudnn.kernels.runtime.compile_check): the case names a module registered, and the assertion that all of them compile
with no problem (spills, registers, local memory, as each case's budget says)."""
from ncudnn.kernels.runtime import compile_check


def cases_of(*modules):
    """Names of the registered compile cases whose kernels live in ``modules`` (module names)."""
    return [name for name, case in compile_check.registered_cases().items() if case.module in modules]


def assert_cases_compile(names, jobs=2, timeout=1800):
    """Compile ``names`` for sm_90 (NVVM in child processes) and fail with every problem listed."""
    results = compile_check.run_compile_check(names, timeout=timeout, jobs=jobs)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert len(results) == len(names)
