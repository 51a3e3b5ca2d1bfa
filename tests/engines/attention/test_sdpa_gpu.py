"""SDPA forward and backward at real shapes on the GPU (B2 H8 S1024, D 64 / 128, GQA, causal, BF16 and
FP16) against the float64 oracle; at tiny shapes under NCUDNN_SHAPES=sim."""
import pytest

from bwd_runner import run_bwd
from fwd_runner import run_fwd
from ncudnn.testing import size

pytestmark = pytest.mark.gpu


def _shape(D):
    return size(dict(B=1, H=2, SQ=9, SK=9, D=8), dict(B=2, H=8, SQ=1024, SK=1024, D=D))


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_fwd_real_shapes(rng, D, causal):
    run_fwd(rng, dtype="bfloat16", layout="bshd", causal=causal, scale=D ** -0.5, **_shape(D))


@pytest.mark.parametrize("D", [64, 128])
def test_fwd_gqa_fp16_every_plan(rng, D):
    s = _shape(D)
    run_fwd(rng, dtype="float16", layout="bhsd", HK=s["H"] // 2, causal=True, scale=D ** -0.5, every=True, **s)


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_bwd_real_shapes(rng, D, causal):
    run_bwd(rng, dtype="bfloat16", layout="bshd", causal=causal, scale=D ** -0.5, every=False, **_shape(D))


def test_bwd_gqa_bias_dbias(rng):
    s = _shape(64)
    run_bwd(rng, dtype="float16", HK=s["H"] // 4 or 1, bias_shape=(1, s["H"], s["SQ"], s["SK"]), dbias=True,
            causal=True, scale=0.125, every=False, **s)


def test_fwd_decode_and_head_dim_256(rng):
    run_fwd(rng, dtype="bfloat16", every=False, **size(dict(B=1, H=2, SQ=1, SK=17, D=8),
                                                       dict(B=4, H=8, SQ=1, SK=4096, D=128)))
    run_fwd(rng, dtype="bfloat16", every=False, causal=True, **size(dict(B=1, H=1, SQ=5, SK=5, D=256),
                                                                    dict(B=1, H=4, SQ=512, SK=512, D=256)))
