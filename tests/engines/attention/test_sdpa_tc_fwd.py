"""attention_tc_fwd (mma.sync flash attention) through pygraph: the heuristic's pick for FP16 / BF16 with
head dims multiples of 16, every plan of it against the float64 oracle over the options it claims (layouts,
GQA, D_qk != D_v, lengths that are not tile multiples, masks, padding, bias, ALiBi, dropout, no Stats),
and the problems it refuses, with their reasons (those run on attention_flash_fwd)."""
import pytest

import ncudnn as cudnn
from fwd_runner import run_fwd
from ncudnn.engines import api
from ncudnn.kernels.attention.tc_fwd import TcAttnConfig, tc_check, tc_configs, tc_smem_bytes
from ncudnn.types import cudnnStatus_t as S
from sdpa_util import fwd_graph

TC = "attention_tc_fwd"


@pytest.mark.parametrize("dtype,D,S", [("bfloat16", 128, 4096), ("float16", 64, 512), ("bfloat16", 64, 2048),
                                       ("bfloat16", 96, 2048), ("float16", 32, 1024)])
def test_heuristic_picks_tensor_cores(rng, dtype, D, S):
    """At the lengths attention is run at (plans built, not run: no simulated launch); head dims 64 / 128 go to
    attention_wgmma_fwd on sm_90, so there it is deselected."""
    g = fwd_graph(dtype, D, SQ=S, SK=S, deselect=("attention_wgmma_fwd",) if D in (64, 128) else ())
    g.check_support()
    g.build_plans()
    name = g.get_plan_name_at_index(g.get_selected_plan_index())
    assert name.startswith(TC + "("), name
    notes = [str(n) for n in g.get_numerical_notes_for_plan_at_index(g.get_selected_plan_index())]
    assert any("TENSOR_CORE" in n for n in notes), notes


@pytest.mark.parametrize("dtype,layout", [("bfloat16", "bhsd"), ("float16", "bshd"), ("bfloat16", "bs3hd")])
def test_every_plan_layouts(rng, dtype, layout):
    sk = 19 if layout == "bs3hd" else 37          # interleaved QKV: one sequence length
    assert run_fwd(rng, dtype=dtype, layout=layout, B=2, H=2, SQ=19, SK=sk, D=16, engine=TC) >= 2


@pytest.mark.parametrize("layout,dtype", [("bhsd_pad4", "bfloat16"), ("bhsd_off1", "float16")],
                         ids=["rows_not_16B", "pointer_not_16B"])
def test_element_copy_paths(rng, layout, dtype):
    """Rows of D + 4 values (the plan takes the element-copy kernel) and views one element into their buffers
    (the cp.async plan's pointers are not 16-byte aligned at execute: its element-copy twin runs)."""
    run_fwd(rng, dtype=dtype, layout=layout, B=1, H=2, SQ=19, SK=23, D=16, causal=True, engine=TC + "(BLOCK_SIZE=128")


def test_copy_mode_from_strides():
    """The plan's kernel copies with cp.async only when every Q / K / V row is 16-byte aligned."""
    from ncudnn.engines.attention.tc_fwd import rows_aligned

    class T:
        def __init__(self, dims, strides):
            self.dims, self.strides = dims, strides

    class N:
        def __init__(self, st):
            self.inputs = {p: T([2, 4, 64, 64], st) for p in "QKV"}
    assert rows_aligned(N([16384, 4096, 64, 1]))
    assert rows_aligned(N([64 * 12 * 64, 64, 12 * 64, 1]))        # BSHD
    assert not rows_aligned(N([16384, 4096, 68, 1]))              # rows of 68: 136 bytes
    assert not rows_aligned(N([16384, 4096, 1, 64]))              # head-dim stride 64


def test_gqa_head_dims_differ(rng):
    run_fwd(rng, dtype="float16", B=1, H=4, HK=2, SQ=17, SK=21, D=32, DV=16, engine=TC)


@pytest.mark.parametrize("opts", [dict(causal=True), dict(causal_br=True), dict(padding=([13, 4], [9, 21])),
                                  dict(bias_shape=(1, 2, 18, 21)), dict(alibi=True, causal=True),
                                  dict(left=5, right=2, alignment=cudnn.diagonal_alignment.TOP_LEFT),
                                  dict(dropout=(0.25, 11, 3)), dict(scale_mode="device_tensor")],
                         ids=["causal", "causal_br", "padding", "bias", "alibi", "band", "dropout", "scale_tensor"])
def test_options(rng, opts):
    # dropout: one plan, 64 threads (Philox per score in 256 simulated threads takes minutes)
    engine = TC + "(BLOCK_SIZE=64" if "dropout" in opts else TC
    run_fwd(rng, dtype="bfloat16", B=2, H=2, SQ=18, SK=21, D=16, engine=engine, **opts)


def test_inference_without_stats(rng):
    run_fwd(rng, dtype="float16", B=1, H=1, SQ=33, SK=40, D=16, stats=False, causal=True, engine=TC)


@pytest.mark.parametrize("dtype,D,DV,why", [("float32", 64, 64, "FP16 or all three BF16"),
                                             ("bfloat16", 24, 24, "head dim 24"),
                                             ("float16", 64, 8, "V head dim 8"),
                                             ("bfloat16", 256, 256, "up to 128")])
def test_refused_with_a_reason(rng, dtype, D, DV, why):
    g = fwd_graph(dtype, D, DV)
    g.check_support()
    names = [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]
    assert not any(n.startswith(TC) for n in names), names
    assert names, "attention_flash_fwd still plans it"
    st, reason = api.check_support(g._ir, TC, g._ctx())
    assert int(st) != 0 and why in reason, reason
    want = S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE if dtype == "float32" else S.CUDNN_STATUS_NOT_SUPPORTED
    assert int(st) == int(want), (st, reason)


def test_configs_fit_the_shared_memory():
    for d, dv in ((16, 16), (64, 64), (128, 128), (128, 64), (32, 128)):
        cs = tc_configs(("bfloat16",) * 3, d, dv)
        assert cs, (d, dv)
        for c in cs:
            assert tc_smem_bytes(c, d, dv) <= 227 * 1024
            assert dv // 2 + c.BLOCK_N // 2 + d // 4 <= 128
    ok, why = tc_check(("bfloat16",) * 3, 128, 128, TcAttnConfig(8, 128))
    assert not ok and "registers" in why
    assert tc_smem_bytes(TcAttnConfig(4, 64), 128, 128) == 2 * (64 * 136 + 2 * 64 * 136 * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,D,opts", [
    ("bfloat16", 128, dict(causal=True)),
    ("float16", 64, dict(padding=([777, 300], [777, 512]), causal_br=True)),
    ("bfloat16", 64, dict(bias_shape=(1, 4, 777, 777), alibi=True)),
    ("float16", 128, dict(dropout=(0.1, 20261204, 7), scale_mode="device_tensor")),
    ("bfloat16", 96, dict(left=64, right=0, alignment=cudnn.diagonal_alignment.TOP_LEFT)),
], ids=["bf16_d128_causal", "f16_d64_padding_br", "bf16_d64_bias_alibi", "f16_d128_dropout", "bf16_d96_band"])
def test_every_plan_real_shapes(rng, dtype, D, opts):
    """Real shapes (lengths that are no tile multiple), every attention_tc_fwd plan, on the GPU."""
    run_fwd(rng, dtype=dtype, layout="bshd", B=2, H=4, SQ=777, SK=777, D=D, scale=D ** -0.5, engine=TC, **opts)
