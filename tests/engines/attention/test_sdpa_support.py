"""What the attention engines and the SDPA node refuse, and how: NOT_SUPPORTED naming the option for
what no engine runs yet (a dropout seed in device memory, head dims, FP8 I/O, a key-broadcast dBias), BAD_PARAM naming the field
for graphs cudnn-frontend itself rejects (conflicting masks, padding without lengths, bad bias dims)."""
import numpy as np
import pytest

import ncudnn as cudnn
from ncudnn.engines.device import H200
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnStatus_t as S
from sdpa_util import graph, int_tensor

A, FB = cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK


def _qkv(g, B=1, H=2, SQ=4, SK=5, D=8, DV=None):
    DV = D if DV is None else DV
    q = g.tensor(name="q", dim=[B, H, SQ, D], stride=[H * SQ * D, SQ * D, D, 1])
    k = g.tensor(name="k", dim=[B, H, SK, D], stride=[H * SK * D, SK * D, D, 1])
    v = g.tensor(name="v", dim=[B, H, SK, DV], stride=[H * SK * DV, SK * DV, DV, 1])
    return q, k, v


def _plan(g):
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([A, FB])
    g.check_support()


def _refused(g, cls, status, *words):
    with pytest.raises(cls) as e:
        _plan(g)
    assert e.value.status == status, str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_dropout_seed_in_device_memory_not_supported():
    g = graph("bfloat16")
    q, k, v = _qkv(g)
    seed = g.tensor(name="seed", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=cudnn.data_type.INT64)
    off = g.tensor(name="off", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                   data_type=cudnn.data_type.INT64)
    g.sdpa(q, k, v, generate_stats=False, dropout=(0.1, seed, off), name="att")[0].set_output(True)
    _refused(g, cudnn.cudnnGraphNotSupportedError, S.CUDNN_STATUS_NOT_SUPPORTED, "seed", "device memory", "att")


@pytest.mark.parametrize("D,DV", [(12, 8), (8, 20), (264, 8)])
def test_head_dims_not_supported(D, DV):
    g = graph("float16")
    q, k, v = _qkv(g, D=D, DV=DV)
    g.sdpa(q, k, v, generate_stats=False, name="att")[0].set_output(True)
    _refused(g, cudnn.cudnnGraphNotSupportedError, S.CUDNN_STATUS_NOT_SUPPORTED, "head dim")


def test_fp8_io_not_supported():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    q, k, v = _qkv(g)
    g.sdpa(q, k, v, generate_stats=False, name="att")[0].set_output(True).set_data_type(cudnn.data_type.HALF)
    _refused(g, cudnn.cudnnGraphNotSupportedError, S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, "FP8")


def test_dbias_broadcast_over_keys_not_supported():
    g = graph("float32")
    q, k, v = _qkv(g)
    o = g.tensor(name="o", dim=[1, 2, 4, 8], stride=[64, 32, 8, 1])
    do = g.tensor(name="do", dim=[1, 2, 4, 8], stride=[64, 32, 8, 1])
    st = g.tensor(name="st", dim=[1, 2, 4, 1], stride=[8, 4, 1, 1], data_type=cudnn.data_type.FLOAT)
    bias = g.tensor(name="bias", dim=[1, 1, 4, 1], stride=[4, 4, 1, 1])
    db = g.tensor(name="dbias", dim=[1, 1, 4, 1], stride=[4, 4, 1, 1])
    for t in g.sdpa_backward(q, k, v, o, do, st, bias=bias, dBias=db, name="attb"):
        t.set_output(True)
    _refused(g, cudnn.cudnnGraphNotSupportedError, S.CUDNN_STATUS_NOT_SUPPORTED, "DBIAS")


@pytest.mark.parametrize("kw,word", [
    (dict(use_causal_mask=True, use_causal_mask_bottom_right=True), "use_causal_mask"),
    (dict(use_causal_mask=True, diagonal_band_right_bound=2), "right_bound"),
    (dict(sliding_window_length=2, diagonal_band_left_bound=2), "sliding_window_length"),
    (dict(diagonal_band_left_bound=0), "left_bound"),
    (dict(diagonal_band_right_bound=-1), "right_bound"),
    (dict(use_padding_mask=True), "padding_mask"),
])
def test_bad_mask_options(kw, word):
    g = graph("float16")
    q, k, v = _qkv(g)
    g.sdpa(q, k, v, generate_stats=False, name="att", **kw)[0].set_output(True)
    _refused(g, cudnn.cudnnGraphBadParamError, S.CUDNN_STATUS_BAD_PARAM, word)


def test_seq_len_without_padding_mask():
    g = graph("float16")
    q, k, v = _qkv(g, B=2)
    tq, _ = int_tensor(g, "lq", [4, 2])
    tk, _ = int_tensor(g, "lk", [5, 1])
    g.sdpa(q, k, v, generate_stats=False, seq_len_q=tq, seq_len_kv=tk, name="att")[0].set_output(True)
    _refused(g, cudnn.cudnnGraphBadParamError, S.CUDNN_STATUS_BAD_PARAM, "padding")


def test_bias_dims_mismatch():
    g = graph("float16")
    q, k, v = _qkv(g)
    bias = g.tensor(name="bias", dim=[1, 2, 3, 5], stride=[30, 15, 5, 1])
    g.sdpa(q, k, v, generate_stats=False, bias=bias, name="att")[0].set_output(True)
    _refused(g, cudnn.cudnnGraphBadParamError, S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "BIAS")


def test_paged_attention_refused_at_validate():
    g = graph("bfloat16")
    q, k, v = _qkv(g)
    g.sdpa(q, k, v, generate_stats=False, paged_attention_max_seq_len_kv=16, name="att")[0].set_output(True)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.validate()
    assert "paged_attention_max_seq_len_kv" in str(e.value)


def test_engine_configs_and_knobs():
    """Every candidate the heuristics rank is a config keep() accepts; the autotuner's space is larger."""
    from ncudnn.engines import registry
    from ncudnn.engines.base import BuildContext
    g = graph("bfloat16")
    q, k, v = _qkv(g, D=128)
    g.sdpa(q, k, v, generate_stats=True, name="att")[0].set_output(True)
    g.validate()
    from ncudnn.ir.partition import partition
    sub = partition(g.ir)[0][0]
    for name in ("attention_flash_fwd",):
        eng = registry.by_name(name)
        ctx = BuildContext(simulator=True)
        cands = eng.candidates(sub, ctx)
        assert cands and cands[0] == eng.default_config(sub)
        assert all(eng.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS for c in cands)
        assert len(eng.configs(sub, ctx)) > len(cands)
        bad = cands[0].with_knob(K.CUDNN_KNOB_TYPE_TILE_M, 64).with_knob(K.CUDNN_KNOB_TYPE_TILE_N, 64)
        st, why = eng.keep(sub, bad, ctx)
        assert st != S.CUDNN_STATUS_SUCCESS and "shared memory" in why
        assert np.isfinite(eng.cost(sub, cands[0], H200)) and eng.cost(sub, cands[0], H200) > 0
