"""cudnnMultiHeadAttnBackwardData / cudnnMultiHeadAttnBackwardWeights (cudnn_adv.h), lowered as the forward
(mha.py) is, reading what a training forward (reserveSpace given) left in the reserve space: the projected
Q, K, V, the attention output A and the attention's logsumexp statistics (mha_desc.buffer_layout).

BackwardData: g = dout on the valid rows t < devSeqLengthsDQDO[b], 0 on the padding rows (pointwise:
GEN_INDEX, CMP_LT, BINARY_SELECT; kept in the reserve space for BackwardWeights); dA = g @ Wo (a matmul;
dA = g when oProjSize is 0); one SDPA backward node over the per-head views gives dQp, dKp, dVp (kept in
the reserve space); dqueries = dQp @ Wq, dkeys = dKp @ Wk, dvalues = dVp @ Wv (matmuls). As in cuDNN,
the gradient of a residual connection is not added to dqueries (it equals dout).

BackwardWeights (after BackwardData, on the same reserve space): per-batch matmuls into a float32 buffer
(dWq[b] = dQp[b]^T q[b], ..., dWo[b] = g[b]^T A[b]), then a reduction over the batch written into
``dweights`` (weights' layout) with CUDNN_WGRAD_MODE_SET, or added to it with CUDNN_WGRAD_MODE_ADD; the bias
gradients are reductions of dQp / dKp / dVp / g over batch and time.
"""
from ..errors import BadParamError, c_api
from ..handle import get_handle_or_raise
from ..ir import Reduction
from ..ir.ops.matmul import Matmul
from ..ir.ops.sdpa import SdpaBwd
from ..ir.tensor import packed_strides
from ..memory import device_pointer
from ..types import (cudnnDataType_t, cudnnMultiHeadAttnWeightKind_t, cudnnPointwiseMode_t,
                     cudnnReduceTensorOp_t, cudnnWgradMode_t)
from . import lower as L
from ._util import desc_arg, enum_arg, int_array, need_ptr, optional_ptrs, size_arg
from .mha import _run, _space, band_of, geometry, refusals, seq_view
from .mha_desc import AttnDescriptor, SeqDataDescriptor

DT = cudnnDataType_t
PM = cudnnPointwiseMode_t
WK = cudnnMultiHeadAttnWeightKind_t
F32, I32 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_INT32
ADD = cudnnReduceTensorOp_t.CUDNN_REDUCE_TENSOR_ADD


def _weights_size(d, size):
    need = d.weight_elems() * d.itemsize()
    if size_arg(size, "weightSizeInBytes") != need:
        raise BadParamError(f"weightSizeInBytes = {size}, cudnnGetMultiHeadAttnBuffers reports {need}")


def _heads(B, H, T, P):
    return (B, H, T, P), (T * H * P, P, H * P, 1)


def _mask_dout(h, ctx, d, dod, dout, B, tq, dst, seq):
    dims, strides = seq_view(dod)
    dt = d.dataType

    def build(b):
        x = b.raw("dout", dims, strides, dt)
        idx = b.virtual("t", dtype=F32)
        b.pw(PM.CUDNN_POINTWISE_GEN_INDEX, idx, "time_index", X=x, axis=1)
        keep = b.virtual("valid", dtype=DT.CUDNN_DATA_BOOLEAN)
        b.pw(PM.CUDNN_POINTWISE_CMP_LT, keep, "valid", X=idx, B=b.raw("sq", (B, 1, 1), (1, 1, 1), I32))
        g = b.raw("g", dims, packed_strides(dims), dt)
        b.pw(PM.CUDNN_POINTWISE_BINARY_SELECT, g, "mask", X=x, B=b.scalar("zero", 3, F32, 0.0), T=keep)

    _run(h, ctx, ("mha_mask_dout", dims, strides, int(dt)), build, {"dout": dout, "g": dst, "sq": seq})


def _matmul(h, ctx, tag, a, b_, c, ptrs, dt_c=None):
    """One matmul graph: C = A @ B, each (dims, strides, dtype) bound to ``ptrs`` (a, b, c)."""
    def build(b):
        at, bt = b.raw("a", *a), b.raw("b", *b_)
        b.add(Matmul(tag, {"A": at, "B": bt}, {"C": b.raw("c", *c)}))

    _run(h, ctx, ("mha_mm", tag, a, b_, c), build, dict(zip("abc", ptrs)))


@c_api(0)
def cudnnMultiHeadAttnBackwardData(handle, attnDesc, loWinIdx, hiWinIdx, devSeqLengthsDQDO, devSeqLengthsDKDV,
                                   doDesc, dout, dqDesc, dqueries, queries, dkDesc, dkeys, keys, dvDesc, dvalues,
                                   values, weightSizeInBytes, weights, workSpaceSizeInBytes, workSpace,
                                   reserveSpaceSizeInBytes, reserveSpace):
    h = get_handle_or_raise(handle)
    d = desc_arg(attnDesc, AttnDescriptor, "attnDesc")
    dod, dqd = desc_arg(doDesc, SeqDataDescriptor, "doDesc"), desc_arg(dqDesc, SeqDataDescriptor, "dqDesc")
    dkd, dvd = desc_arg(dkDesc, SeqDataDescriptor, "dkDesc"), desc_arg(dvDesc, SeqDataDescriptor, "dvDesc")
    B, tq, tk = geometry(d, dqd, dkd, dvd, dod, ("dqDesc", "dkDesc", "dvDesc", "doDesc"))
    lo, hi = int_array(loWinIdx, tq, "loWinIdx"), int_array(hiWinIdx, tq, "hiWinIdx")
    for p, n in ((devSeqLengthsDQDO, "devSeqLengthsDQDO"), (devSeqLengthsDKDV, "devSeqLengthsDKDV"),
                 (dout, "dout"), (dqueries, "dqueries"), (dkeys, "dkeys"), (dvalues, "dvalues"), (weights, "weights")):
        need_ptr(p, n)
    optional_ptrs(queries=queries, keys=keys, values=values, workSpace=workSpace)
    size_arg(workSpaceSizeInBytes, "workSpaceSizeInBytes")
    _weights_size(d, weightSizeInBytes)
    refusals(d)
    band = band_of(lo, hi, tq, tk)
    lay, total = d.buffer_layout(B, tq, tk)
    rs = _space(reserveSpace, reserveSpaceSizeInBytes, total, "reserveSpace")
    ctx = L.build_context(h, d.mathType)
    H, dt, isz = d.nHeads, d.dataType, d.itemsize()
    pq, pk, pv, co = d.proj()
    blocks, wbase = d.blocks(), device_pointer(weights)
    g = rs + (lay["Y"][0] if d.oProjSize else lay["dA"][0])
    _mask_dout(h, ctx, d, dod, dout, B, tq, g, devSeqLengthsDQDO)
    if d.oProjSize:
        wo = wbase + blocks[WK.CUDNN_MH_ATTN_O_WEIGHTS][0] * isz
        K_ = H * pv
        _matmul(h, ctx, "dA", ((B, tq, co), packed_strides((B, tq, co)), dt), ((1, co, K_), (co * K_, K_, 1), dt),
                ((B, tq, K_), packed_strides((B, tq, K_)), dt), (g, wo, rs + lay["dA"][0]))

    def build(b):
        t = {n: b.raw(n, *_heads(B, H, T, P), dt) for n, T, P in (("q", tq, pq), ("k", tk, pk), ("v", tk, pv),
                                                                   ("o", tq, pv), ("do", tq, pv), ("dq", tq, pq),
                                                                   ("dk", tk, pk), ("dv", tk, pv))}
        stats = b.raw("stats", (B, H, tq, 1), packed_strides((B, H, tq, 1)), F32)
        lens = {p: b.raw(n, (B, 1, 1, 1), (1, 1, 1, 1), I32) for p, n in (("SEQ_LEN_Q", "sq"), ("SEQ_LEN_KV", "skv"))}
        attrs = dict(attn_scale=d.smScaler, padding_mask=True, deterministic=True)
        if band[0] is not None:
            attrs["left_bound"] = band[0]
        if band[1] is not None:
            attrs["right_bound"] = band[1]
        b.add(SdpaBwd("attention_bwd", dict(Q=t["q"], K=t["k"], V=t["v"], O=t["o"], DO=t["do"], STATS=stats, **lens),
                      {"DQ": t["dq"], "DK": t["dk"], "DV": t["dv"]}, F32, **attrs))

    bind = {n: rs + lay[s][0] for n, s in (("q", "Q"), ("k", "K"), ("v", "V"), ("o", "A"), ("do", "dA"),
                                           ("dq", "dQ"), ("dk", "dK"), ("dv", "dV"), ("stats", "STATS"))}
    bind.update(sq=devSeqLengthsDQDO, skv=devSeqLengthsDKDV)
    _run(h, ctx, ("mha_sdpa_bwd", B, tq, tk, H, pq, pv, int(dt), d.smScaler, band, int(d.mathType)), build, bind)
    for slot, sd, ptr, wk, T in (("dQ", dqd, dqueries, WK.CUDNN_MH_ATTN_Q_WEIGHTS, tq),
                                 ("dK", dkd, dkeys, WK.CUDNN_MH_ATTN_K_WEIGHTS, tk),
                                 ("dV", dvd, dvalues, WK.CUDNN_MH_ATTN_V_WEIGHTS, tk)):
        woff, (_, P, C), _ = blocks[wk]
        dims, strides = seq_view(sd)
        N = H * P
        _matmul(h, ctx, "d" + slot, ((B, T, N), packed_strides((B, T, N)), dt), ((1, N, C), (N * C, C, 1), dt),
                (dims, strides, dt), (rs + lay[slot][0], wbase + woff * isz, ptr))


def _reduce_into(h, ctx, tag, src, src_dims, out_dims, dst, add, dt):
    """dweights block (packed ``out_dims``) = [+] sum of ``src`` (float32 or data type) over broadcast axes."""
    def build(b):
        x = b.raw("x", src_dims[0], src_dims[1], src_dims[2])
        y = b.raw("y", out_dims, packed_strides(out_dims), dt)
        if add:
            r = b.virtual("sum", dims=out_dims, dtype=F32)
            b.add(Reduction(tag, {"X": x}, {"Y": r}, mode=ADD))
            prior = b.raw("y:prior", out_dims, packed_strides(out_dims), dt)
            b.pw(PM.CUDNN_POINTWISE_ADD, y, "accumulate", X=r, B=prior)
        else:
            b.add(Reduction(tag, {"X": x}, {"Y": y}, mode=ADD))

    _run(h, ctx, ("mha_wred", tag, src_dims, out_dims, add, int(dt)), build, {"x": src, "y": dst})


@c_api(0)
def cudnnMultiHeadAttnBackwardWeights(handle, attnDesc, addGrad, qDesc, queries, kDesc, keys, vDesc, values, doDesc,
                                      dout, weightSizeInBytes, weights, dweights, workSpaceSizeInBytes, workSpace,
                                      reserveSpaceSizeInBytes, reserveSpace):
    h = get_handle_or_raise(handle)
    d = desc_arg(attnDesc, AttnDescriptor, "attnDesc")
    mode = enum_arg(cudnnWgradMode_t, addGrad, "addGrad")
    qd, kd = desc_arg(qDesc, SeqDataDescriptor, "qDesc"), desc_arg(kDesc, SeqDataDescriptor, "kDesc")
    vd, dod = desc_arg(vDesc, SeqDataDescriptor, "vDesc"), desc_arg(doDesc, SeqDataDescriptor, "doDesc")
    B, tq, tk = geometry(d, qd, kd, vd, dod, ("qDesc", "kDesc", "vDesc", "doDesc"))
    for p, n in ((queries, "queries"), (keys, "keys"), (values, "values"), (dout, "dout"), (weights, "weights"),
                 (dweights, "dweights")):
        need_ptr(p, n)
    optional_ptrs(workSpace=workSpace)
    size_arg(workSpaceSizeInBytes, "workSpaceSizeInBytes")
    _weights_size(d, weightSizeInBytes)
    refusals(d)
    lay, total = d.buffer_layout(B, tq, tk)
    rs = _space(reserveSpace, reserveSpaceSizeInBytes, total, "reserveSpace")
    ctx = L.build_context(h, d.mathType)
    H, dt, isz = d.nHeads, d.dataType, d.itemsize()
    add = mode == cudnnWgradMode_t.CUDNN_WGRAD_MODE_ADD
    _, _, pv, co = d.proj()
    blocks, dbase, G = d.blocks(), device_pointer(dweights), rs + lay["G"][0]
    g = rs + (lay["Y"][0] if d.oProjSize else lay["dA"][0])
    for slot, sd, x, wk, bk, T in (("dQ", qd, queries, WK.CUDNN_MH_ATTN_Q_WEIGHTS, WK.CUDNN_MH_ATTN_Q_BIASES, tq),
                                   ("dK", kd, keys, WK.CUDNN_MH_ATTN_K_WEIGHTS, WK.CUDNN_MH_ATTN_K_BIASES, tk),
                                   ("dV", vd, values, WK.CUDNN_MH_ATTN_V_WEIGHTS, WK.CUDNN_MH_ATTN_V_BIASES, tk)):
        woff, (_, P, C), _ = blocks[wk]
        N = H * P
        dims, strides = seq_view(sd)
        _matmul(h, ctx, "w" + slot, ((B, N, T), (T * N, 1, N), dt), (dims, strides, dt),
                ((B, N, C), packed_strides((B, N, C)), F32), (rs + lay[slot][0], x, G))
        _reduce_into(h, ctx, "sum_" + slot, G, ((B, N, C), packed_strides((B, N, C)), F32), (1, N, C),
                     dbase + woff * isz, add, dt)
        if bk in blocks:
            _reduce_into(h, ctx, "bias_" + slot, rs + lay[slot][0], ((B, T, N), packed_strides((B, T, N)), dt),
                         (1, 1, N), dbase + blocks[bk][0] * isz, add, dt)
    if d.oProjSize:
        K_ = H * pv
        _matmul(h, ctx, "wO", ((B, co, tq), (tq * co, 1, co), dt), ((B, tq, K_), packed_strides((B, tq, K_)), dt),
                ((B, co, K_), packed_strides((B, co, K_)), F32), (g, rs + lay["A"][0], G))
        _reduce_into(h, ctx, "sum_dO", G, ((B, co, K_), packed_strides((B, co, K_)), F32), (1, co, K_),
                     dbase + blocks[WK.CUDNN_MH_ATTN_O_WEIGHTS][0] * isz, add, dt)
        if WK.CUDNN_MH_ATTN_O_BIASES in blocks:
            _reduce_into(h, ctx, "bias_dO", g, ((B, tq, co), packed_strides((B, tq, co)), dt), (1, 1, co),
                         dbase + blocks[WK.CUDNN_MH_ATTN_O_BIASES][0] * isz, add, dt)
