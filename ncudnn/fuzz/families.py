"""The op families the fuzzer draws graphs from: name -> ``generate(rng) -> Spec``."""
from . import gen_conv, gen_matmul, gen_pointwise

FAMILIES = {
    "conv": gen_conv.generate,
    "matmul": gen_matmul.generate,
    "pointwise": gen_pointwise.generate,
}
