"""Engine "rng_philox" through the engine API against the oracle's RNG contract (reference/rng.py):
bit-exact uniform / Bernoulli, normal within float32 libm error, the same output whatever the launch
configuration, seed / offset from the variant pack."""
import numpy as np

from ncudnn import reference as R
from ncudnn.engines import api, registry
from ncudnn.ir import OpGraph, Rng
from ncudnn.testing import assert_close
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnDataType_t as DT, cudnnRngDistribution_t as RD,
                          cudnnStatus_t as S)

import membound_util as U

DIMS = (3, 7)
SEED, OFFSET = 1234567890123, 8


def rng_graph(dist, dtype=U.F32, **attrs):
    y = U.t(1, DIMS, dtype, name="y")
    ins = {"SEED": U.scalar(2, SEED, "seed", DT.CUDNN_DATA_INT64),
           "OFFSET": U.scalar(3, OFFSET, "offset", DT.CUDNN_DATA_INT64)}
    return OpGraph([Rng("rng", ins, {"Y": y}, distribution=dist, **attrs)]).finalize(), y


def _run(g, y, pack_extra=None, ec=None):
    out = U.poisoned(y)
    pack = {1: out, **(pack_extra or {})}
    plan = U.run(g, pack) if ec is None else U.run_ec(g, pack, ec)
    return U.download(out, y), plan


def test_uniform_bit_exact_for_every_block_size():
    g, y = rng_graph(RD.CUDNN_RNG_DISTRIBUTION_UNIFORM, uniform_min=-2.0, uniform_max=3.0)
    ref = R.rng_generate(DIMS, RD.CUDNN_RNG_DISTRIBUTION_UNIFORM, SEED, OFFSET, uniform_min=-2.0, uniform_max=3.0)
    blocks = {e.config.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE): e for e in api.get_heuristics(g)}
    assert {64, 128, 256} <= set(blocks)
    for b in (64, 256):
        got, plan = _run(g, y, ec=blocks[b])
        assert plan.engine_names == ["rng_philox"]
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_bernoulli_seed_and_offset_from_the_pack():
    g, y = rng_graph(RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI, bernoulli_probability=0.3)
    got, _ = _run(g, y, {2: 99, 3: 41})
    np.testing.assert_array_equal(got, R.rng_generate(DIMS, RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI, 99, 41,
                                                      bernoulli_probability=0.3))
    again, _ = _run(g, y, {2: 99, 3: 45})
    assert not np.array_equal(got, again)


def test_normal_float32_and_bf16():
    for dtype, tol in ((U.F32, "float32"), (DT.CUDNN_DATA_BFLOAT16, "bfloat16")):
        g, y = rng_graph(RD.CUDNN_RNG_DISTRIBUTION_NORMAL, dtype, normal_mean=1.0, normal_std=0.5)
        got, _ = _run(g, y)
        ref = R.rng_generate(DIMS, RD.CUDNN_RNG_DISTRIBUTION_NORMAL, SEED, OFFSET, normal_mean=1.0, normal_std=0.5)
        assert_close(got, U.cast(ref, dtype), tol)


def test_device_seed_refused():
    y = U.t(1, DIMS)
    g = OpGraph([Rng("rng", {"SEED": U.t(2, (1,), DT.CUDNN_DATA_INT64)}, {"Y": y})]).finalize()
    st, why = registry.by_name("rng_philox").check_support(api.problem(g), api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "SEED" in why and "'rng'" in why
