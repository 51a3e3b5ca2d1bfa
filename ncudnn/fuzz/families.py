"""The op families the fuzzer draws graphs from: name -> ``generate(rng) -> Spec``."""
from . import (gen_attn, gen_conv, gen_fastconv, gen_matmul, gen_move, gen_norm, gen_pointwise, gen_pool, gen_reduce,
               gen_stats, gen_tc)

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
