"""Builds, runs and checks one pygraph SDPA forward (every plan, poisoned outputs, guards) against the
float64 oracle; the option names are cudnn-frontend's."""
import numpy as np
from numba import cuda

import ncudnn as cudnn
from ncudnn.reference.attention import sdpa_forward
from ncudnn.reference.rng import rng_generate
from ncudnn.types import cudnnRngDistribution_t as RD
from ncudnn.testing import assert_close

from sdpa_util import DTYPES, TOL, graph, int_tensor, out_buffer, plans, qkv_buffers, rounded, strides_of, workspace

F = cudnn.data_type.FLOAT


def options(g, rng, B, H, SQ, SK, dtype, scale=0.3, scale_mode="value", bias_shape=None, padding=None,
            causal=False, causal_br=False, left=None, right=None, alignment=None, alibi=False, window=None,
            dropout=None):
    """(sdpa keyword arguments, pack entries, oracle keyword arguments, oracle scale)."""
    kw, pack, ref = {}, {}, {}
    if scale_mode == "value":
        kw["attn_scale"] = scale
    elif scale_mode == "by_value_tensor":
        t = g.tensor(name="scale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True, data_type=F)
        kw["attn_scale"] = t
        pack[t] = np.full(1, scale, np.float32)
    elif scale_mode == "device_tensor":
        t = g.tensor(name="scale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=F)
        kw["attn_scale"] = t
        pack[t] = cuda.to_device(np.full(1, scale, np.float32))
    elif scale_mode == "none":
        scale = 1.0
    if bias_shape is not None:
        bv = rounded(rng, bias_shape, dtype)
        st = [int(np.prod(bias_shape[i + 1:])) for i in range(4)]
        t = g.tensor(name="bias", dim=list(bias_shape), stride=st)
        kw["bias"] = t
        pack[t] = cuda.to_device(bv.astype(DTYPES[dtype][0]).view(np.uint16) if dtype == "bfloat16"
                                 else bv.astype(DTYPES[dtype][0]))
        ref["bias"] = bv
    if padding is not None:
        lq, lk = padding
        tq, aq = int_tensor(g, "seq_q", lq)
        tk, ak = int_tensor(g, "seq_kv", lk)
        kw.update(use_padding_mask=True, seq_len_q=tq, seq_len_kv=tk)
        pack[tq], pack[tk] = aq, ak
        ref.update(seq_len_q=np.asarray(lq), seq_len_kv=np.asarray(lk))
    if causal:
        kw["use_causal_mask"] = True
        ref["causal"] = True
    if causal_br:
        kw["use_causal_mask_bottom_right"] = True
        ref.update(causal=True, diagonal_alignment="bottom_right")
    if alignment is not None:
        kw["diagonal_alignment"] = alignment
        ref["diagonal_alignment"] = "bottom_right" if alignment == cudnn.diagonal_alignment.BOTTOM_RIGHT \
            else "top_left"
    if left is not None:
        kw["diagonal_band_left_bound"] = left
        ref["sliding_window_length"] = left
    if window is not None:
        kw["sliding_window_length"] = window
        ref["sliding_window_length"] = window
    if right is not None:
        kw["diagonal_band_right_bound"] = right
        ref["right_bound"] = right
    if alibi:
        kw["use_alibi_mask"] = True
        ref["alibi"] = True
    if dropout is not None:
        p, seed, offset = dropout
        ts, to = (g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                           data_type=cudnn.data_type.INT64) for n in ("seed", "offset"))
        kw["dropout"] = (p, ts, to)
        pack[ts], pack[to] = np.full(1, seed, np.int64), np.full(1, offset, np.int64)
        ref.update(dropout_mask=rng_generate((B, H, SQ, SK), RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI, seed, offset,
                                             bernoulli_probability=1.0 - p), dropout_scale=1.0 / (1.0 - p))
    return kw, pack, ref, scale


def run_fwd(rng, dtype="float32", layout="bhsd", B=2, H=2, HK=None, SQ=5, SK=7, D=8, DV=None, stats=True,
            every=True, engine=None, **opts):
    """Run every plan of the graph (``engine``: only that engine's, or the plans whose names begin with it; at
    least one); returns the number of plans checked."""
    HK = H if HK is None else HK
    DV = D if DV is None else DV
    g = graph(dtype)
    vals, bufs, st = qkv_buffers(rng, layout, dtype, B, H, HK, SQ, SK, D, DV)
    q = g.tensor(name="q", dim=[B, H, SQ, D], stride=st["q"])
    k = g.tensor(name="k", dim=[B, HK, SK, D], stride=st["k"])
    v = g.tensor(name="v", dim=[B, HK, SK, DV], stride=st["v"])
    kw, pack, ref, scale = options(g, rng, B, H, SQ, SK, dtype, **opts)
    o, s = g.sdpa(q, k, v, generate_stats=stats, name="attn", **kw)
    o_st = strides_of("bshd" if layout == "bs3hd" else layout.partition("_")[0], B, H, SQ, DV)
    o.set_output(True).set_dim([B, H, SQ, DV]).set_stride(o_st)
    if stats:
        s.set_output(True).set_data_type(F)
    else:
        assert s is None
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    ro, rs = sdpa_forward(vals["q"], vals["k"], vals["v"], scale, **ref)
    idx = plans(g, every)
    if engine is not None:
        prefix = engine if "(" in engine else engine + "("       # an engine, or a plan name's beginning
        idx = [i for i in idx if g.get_plan_name_at_index(i).startswith(prefix)]
        assert idx, f"no {engine} plan: {[g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]}"
    for i in idx:
        ob = out_buffer([B, H, SQ, DV], o_st, dtype)
        sb = out_buffer([B, H, SQ, 1], [H * SQ, SQ, 1, 1], "float32") if stats else None
        p = dict(pack)
        p.update({q: bufs["q"][0].view(bufs["q"][1]), k: bufs["k"][0].view(bufs["k"][1]),
                  v: bufs["v"][0].view(bufs["v"][1]), o: ob.view()})
        if stats:
            p[s] = sb.view()
        g.execute_plan_at_index(p, workspace(g, i), i)
        cuda.synchronize()
        name = g.get_plan_name_at_index(i)
        assert_close(ob.read(), ro, TOL[dtype], name=f"O ({name})")
        ob.check_guard(f"O ({name})")
        if stats:
            assert_close(sb.read(), rs, 1e-5 if dtype == "float32" else 1e-4, name=f"Stats ({name})")
            sb.check_guard(f"Stats ({name})")
    return len(idx)
