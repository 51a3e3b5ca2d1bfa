"""``cudnn.experimental``: the names cudnn-frontend keeps there that have a meaning here. Its
``ops.scaled_dot_product_attention`` (BHSD, torch.nn.functional-style) against a float64 oracle, its
refusals (the frontend's, and autograd), and the graph kept per call signature; ``moe_grouped_matmul`` is
absent (ncudnn has no MoE grouped matmul), not stubbed."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.experimental.ops import sdpa as sdpa_module
from ncudnn.testing import assert_close, random
from ncudnn.types import cudnnStatus_t as S

from fe_oracle import has_engine

pytestmark = pytest.mark.skipif(not has_engine("sdpa_fwd"), reason="no attention engine registered")
SDPA = cudnn.experimental.ops.scaled_dot_product_attention


def oracle(q, k, v, scale, causal=False, seq_q=None, seq_kv=None, left=None):
    """float64 attention, K/V heads repeated for grouped-query attention; padded rows are zero."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    sq, skv = q.shape[2], k.shape[2]
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    keep = np.ones((q.shape[0], 1, sq, skv), bool)
    if causal:
        keep &= j <= i
    if left is not None:
        keep &= j > i - left
    if seq_q is not None:
        keep &= (i < seq_q.reshape(-1, 1, 1, 1)) & (j < seq_kv.reshape(-1, 1, 1, 1))
    s = np.where(keep, s, -np.inf)
    m = np.max(s, -1, keepdims=True)
    p = np.where(keep, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
    den = p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", np.divide(p, den, out=np.zeros_like(p), where=den > 0), v)


def qkv(rng, b=1, hq=2, hk=2, sq=5, skv=6, d=8, dv=8):
    return random(rng, [b, hq, sq, d]), random(rng, [b, hk, skv, d]), random(rng, [b, hk, skv, dv])


def dev(*arrays):
    return [cuda.to_device(a) for a in arrays]


def test_namespace_holds_only_what_runs_here():
    assert cudnn.experimental.ops.__all__ == ["scaled_dot_product_attention"]
    assert not hasattr(cudnn.experimental.ops, "moe_grouped_matmul")
    assert not hasattr(cudnn.experimental, "moe_grouped_matmul")


@pytest.mark.parametrize("causal,scale,gqa", [(False, None, False), (True, 0.3, False), (True, None, True)])
def test_matches_the_oracle(rng, causal, scale, gqa):
    q, k, v = qkv(rng, hq=2, hk=1 if gqa else 2, dv=16)
    o = SDPA(*dev(q, k, v), is_causal=causal, scale=scale, enable_gqa=gqa)
    assert tuple(o.shape) == (1, 2, 5, 16)
    assert_close(o.copy_to_host(), oracle(q, k, v, scale if scale is not None else 8 ** -0.5, causal), "float32")


def test_band_and_padding_extensions(rng):
    q, k, v = qkv(rng, b=2, sq=6, skv=6)
    seq_q, seq_kv = np.array([6, 4], np.int32).reshape(2, 1, 1, 1), np.array([5, 3], np.int32).reshape(2, 1, 1, 1)
    o = SDPA(*dev(q, k, v), is_causal=True, seq_len_q=cuda.to_device(seq_q), seq_len_kv=cuda.to_device(seq_kv))
    ref = oracle(q, k, v, 8 ** -0.5, causal=True, seq_q=seq_q, seq_kv=seq_kv)
    got = o.copy_to_host()
    for b, n in enumerate(seq_q.reshape(-1)):  # rows past a sequence's length are padding: not compared
        assert_close(got[b, :, :n], ref[b, :, :n], "float32")
    o = SDPA(*dev(q, k, v), left_bound=2, right_bound=0)
    assert_close(o.copy_to_host(), oracle(q, k, v, 8 ** -0.5, causal=True, left=2), "float32")


def test_one_graph_per_signature(rng):
    sdpa_module._GRAPHS.clear()
    q, k, v = qkv(rng)
    SDPA(*dev(q, k, v))
    SDPA(*dev(*qkv(rng)))
    assert len(sdpa_module._GRAPHS) == 1
    SDPA(*dev(q, k, v), is_causal=True)
    SDPA(*dev(*qkv(rng, sq=3)))
    assert len(sdpa_module._GRAPHS) == 3


@pytest.mark.parametrize("kwargs,status,word", [
    ({"attn_mask": "mask"}, S.CUDNN_STATUS_NOT_SUPPORTED, "attn_mask"),
    ({"dropout_p": 0.1}, S.CUDNN_STATUS_NOT_SUPPORTED, "dropout_p"),
    ({"cumulative_seq_len_q": "offsets"}, S.CUDNN_STATUS_NOT_SUPPORTED, "cumulative_seq_len_q"),
    ({"diagonal_alignment": 2}, S.CUDNN_STATUS_BAD_PARAM, "diagonal_alignment"),
])
def test_refusals_name_the_argument(rng, kwargs, status, word):
    with pytest.raises(cudnn.CudnnError) as e:
        SDPA(*dev(*qkv(rng)), **kwargs)
    assert e.value.status == status and word in str(e.value)
    # the builtin the frontend raises: RuntimeError (its NotImplementedError is one) or ValueError
    assert isinstance(e.value, RuntimeError if status == S.CUDNN_STATUS_NOT_SUPPORTED else ValueError)


def test_head_mismatch_needs_enable_gqa_and_rank_four(rng):
    q, k, v = qkv(rng, hq=2, hk=1)
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="enable_gqa"):
        SDPA(*dev(q, k, v))
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="query has dims"):
        SDPA(*dev(q[0], k, v))
