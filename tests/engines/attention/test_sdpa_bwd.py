"""SDPA backward through pygraph (dQ, dK, dV and dBias) against the analytic float64 backward: dtypes,
layouts, GQA / MQA, different head dims, causal / band / padding masks, bias with its gradient over
broadcast axes, ALiBi, dropout, the deterministic flag; every plan build_plans(ALL) returns; poisoned outputs."""
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


def test_dropout(rng):
    run_bwd(rng, dtype="float32", B=1, H=2, SQ=6, SK=7, D=8, dropout=(0.3, 99, 11), bias_shape=(1, 2, 6, 7),
            dbias=True)


def test_scale_tensor_and_deterministic_flag(rng):
    run_bwd(rng, dtype="float16", B=1, H=2, SQ=5, SK=6, D=16, DV=8, scale_mode="device_tensor",
            deterministic=True, every=False)


def test_training_graph_forward_and_backward(rng):
    """One pygraph holding sdpa and sdpa_backward (Stats virtual between them, as a training step builds it)."""
    import numpy as np
    from numba import cuda

    from ncudnn.memory import allocate
    from ncudnn.reference.attention import sdpa_backward, sdpa_forward
    from ncudnn.testing import assert_close
    from sdpa_util import graph, out_buffer, qkv_buffers, rounded

    B, H, HK, SQ, SK, D = 1, 2, 1, 5, 6, 8
    g = graph("float32")
    vals, bufs, st = qkv_buffers(rng, "bhsd", "float32", B, H, HK, SQ, SK, D, D)
    q = g.tensor(name="q", dim=[B, H, SQ, D], stride=st["q"])
    k = g.tensor(name="k", dim=[B, HK, SK, D], stride=st["k"])
    v = g.tensor(name="v", dim=[B, HK, SK, D], stride=st["v"])
    do = g.tensor(name="dO", dim=[B, H, SQ, D], stride=st["q"])
    o, stats = g.sdpa(q, k, v, attn_scale=0.4, generate_stats=True, use_causal_mask_bottom_right=True, name="f")
    o.set_output(True).set_dim([B, H, SQ, D]).set_stride(st["q"])
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, attn_scale=0.4, use_causal_mask_bottom_right=True, name="b")
    for t, s in ((dq, st["q"]), (dk, st["k"]), (dv, st["v"])):
        t.set_output(True).set_stride(s)
    g.build([cudnn.heur_mode.A])
    rdo = rounded(rng, (B, H, SQ, D), "float32")
    outs = {n: out_buffer(dims, s, "float32") for n, dims, s in (
        ("o", [B, H, SQ, D], st["q"]), ("dq", [B, H, SQ, D], st["q"]), ("dk", [B, HK, SK, D], st["k"]),
        ("dv", [B, HK, SK, D], st["v"]))}
    pack = {q: bufs["q"][0].view(), k: bufs["k"][0].view(), v: bufs["v"][0].view(),
            do: cuda.to_device(rdo.astype(np.float32).reshape(-1)), o: outs["o"].view(), dq: outs["dq"].view(),
            dk: outs["dk"].view(), dv: outs["dv"].view()}
    ws = g.get_workspace_size()
    g.execute(pack, allocate(ws) if ws else None)
    cuda.synchronize()
    kw = dict(causal=True, diagonal_alignment="bottom_right")
    ro, rs = sdpa_forward(vals["q"], vals["k"], vals["v"], 0.4, **kw)
    refs = sdpa_backward(vals["q"], vals["k"], vals["v"], ro, rdo, rs, 0.4, **kw)
    assert_close(outs["o"].read(), ro, 2e-5, name="O")
    for n, r in zip(("dq", "dk", "dv"), refs):
        assert_close(outs[n].read(), r, 5e-5, name=n)
        outs[n].check_guard(n)
