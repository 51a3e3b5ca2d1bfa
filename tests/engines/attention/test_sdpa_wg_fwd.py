"""attention_wgmma_fwd (wgmma flash attention, sm_90a) through pygraph: the heuristic's pick for FP16 / BF16 at
head dims 64 and 128, every plan of it against the float64 oracle over the options it claims (layouts, GQA,
D_qk != D_v, lengths that are not tile multiples, masks, padding, bias, ALiBi, the scale tensor, no Stats, a
misaligned pointer), and the problems it refuses, with their reasons (those run on attention_tc_fwd)."""
import pytest

import ncudnn as cudnn
from fwd_runner import run_fwd
from ncudnn.engines import api
from ncudnn.kernels.attention.wg_fwd import WgAttnConfig, acc_regs, wg_check, wg_configs, wg_smem_bytes
from ncudnn.types import cudnnStatus_t as S
from sdpa_util import fwd_graph, graph

WG = "attention_wgmma_fwd"
ONE_WG = WG + "(BLOCK_SIZE=128, TILE_N=64)"     # 128 simulated threads, three key tiles at SK 150


@pytest.mark.parametrize("dtype,D,S", [("bfloat16", 128, 4096), ("float16", 64, 512), ("bfloat16", 64, 2048)])
def test_heuristic_picks_wgmma(dtype, D, S):
    """At the lengths attention is run at (plans built, not run: no simulated launch)."""
    g = fwd_graph(dtype, D, SQ=S, SK=S)
    g.check_support()
    g.build_plans()
    name = g.get_plan_name_at_index(g.get_selected_plan_index())
    assert name.startswith(WG + "("), name
    notes = [str(n) for n in g.get_numerical_notes_for_plan_at_index(g.get_selected_plan_index())]
    assert any("TENSOR_CORE" in n for n in notes), notes


def test_one_warpgroup_three_key_tiles(rng):
    run_fwd(rng, dtype="bfloat16", B=1, H=1, SQ=70, SK=150, D=64, engine=ONE_WG)


@pytest.mark.parametrize("dtype,layout", [("bfloat16", "bhsd"), ("float16", "bshd"), ("bfloat16", "bs3hd")])
def test_every_plan_layouts(rng, dtype, layout):
    """Every plan (two and three warpgroups, 64- and 128-key tiles), D 64."""
    sk = 70 if layout == "bs3hd" else 150          # interleaved QKV: one sequence length
    assert run_fwd(rng, dtype=dtype, layout=layout, B=1, H=2, SQ=70, SK=sk, D=64, engine=WG) >= 2


def test_head_dim_128_and_gqa(rng):
    run_fwd(rng, dtype="float16", B=1, H=2, HK=1, SQ=40, SK=140, D=128, engine=WG + "(BLOCK_SIZE=256, TILE_N=128)",
            causal=True)


def test_head_dims_differ(rng):
    run_fwd(rng, dtype="bfloat16", B=1, H=1, SQ=30, SK=90, D=128, DV=64, engine=ONE_WG)
    run_fwd(rng, dtype="bfloat16", B=1, H=1, SQ=30, SK=90, D=64, DV=128, engine=ONE_WG)


@pytest.mark.parametrize("opts", [dict(causal=True), dict(causal_br=True), dict(padding=([45, 4], [9, 130])),
                                  dict(bias_shape=(1, 2, 50, 150)), dict(alibi=True, causal=True),
                                  dict(left=40, right=3, alignment=cudnn.diagonal_alignment.TOP_LEFT),
                                  dict(scale_mode="device_tensor")],
                         ids=["causal", "causal_br", "padding", "bias", "alibi", "band", "scale_tensor"])
def test_options(rng, opts):
    run_fwd(rng, dtype="bfloat16", B=2, H=2, SQ=50, SK=150, D=64, engine=ONE_WG, **opts)


def test_inference_without_stats(rng):
    run_fwd(rng, dtype="float16", B=1, H=1, SQ=33, SK=140, D=64, stats=False, causal=True, engine=ONE_WG)


def test_misaligned_pointer_takes_the_element_copy_kernel(rng):
    """Views one element into their buffers: the pointers are not 16-byte aligned at execute, so the plan runs
    attention_tc_fwd's element-copy kernel (its fallback) and still answers right."""
    run_fwd(rng, dtype="float16", layout="bhsd_off1", B=1, H=2, SQ=19, SK=70, D=64, causal=True, engine=ONE_WG)


@pytest.mark.parametrize("dtype,D,DV,why,status", [
    ("float32", 64, 64, "FP16 or all three BF16", S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE),
    ("bfloat16", 32, 32, "head dim 32", S.CUDNN_STATUS_NOT_SUPPORTED),
    ("float16", 64, 96, "V head dim 96", S.CUDNN_STATUS_NOT_SUPPORTED),
    ("bfloat16", 256, 256, "64 or 128", S.CUDNN_STATUS_NOT_SUPPORTED)])
def test_refused_with_a_reason(dtype, D, DV, why, status):
    g = fwd_graph(dtype, D, DV)
    g.check_support()
    names = [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]
    assert not any(n.startswith(WG) for n in names), names
    assert names, "another attention engine still plans it"
    st, reason = api.check_support(g._ir, WG, g._ctx())
    assert int(st) == int(status) and why in reason, (st, reason)


def test_dropout_and_unaligned_rows_refused_with_a_reason(rng):
    g = fwd_graph("bfloat16", 64, dropout=True)
    st, reason = api.check_support(g._ir, WG, g._ctx())
    assert int(st) == int(S.CUDNN_STATUS_NOT_SUPPORTED) and "dropout" in reason, reason
    g = graph("bfloat16")
    q = g.tensor(name="q", dim=[1, 1, 8, 64], stride=[8 * 68, 8 * 68, 68, 1])     # rows of 68: 136 bytes
    k = g.tensor(name="k", dim=[1, 1, 8, 64], stride=[512, 512, 64, 1])
    v = g.tensor(name="v", dim=[1, 1, 8, 64], stride=[512, 512, 64, 1])
    o, _ = g.sdpa(q, k, v, generate_stats=False, name="attn", attn_scale=0.5)
    o.set_output(True)
    g.validate()
    g.build_operation_graph()
    st, reason = api.check_support(g._ir, WG, g._ctx())
    assert int(st) == int(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT) and "16-byte" in reason, reason


def test_configs_fit():
    for d, dv in ((64, 64), (128, 128), (128, 64), (64, 128)):
        cs = wg_configs(("bfloat16",) * 3, d, dv)
        assert cs, (d, dv)
        for c in cs:
            assert wg_smem_bytes(c, d, dv) <= 227 * 1024
            assert acc_regs(c, dv) + 48 <= min(255, 65536 // c.THREADS)
    assert WgAttnConfig(3, 64) in wg_configs(("float16",) * 3, 64, 64)
    ok, why = wg_check(("bfloat16",) * 3, 128, 128, WgAttnConfig(3, 128))
    assert not ok and "registers" in why
    assert wg_smem_bytes(WgAttnConfig(2, 128), 128, 128) == 2 * (128 * 128 + 2 * 128 * 128 * 2) + 1024


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,D,opts", [
    ("bfloat16", 128, dict(causal=True)),
    ("float16", 64, dict(padding=([777, 300], [777, 512]), causal_br=True)),
    ("bfloat16", 64, dict(bias_shape=(1, 4, 777, 777), alibi=True)),
    ("float16", 128, dict(scale_mode="device_tensor")),
    ("bfloat16", 128, dict(left=64, right=0, alignment=cudnn.diagonal_alignment.TOP_LEFT)),
], ids=["bf16_d128_causal", "f16_d64_padding_br", "bf16_d64_bias_alibi", "f16_d128_scale_tensor", "bf16_d128_band"])
def test_every_plan_real_shapes(rng, dtype, D, opts):
    """Real shapes (lengths that are no tile multiple), every attention_wgmma_fwd plan, on the GPU."""
    run_fwd(rng, dtype=dtype, layout="bshd", B=2, H=4, SQ=777, SK=777, D=D, scale=D ** -0.5, engine=WG, **opts)
