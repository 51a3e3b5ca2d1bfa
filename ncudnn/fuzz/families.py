"""The op families the fuzzer draws graphs from: name -> ``generate(rng) -> Spec``; the families of
:data:`VARIANT_FAMILIES` take ``generate(rng, shapes)``, the structure from one generator and the
sizes from the other (:func:`generate` gives each what it takes)."""
from . import (gen_attn, gen_conv, gen_fastconv, gen_matmul, gen_move, gen_norm, gen_pointwise, gen_pool, gen_reduce,
               gen_stats, gen_tc)
from .spec import case_rng, structure_rng

FAMILIES = {
    "conv": gen_conv.generate,
    "conv_fast": gen_fastconv.generate,
    "matmul": gen_matmul.generate,
    "matmul_tc": gen_tc.generate,
    "pointwise": gen_pointwise.generate,
    "norm": gen_norm.generate,
    "pool": gen_pool.generate,
    "reduce": gen_reduce.reduction,
    "softmax": gen_reduce.softmax,
    "move": gen_move.generate,
    "sdpa": gen_attn.generate,
    "stats": gen_stats.stats,
    "rng": gen_stats.rng_graph,
}

#: families whose blocks of :data:`.spec.VARIANTS` cases share a structure (types, layouts, epilogue)
#: and differ in sizes: their GEMM-based kernels' cache keys name configuration, types, layouts and
#: epilogue but no size, so a block compiles its kernels about once (a worker runs a block in a row)
VARIANT_FAMILIES = frozenset({"conv", "conv_fast", "matmul", "matmul_tc"})


def generate(family, seed, case):
    """The Spec of case ``family:seed:case``."""
    if family in VARIANT_FAMILIES:
        return FAMILIES[family](structure_rng(family, seed, case), case_rng(family, seed, case))
    return FAMILIES[family](case_rng(family, seed, case))
