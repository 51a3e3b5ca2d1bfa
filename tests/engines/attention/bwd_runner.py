"""Builds, runs and checks one pygraph SDPA backward (every plan, poisoned dQ / dK / dV / dBias, guards)
against the float64 analytic backward of ncudnn.reference.attention; O and Stats come from the float64
forward (rounded to the I/O type), as a training step hands them over."""
import numpy as np
from numba import cuda

import ncudnn as cudnn
from ncudnn.reference.attention import sdpa_backward, sdpa_forward
from ncudnn.testing import assert_close

from fwd_runner import options
from sdpa_util import DTYPES, TOL_BWD, DevBuf, graph, out_buffer, plans, qkv_buffers, rounded, strides_of, workspace

F = cudnn.data_type.FLOAT


def _input(dtype, dims, strides, values):
    buf = DevBuf(1 + sum((d - 1) * s for d, s in zip(dims, strides)), dtype)
    buf.place(0, dims, strides, values)
    return buf.upload()


def run_bwd(rng, dtype="float32", layout="bhsd", B=2, H=2, HK=None, SQ=5, SK=7, D=8, DV=None, every=True,
            dbias=False, deterministic=False, engine=None, **opts):
    """Run every plan of the backward graph (``engine``: only that engine's, or the plans whose names begin with
    it; at least one); returns the number of plans checked."""
    HK = H if HK is None else HK
    DV = D if DV is None else DV
    g = graph(dtype)
    vals, bufs, st = qkv_buffers(rng, layout, dtype, B, H, HK, SQ, SK, D, DV)
    q = g.tensor(name="q", dim=[B, H, SQ, D], stride=st["q"])
    k = g.tensor(name="k", dim=[B, HK, SK, D], stride=st["k"])
    v = g.tensor(name="v", dim=[B, HK, SK, DV], stride=st["v"])
    kw, pack, ref, scale = options(g, rng, B, H, SQ, SK, dtype, **opts)
    o_st = strides_of("bshd" if layout == "bs3hd" else layout.partition("_")[0], B, H, SQ, DV)
    ro, rs = sdpa_forward(vals["q"], vals["k"], vals["v"], scale, **ref)
    ro = ro.astype(DTYPES[dtype][0]).astype(np.float64)
    rdo = rounded(rng, (B, H, SQ, DV), dtype)
    o = g.tensor(name="o", dim=[B, H, SQ, DV], stride=o_st)
    do = g.tensor(name="dO", dim=[B, H, SQ, DV], stride=o_st)
    stats = g.tensor(name="stats", dim=[B, H, SQ, 1], stride=[H * SQ, SQ, 1, 1], data_type=F)
    db = None
    if dbias:
        shape = pack_bias_dims(kw)
        db = g.tensor(name="dBias", dim=shape, stride=[int(np.prod(shape[i + 1:])) for i in range(4)])
        kw["dBias"] = db
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="attn_bwd",
                                 use_deterministic_algorithm=deterministic, **kw)
    for t, dims, s in ((dq, [B, H, SQ, D], st["q"]), (dk, [B, HK, SK, D], st["k"]), (dv, [B, HK, SK, DV], st["v"])):
        t.set_output(True).set_dim(dims).set_stride(s)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    rs_in = np.where(np.isfinite(rs), rs, 0.0)       # a row with no key: any finite statistic
    refs = sdpa_backward(vals["q"], vals["k"], vals["v"], ro, rdo, rs_in, scale, return_dbias=dbias, **ref)
    ins = {o: _input(dtype, [B, H, SQ, DV], o_st, ro), do: _input(dtype, [B, H, SQ, DV], o_st, rdo),
           stats: _input("float32", [B, H, SQ, 1], [H * SQ, SQ, 1, 1], rs_in)}
    idx = plans(g, every)
    if engine is not None:
        prefix = engine if "(" in engine else engine + "("
        idx = [i for i in idx if g.get_plan_name_at_index(i).startswith(prefix)]
        assert idx, f"no {engine} plan: {[g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]}"
    for i in idx:
        outs = {"dQ": (dq, out_buffer([B, H, SQ, D], st["q"], dtype), refs[0]),
                "dK": (dk, out_buffer([B, HK, SK, D], st["k"], dtype), refs[1]),
                "dV": (dv, out_buffer([B, HK, SK, DV], st["v"], dtype), refs[2])}
        if dbias:
            shape = db.get_dim()
            outs["dBias"] = (db, out_buffer(shape, db.get_stride(), dtype), refs[3])
        p = dict(pack)
        p.update({q: bufs["q"][0].view(bufs["q"][1]), k: bufs["k"][0].view(bufs["k"][1]),
                  v: bufs["v"][0].view(bufs["v"][1])})
        p.update({t: b.view() for t, b in ins.items()})
        p.update({t: b.view() for t, b, _ in outs.values()})
        g.execute_plan_at_index(p, workspace(g, i), i)
        cuda.synchronize()
        name = g.get_plan_name_at_index(i)
        for port, (_, b, r) in outs.items():
            _assert_grad_close(b.read(), r, refs[2], TOL_BWD[dtype], f"{port} ({name})")
            b.check_guard(f"{port} ({name})")
    return len(idx)


def _assert_grad_close(got, ref, dv_ref, tol, name):
    """assert_close, except for a gradient that is zero in exact arithmetic (e.g. dQ of a row whose
    softmax is one-hot: dS = P (dP - rowsum(dO * O)) cancels): its float64 reference is roundoff, so
    its error is measured against the size of dV (P^T dO), which never cancels."""
    r, scale = np.abs(np.asarray(ref, np.float64)), np.max(np.abs(np.asarray(dv_ref, np.float64)))
    if scale > 0 and np.max(r) <= 1e-9 * scale:
        worst = np.max(np.abs(np.asarray(got, np.float64)))
        assert worst <= tol * scale, f"{name}: a zero gradient came back as {worst:.3e} (dV scale {scale:.3e})"
        return
    assert_close(got, ref, tol, name=name)


def pack_bias_dims(kw):
    return kw["bias"].get_dim()
