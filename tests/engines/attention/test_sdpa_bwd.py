"""SDPA backward through pygraph (dQ, dK, dV and dBias) against the analytic float64 backward: dtypes,
layouts, GQA / MQA, different head dims, causal / band / padding masks, bias with its gradient over
broadcast axes, ALiBi, the deterministic flag; every plan build_plans(ALL) returns; poisoned outputs."""
import pytest

import ncudnn as cudnn
from bwd_runner import run_bwd

BR = cudnn.diagonal_alignment.BOTTOM_RIGHT


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dtypes(rng, dtype):
    assert run_bwd(rng, dtype=dtype, B=2, H=2, SQ=5, SK=7, D=8) >= 2


@pytest.mark.parametrize("layout", ["bshd", "bs3hd"])
def test_layouts(rng, layout):
    run_bwd(rng, dtype="bfloat16", layout=layout, B=1, H=2, SQ=7, SK=7, D=8, every=False)


@pytest.mark.parametrize("H,HK", [(4, 2), (3, 1)])
def test_gqa_mqa(rng, H, HK):
    run_bwd(rng, dtype="float32", B=1, H=H, HK=HK, SQ=5, SK=9, D=8, DV=16, every=False)


@pytest.mark.parametrize("SQ,SK", [(1, 17), (17, 3)])
def test_causal_odd_lengths(rng, SQ, SK):
    run_bwd(rng, dtype="float32", B=1, H=1, SQ=SQ, SK=SK, D=8, causal=True)


def test_bottom_right_band(rng):
    run_bwd(rng, dtype="float16", B=1, H=2, SQ=6, SK=11, D=8, left=4, right=1, alignment=BR, every=False)


def test_padding(rng):
    run_bwd(rng, dtype="float32", B=3, H=1, SQ=6, SK=8, D=8, padding=([6, 3, 0], [2, 8, 5]), causal_br=True,
            every=False)


@pytest.mark.parametrize("shape", [(2, 2, 5, 7), (1, 2, 5, 7), (1, 1, 5, 7), (2, 1, 1, 7)])
def test_bias_and_dbias(rng, shape):
    run_bwd(rng, dtype="float32", B=2, H=2, SQ=5, SK=7, D=8, bias_shape=shape, dbias=True, causal=True,
            every=False)


def test_bias_without_dbias_alibi(rng):
    run_bwd(rng, dtype="bfloat16", B=1, H=4, HK=2, SQ=6, SK=6, D=8, bias_shape=(1, 4, 6, 6), alibi=True,
            every=False)


def test_scale_tensor_and_deterministic_flag(rng):
    run_bwd(rng, dtype="float16", B=1, H=2, SQ=5, SK=6, D=16, DV=8, scale_mode="device_tensor",
            deterministic=True, every=False)
