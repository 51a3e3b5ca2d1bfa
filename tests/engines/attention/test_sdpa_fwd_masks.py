"""SDPA forward through pygraph with every mask and score option of cudnn-frontend: causal (top-left,
bottom-right), sliding window / diagonal band bounds, padding masks (seq_len_q / seq_len_kv), an
additive bias broadcast over batch / heads, ALiBi, dropout (the mask the RNG op's Philox convention draws),
and their combinations; every plan checked."""
import pytest

import ncudnn as cudnn
from fwd_runner import run_fwd

BR = cudnn.diagonal_alignment.BOTTOM_RIGHT


@pytest.mark.parametrize("SQ,SK", [(7, 7), (5, 11), (11, 5)])
def test_causal_top_left(rng, SQ, SK):
    run_fwd(rng, dtype="float32", B=1, H=2, SQ=SQ, SK=SK, D=8, causal=True)


@pytest.mark.parametrize("SQ,SK", [(5, 11), (11, 5)])
def test_causal_bottom_right(rng, SQ, SK):
    run_fwd(rng, dtype="bfloat16", B=1, H=2, SQ=SQ, SK=SK, D=8, causal_br=True, every=False)


@pytest.mark.parametrize("left,right,align", [(3, None, None), (2, 0, None), (4, 2, BR), (None, 3, BR),
                                              (1, 0, None)])
def test_diagonal_band(rng, left, right, align):
    run_fwd(rng, dtype="float16", B=1, H=1, SQ=9, SK=13, D=8, left=left, right=right, alignment=align,
            every=False)


def test_sliding_window_with_causal(rng):
    run_fwd(rng, dtype="float32", B=1, H=2, SQ=10, SK=10, D=8, causal=True, window=3)


def test_padding_mask(rng):
    run_fwd(rng, dtype="bfloat16", B=3, H=2, SQ=6, SK=9, D=8, padding=([6, 2, 0], [9, 4, 1]))


def test_padding_with_bottom_right_causal(rng):
    run_fwd(rng, dtype="float16", B=2, H=1, SQ=7, SK=9, D=8, padding=([3, 7], [8, 5]), causal_br=True,
            every=False)


@pytest.mark.parametrize("shape", [(2, 2, 5, 7), (1, 2, 5, 7), (2, 1, 5, 7), (1, 1, 5, 7), (1, 1, 1, 7)])
def test_bias_broadcast(rng, shape):
    run_fwd(rng, dtype="float32", B=2, H=2, SQ=5, SK=7, D=8, bias_shape=shape, every=False)


@pytest.mark.parametrize("H", [3, 4])
def test_alibi(rng, H):
    run_fwd(rng, dtype="float32", B=1, H=H, SQ=6, SK=8, D=8, alibi=True, causal=True, every=False)


def test_everything_at_once(rng):
    run_fwd(rng, dtype="bfloat16", B=2, H=4, HK=2, SQ=9, SK=12, D=16, DV=8, bias_shape=(1, 4, 9, 12),
            alibi=True, padding=([9, 5], [12, 7]), left=5, right=1, alignment=BR, scale_mode="by_value_tensor")


@pytest.mark.parametrize("p", [0.25, 0.6])
def test_dropout(rng, p):
    run_fwd(rng, dtype="float32", B=2, H=2, SQ=6, SK=9, D=8, dropout=(p, 1234567, 5), causal=True)


def test_dropout_with_stats_bf16(rng):
    """Stats are the softmax's (before dropout); O uses the dropped, rescaled P."""
    run_fwd(rng, dtype="bfloat16", B=1, H=3, HK=1, SQ=7, SK=7, D=16, dropout=(0.1, 2 ** 40 + 17, 3), every=False)
