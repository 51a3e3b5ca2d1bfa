"""The op families the fuzzer draws graphs from: name -> ``generate(rng) -> Spec``."""
from . import gen_conv, gen_matmul, gen_move, gen_norm, gen_pointwise, gen_pool, gen_reduce

FAMILIES = {
    "conv": gen_conv.generate,
    "matmul": gen_matmul.generate,
    "pointwise": gen_pointwise.generate,
    "norm": gen_norm.generate,
    "pool": gen_pool.generate,
    "reduce": gen_reduce.reduction,
    "softmax": gen_reduce.softmax,
    "move": gen_move.generate,
}
