"""SDPA forward through pygraph: dtypes x layouts (BHSD, BSHD, SBHD, interleaved QKV), GQA / MQA,
D_qk != D_v, odd lengths, the scale as a value, a pass-by-value tensor or a device tensor, with and
without Stats; every plan build_plans(ALL) returns, poisoned outputs, guards checked."""
import pytest

from fwd_runner import run_fwd


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_dtypes_layouts(rng, dtype, layout):
    assert run_fwd(rng, dtype=dtype, layout=layout, B=2, H=2, SQ=5, SK=7, D=16) >= 2


@pytest.mark.parametrize("layout", ["bs3hd", "sbhd"])
def test_interleaved_and_seq_major(rng, layout):
    run_fwd(rng, dtype="bfloat16", layout=layout, B=2, H=2, SQ=9, SK=9, D=8, every=False)


@pytest.mark.parametrize("H,HK", [(4, 2), (4, 1)])
def test_gqa_mqa(rng, H, HK):
    run_fwd(rng, dtype="float16", B=1, H=H, HK=HK, SQ=6, SK=11, D=8, every=False)


def test_head_dims_differ(rng):
    run_fwd(rng, dtype="float32", B=1, H=2, SQ=3, SK=5, D=24, DV=8, every=False)
    run_fwd(rng, dtype="bfloat16", B=1, H=1, SQ=4, SK=3, D=8, DV=40, every=False)


@pytest.mark.parametrize("SQ,SK", [(1, 1), (1, 33), (33, 1), (17, 13)])
def test_odd_lengths(rng, SQ, SK):
    run_fwd(rng, dtype="float32", B=1, H=1, SQ=SQ, SK=SK, D=8, every=False)


def test_head_dim_64(rng):
    run_fwd(rng, dtype="bfloat16", B=1, H=1, SQ=9, SK=10, D=64, every=False)


@pytest.mark.parametrize("mode", ["by_value_tensor", "device_tensor", "none"])
def test_attn_scale_forms(rng, mode):
    run_fwd(rng, dtype="float16", B=1, H=2, SQ=4, SK=6, D=8, scale=0.7, scale_mode=mode, every=False)


def test_inference_no_stats(rng):
    run_fwd(rng, dtype="bfloat16", B=2, H=1, SQ=5, SK=5, D=8, stats=False, causal=True, every=False)
