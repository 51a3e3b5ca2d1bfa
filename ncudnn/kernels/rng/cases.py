"""The Philox RNG kernels' sm_90 compile cases (one per distribution).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing.
"""
from ...types import cudnnRngDistribution_t as RD
from ..runtime.compile_check import register_compile_case
from ..runtime.dtypes import array_sig
from . import philox


def register_cases():
    for dist, dt in ((RD.CUDNN_RNG_DISTRIBUTION_NORMAL, "float32"),
                     (RD.CUDNN_RNG_DISTRIBUTION_UNIFORM, "bfloat16"),
                     (RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI, "float16")):
        register_compile_case(f"rng_philox_{dist.name[23:].lower()}_{dt}", philox._kernel(int(dist), dt),
                              f"void({array_sig(dt)}, int64, uint64, uint64, uint64, uint64, "
                              "float64, float64)", max_registers=64)


register_cases()
