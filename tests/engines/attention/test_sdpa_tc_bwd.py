"""attention_tc_bwd (mma.sync dK/dV and dQ passes) through pygraph: every plan of it against the float64
analytic backward over the options it claims (layouts, GQA, D_qk != D_v, lengths that are not tile multiples,
masks, padding, bias, ALiBi, the scale as a tensor, element copies), and the problems it refuses, with their
reasons (those run on attention_flash_bwd)."""
import pytest

import ncudnn as cudnn
from bwd_runner import run_bwd
from ncudnn.kernels.attention.tc_bwd import TcBwdConfig, tc_bwd_check, tc_bwd_configs, tc_bwd_smem_bytes

TC = "attention_tc_bwd"


@pytest.mark.parametrize("dtype,layout", [("bfloat16", "bhsd"), ("float16", "bshd"), ("bfloat16", "bs3hd")])
def test_every_plan_layouts(rng, dtype, layout):
    sk = 19 if layout == "bs3hd" else 37
    assert run_bwd(rng, dtype=dtype, layout=layout, B=1, H=2, SQ=19, SK=sk, D=16, engine=TC) >= 2


def test_gqa_head_dims_differ(rng):
    run_bwd(rng, dtype="float16", B=1, H=4, HK=2, SQ=17, SK=21, D=32, DV=16, engine=TC + "(BLOCK_SIZE=64")


@pytest.mark.parametrize("opts", [dict(causal=True), dict(causal_br=True), dict(padding=([13, 4], [9, 21])),
                                  dict(bias_shape=(1, 2, 18, 21)), dict(alibi=True, causal=True),
                                  dict(left=5, right=2, alignment=cudnn.diagonal_alignment.TOP_LEFT),
                                  dict(scale_mode="device_tensor")],
                         ids=["causal", "causal_br", "padding", "bias", "alibi", "band", "scale_tensor"])
def test_options(rng, opts):
    run_bwd(rng, dtype="bfloat16", B=2, H=2, SQ=18, SK=21, D=16, engine=TC + "(BLOCK_SIZE=64", **opts)


def test_split_dk_dv_kernels(rng):
    """Head dim 64 with 64-row tiles: dK and dV in a kernel each (split_dkdv), causal, GQA."""
    from ncudnn.kernels.attention.tc_bwd import split_dkdv
    assert split_dkdv(TcBwdConfig(8, 64), 64, 64)
    run_bwd(rng, dtype="bfloat16", B=1, H=2, HK=1, SQ=20, SK=70, D=64, causal_br=True,
            engine=TC + "(BLOCK_SIZE=256, TILE_N=64)")


@pytest.mark.parametrize("layout,dtype", [("bhsd_pad4", "bfloat16"), ("bhsd_off1", "float16")],
                         ids=["rows_not_16B", "pointer_not_16B"])
def test_element_copy_paths(rng, layout, dtype):
    run_bwd(rng, dtype=dtype, layout=layout, B=1, H=2, SQ=19, SK=23, D=16, causal=True, engine=TC + "(BLOCK_SIZE=64")


@pytest.mark.parametrize("opts,why", [(dict(dropout=(0.25, 11, 3)), "dropout"),
                                      (dict(bias_shape=(1, 2, 6, 7), dbias=True), "DBIAS")])
def test_refused_with_a_reason(rng, opts, why):
    """Dropout and the bias gradient run on attention_flash_bwd; the tensor-core engine says why it refused."""
    n = run_bwd(rng, dtype="bfloat16", B=1, H=2, SQ=6, SK=7, D=16, engine="attention_flash_bwd", **opts)
    assert n >= 1
    assert why in _reason(rng, opts)


def _reason(rng, opts):
    """The check_support error of the graph with attention_flash_bwd deselected."""
    from sdpa_util import graph
    from fwd_runner import options
    g = graph("bfloat16")
    q = g.tensor(name="q", dim=[1, 2, 6, 16], stride=[192, 96, 16, 1])
    k = g.tensor(name="k", dim=[1, 2, 7, 16], stride=[224, 112, 16, 1])
    v = g.tensor(name="v", dim=[1, 2, 7, 16], stride=[224, 112, 16, 1])
    o = g.tensor(name="o", dim=[1, 2, 6, 16], stride=[192, 96, 16, 1])
    do = g.tensor(name="do", dim=[1, 2, 6, 16], stride=[192, 96, 16, 1])
    st = g.tensor(name="st", dim=[1, 2, 6, 1], stride=[12, 6, 1, 1], data_type=cudnn.data_type.FLOAT)
    kw, _, _, _ = options(g, rng, 1, 2, 6, 7, "bfloat16", **{k_: v_ for k_, v_ in opts.items() if k_ != "dbias"})
    if opts.get("dbias"):
        kw["dBias"] = g.tensor(name="dbias", dim=[1, 2, 6, 7], stride=[84, 42, 7, 1])
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, st, name="bwd", **kw)
    for t in (dq, dk, dv):
        t.set_output(True)
    g.validate()
    g.build_operation_graph()
    g.deselect_engines(["attention_flash_bwd"])
    g.create_execution_plans([cudnn.heur_mode.A])
    with pytest.raises(Exception) as e:
        g.check_support()
    return str(e.value)


def test_configs_fit():
    for d, dv in ((16, 16), (64, 64), (128, 128), (128, 64), (32, 128)):
        cs = tc_bwd_configs(("bfloat16",) * 3, d, dv)
        assert cs, (d, dv)
        for c in cs:
            assert tc_bwd_smem_bytes(c, d, dv) <= 227 * 1024
    ok, why = tc_bwd_check(("bfloat16",) * 3, 128, 128, TcBwdConfig(4, 64))
    assert not ok and "registers" in why
    ok, why = tc_bwd_check(("float32",) * 3, 64, 64)
    assert not ok and "backward" in why


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,D,opts", [
    ("bfloat16", 128, dict(causal=True)),
    ("float16", 64, dict(padding=([777, 300], [777, 512]), causal_br=True)),
    ("bfloat16", 64, dict(bias_shape=(1, 4, 777, 777), alibi=True)),
    ("bfloat16", 96, dict(left=64, right=0, alignment=cudnn.diagonal_alignment.TOP_LEFT)),
], ids=["bf16_d128_causal", "f16_d64_padding_br", "bf16_d64_bias_alibi", "bf16_d96_band"])
def test_every_plan_real_shapes(rng, dtype, D, opts):
    run_bwd(rng, dtype=dtype, layout="bshd", B=2, H=4, SQ=777, SK=777, D=D, scale=D ** -0.5, engine=TC, **opts)
