"""cudnnMultiHeadAttnForward (cudnn_adv.h), lowered onto the GEMM, attention and pointwise engines.

With q [B, Tq, Cq], k [B, Tk, Ck], v [B, Tk, Cv] the sequence data (beam 1; any axes order), H heads and the
weights of mha_desc.py's layout, four kinds of graph run through ncudnn.engines.api, their intermediates in
the work space (inference: reserveSpace NULL) or the reserve space (training: the attention's logsumexp
statistics are kept there too, for the backward calls of mha_bwd.py):

1. projections, one matmul each over all heads: Qp [B, Tq, H*Pq] = q @ Wq^T (+ bq), likewise Kp, Vp;
2. one SDPA node over the per-head views Qp [B, H, Tq, Pq] (strides (Tq*H*Pq, Pq, H*Pq, 1)), Kp, Vp:
   softmax(smScaler * Q K^T) V with the padding mask of devSeqLengthsQO / devSeqLengthsKV and the band mask
   the attention window gives, into A [B, Tq, H*Pv] (padding rows 0);
3. the output projection Y [B, Tq, Co] = A @ Wo^T (+ bo) (skipped when oProjSize is 0: Y = A);
4. a pointwise graph: out = (Y + residuals) on rows t < devSeqLengthsQO[b], paddingFill (0 when oDesc has
   none) on the padding rows (GEN_INDEX over the time axis, compared with the per-batch lengths).

Windows: loWinIdx[i] / hiWinIdx[i] keep keys lo <= j < hi for query i. The window must be a diagonal band
the attention engines express (top-left aligned: hi[i] = i + 1 + r clipped to Tk, lo[i] = i + 1 - l clipped
to 0, or the whole key range); any other window is NOT_SUPPORTED. Refused as NOT_SUPPORTED too: dropout > 0
(the engine's dropout mask is not cuDNN's), beam sizes above 1, zero Q/K/V projection sizes, DOUBLE data,
currIdx >= 0 (the single-time-step inference mode).
"""
from ..errors import BadParamError, NotSupportedError, c_api
from ..handle import get_handle_or_raise
from ..ir.ops.matmul import Matmul
from ..ir.ops.sdpa import SdpaFwd
from ..ir.tensor import packed_strides
from ..memory import device_pointer
from ..types import (cudnnDataType_t, cudnnMultiHeadAttnWeightKind_t, cudnnPointwiseMode_t, cudnnSeqDataAxis_t,
                     cudnnStatus_t)
from . import lower as L
from ._util import desc_arg, int_arg, int_array, need_ptr, optional_ptrs, size_arg
from .mha_desc import AttnDescriptor, SeqDataDescriptor

DT = cudnnDataType_t
PM = cudnnPointwiseMode_t
AX = cudnnSeqDataAxis_t
WK = cudnnMultiHeadAttnWeightKind_t
F32, I32 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_INT32


def seq_view(sd):
    """(dims, strides) of sequence data as [B, T, C] (beam 1)."""
    st = sd.strides()
    return ((sd.axis(AX.CUDNN_SEQDATA_BATCH_DIM), sd.axis(AX.CUDNN_SEQDATA_TIME_DIM),
             sd.axis(AX.CUDNN_SEQDATA_VECT_DIM)),
            (st[AX.CUDNN_SEQDATA_BATCH_DIM], st[AX.CUDNN_SEQDATA_TIME_DIM], st[AX.CUDNN_SEQDATA_VECT_DIM]))


def band_of(lo, hi, tq, tk):
    """(left_bound, right_bound) of the SDPA band equal to the window lo[i] <= j < hi[i] (None: unbounded);
    raises NOT_SUPPORTED for a window no band expresses."""
    rows = [(max(a, 0), min(b, tk)) for a, b in zip(lo, hi)]
    right = next((b - i - 1 for i, (_, b) in enumerate(rows) if b < tk), None)
    left = next((i - a + 1 for i, (a, _) in enumerate(rows) if a > 0), None)
    ok = (right is None or right >= 0) and (left is None or left >= 1)
    for i, (a, b) in enumerate(rows):
        want_hi = tk if right is None else min(i + right + 1, tk)
        want_lo = 0 if left is None else max(i - left + 1, 0)
        if not ok or (a, b) != (want_lo, want_hi) or a >= b:
            raise NotSupportedError(
                f"attention window loWinIdx / hiWinIdx = {list(lo)} / {list(hi)}: the attention engines take the "
                f"whole key range or a top-left diagonal band (hiWinIdx[i] = i + 1 + r, loWinIdx[i] = i + 1 - l, "
                f"clipped to [0, {tk}]); query {i} keeps [{a}, {b})")
    return left, right


def _run(h, ctx, key, build, bind, scalars=None):
    low = L.lower(h, key, build, ctx)
    L.execute(h, low, bind, scalars)


def _project(h, ctx, name, x, xd, w, d, wk, bk, ws, out_off):
    """Step 1 for one of q / k / v: ws[out_off] = x @ W^T (+ b), [B, T, H*P] packed."""
    dims, strides = seq_view(xd)
    blocks = d.blocks()
    woff, (H, P, C), _ = blocks[wk]
    N, dt, isz = H * P, d.dataType, d.itemsize()
    has_b = bk in blocks

    def build(b):
        xt = b.raw("x", dims, strides, dt)
        wt = b.raw("w", (1, C, N), (N * C, 1, C), dt)
        out = b.raw("y", (dims[0], dims[1], N), packed_strides((dims[0], dims[1], N)), dt)
        if has_b:
            c = b.virtual("xw", dtype=F32)
            b.add(Matmul(f"proj_{name}", {"A": xt, "B": wt}, {"C": c}))
            b.pw(PM.CUDNN_POINTWISE_ADD, out, f"bias_{name}", X=c, B=b.raw("b", (1, 1, N), (N, N, 1), dt))
        else:
            b.add(Matmul(f"proj_{name}", {"A": xt, "B": wt}, {"C": out}))

    base = device_pointer(w)
    bind = {"x": x, "w": base + woff * isz, "y": ws + out_off}
    if has_b:
        bind["b"] = base + blocks[bk][0] * isz
    _run(h, ctx, ("mha_proj", name, dims, strides, int(dt), N, has_b, int(d.mathType)), build, bind)


def _attend(h, ctx, d, B, tq, tk, band, ws, lay, seq_q, seq_kv, training):
    H = d.nHeads
    pq, pk, pv, _ = d.proj()
    dt = d.dataType

    def heads(T, P):
        return (B, H, T, P), (T * H * P, P, H * P, 1)

    def build(b):
        q = b.raw("q", *heads(tq, pq), dt)
        k = b.raw("k", *heads(tk, pk), dt)
        v = b.raw("v", *heads(tk, pv), dt)
        o = b.raw("o", *heads(tq, pv), dt)
        lens = {p: b.raw(n, (B, 1, 1, 1), (1, 1, 1, 1), I32) for p, n in (("SEQ_LEN_Q", "sq"), ("SEQ_LEN_KV", "skv"))}
        attrs = dict(attn_scale=d.smScaler, padding_mask=True, generate_stats=training)
        if band[0] is not None:
            attrs["left_bound"] = band[0]
        if band[1] is not None:
            attrs["right_bound"] = band[1]
        outs = {"O": o}
        if training:   # the logsumexp the backward reads
            outs["STATS"] = b.raw("stats", (B, H, tq, 1), packed_strides((B, H, tq, 1)), F32)
        b.add(SdpaFwd("attention", dict(Q=q, K=k, V=v, **lens), outs, F32, **attrs))

    bind = {"q": ws + lay["Q"][0], "k": ws + lay["K"][0], "v": ws + lay["V"][0], "o": ws + lay["A"][0],
            "sq": seq_q, "skv": seq_kv, "stats": ws + lay["STATS"][0]}
    key = ("mha_sdpa", B, tq, tk, H, pq, pv, int(dt), d.smScaler, band, int(d.mathType), training)
    _run(h, ctx, key, build, bind)


def _out_proj(h, ctx, d, w, B, tq, ws, lay):
    H = d.nHeads
    _, _, pv, co = d.proj()
    blocks, dt, isz = d.blocks(), d.dataType, d.itemsize()
    K_ = H * pv
    woff = blocks[WK.CUDNN_MH_ATTN_O_WEIGHTS][0]
    has_b = WK.CUDNN_MH_ATTN_O_BIASES in blocks

    def build(b):
        a = b.raw("a", (B, tq, K_), packed_strides((B, tq, K_)), dt)
        wt = b.raw("w", (1, K_, co), (K_ * co, 1, K_), dt)
        out = b.raw("y", (B, tq, co), packed_strides((B, tq, co)), dt)
        if has_b:
            c = b.virtual("aw", dtype=F32)
            b.add(Matmul("proj_o", {"A": a, "B": wt}, {"C": c}))
            b.pw(PM.CUDNN_POINTWISE_ADD, out, "bias_o", X=c, B=b.raw("b", (1, 1, co), (co, co, 1), dt))
        else:
            b.add(Matmul("proj_o", {"A": a, "B": wt}, {"C": out}))

    base = device_pointer(w)
    bind = {"a": ws + lay["A"][0], "w": base + woff * isz, "y": ws + lay["Y"][0]}
    if has_b:
        bind["b"] = base + blocks[WK.CUDNN_MH_ATTN_O_BIASES][0] * isz
    _run(h, ctx, ("mha_oproj", B, tq, K_, co, int(dt), has_b, int(d.mathType)), build, bind)


def _finish(h, ctx, d, od, out, residuals, qd, B, tq, y_ptr, seq_q):
    """Step 4: out = Y (+ residuals) on the valid rows, paddingFill on the others."""
    dims, strides = seq_view(od)
    dt, fill = d.dataType, od.fill or 0.0
    rdims, rstrides = seq_view(qd)

    def build(b):
        y = b.raw("y", dims, packed_strides(dims), dt)
        cur = y
        if residuals is not None:
            cur = b.virtual("y+residual", dtype=F32)
            b.pw(PM.CUDNN_POINTWISE_ADD, cur, "residual", X=y, B=b.raw("res", rdims, rstrides, dt))
        idx = b.virtual("t", dtype=F32)
        b.pw(PM.CUDNN_POINTWISE_GEN_INDEX, idx, "time_index", X=y, axis=1)
        keep = b.virtual("valid", dtype=DT.CUDNN_DATA_BOOLEAN)
        b.pw(PM.CUDNN_POINTWISE_CMP_LT, keep, "valid", X=idx, B=b.raw("sq", (B, 1, 1), (1, 1, 1), I32))
        o = b.raw("out", dims, strides, dt)
        b.pw(PM.CUDNN_POINTWISE_BINARY_SELECT, o, "pad", X=cur, B=b.scalar("fill", 3, F32, fill), T=keep)

    bind = {"y": y_ptr, "out": out, "sq": seq_q}
    if residuals is not None:
        bind["res"] = residuals
    key = ("mha_finish", dims, strides, rstrides if residuals is not None else None, int(dt), fill)
    _run(h, ctx, key, build, bind, {"fill": fill})


def _check_seq(sd, name, size, dt):
    if sd.dtype != dt:
        raise BadParamError(f"{name} data type {sd.dtype.name} differs from the attention descriptor's {dt.name}")
    c = sd.axis(AX.CUDNN_SEQDATA_VECT_DIM)
    if c != size:
        raise BadParamError(f"{name} vector size dimA[VECT] = {c}, the attention descriptor says {size}")
    if sd.axis(AX.CUDNN_SEQDATA_BEAM_DIM) != 1:
        raise NotSupportedError(f"{name} beam size {sd.axis(AX.CUDNN_SEQDATA_BEAM_DIM)}: ncudnn's multi-head "
                                "attention takes beam size 1")


def _space(ptr, size, need, name):
    if size_arg(size, f"{name}SizeInBytes") < need:
        raise BadParamError(f"{name}SizeInBytes = {size}, {need} needed (cudnnGetMultiHeadAttnBuffers)",
                            cudnnStatus_t.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    return device_pointer(need_ptr(ptr, name))


def geometry(d, qd, kd, vd, od, names=("qDesc", "kDesc", "vDesc", "oDesc")):
    """(B, Tq, Tk) of a call's sequence data, checked against the attention descriptor (BAD_PARAM)."""
    dt = d.dataType
    co = d.proj()[3]
    tq, tk = qd.axis(AX.CUDNN_SEQDATA_TIME_DIM), kd.axis(AX.CUDNN_SEQDATA_TIME_DIM)
    for sd, name, size in zip((qd, kd, vd, od), names, (d.qSize, d.kSize, d.vSize, co)):
        _check_seq(sd, name, size, dt)
    B = qd.axis(AX.CUDNN_SEQDATA_BATCH_DIM)
    if (kd.axis(AX.CUDNN_SEQDATA_BATCH_DIM), vd.axis(AX.CUDNN_SEQDATA_BATCH_DIM),
            od.axis(AX.CUDNN_SEQDATA_BATCH_DIM)) != (B, B, B):
        raise BadParamError(f"{', '.join(names)} must have the same batch size")
    if vd.axis(AX.CUDNN_SEQDATA_TIME_DIM) != tk or od.axis(AX.CUDNN_SEQDATA_TIME_DIM) != tq:
        raise BadParamError(f"kDesc / vDesc time dims {tk} / {vd.axis(AX.CUDNN_SEQDATA_TIME_DIM)} and qDesc / "
                            f"oDesc time dims {tq} / {od.axis(AX.CUDNN_SEQDATA_TIME_DIM)} must match in pairs")
    if B > d.maxBatchSize or tq > d.qoMaxSeqLength or tk > d.kvMaxSeqLength:
        raise BadParamError(f"batch {B}, query length {tq}, key length {tk} exceed the attention descriptor's "
                            f"maxBatchSize {d.maxBatchSize}, qoMaxSeqLength {d.qoMaxSeqLength}, kvMaxSeqLength "
                            f"{d.kvMaxSeqLength}")
    return B, tq, tk


def refusals(d):
    """NOT_SUPPORTED for what the lowering does not express."""
    dt = d.dataType
    if dt == DT.CUDNN_DATA_DOUBLE:
        raise NotSupportedError("dataType DOUBLE: the attention engines take HALF and FLOAT")
    if not (d.qProjSize and d.kProjSize and d.vProjSize):
        raise NotSupportedError("a zero qProjSize / kProjSize / vProjSize (no input projection) is not supported")
    for dd, name in zip(d.drops, ("attnDropoutDesc", "postDropoutDesc")):
        if dd is not None and not dd.destroyed and dd.is_set and dd.dropout > 0:
            raise NotSupportedError(f"{name}: dropout {dd.dropout} > 0 is not supported (the attention engines' "
                                    "dropout mask is not cuDNN's)")


@c_api(0)
def cudnnMultiHeadAttnForward(handle, attnDesc, currIdx, loWinIdx, hiWinIdx, devSeqLengthsQO, devSeqLengthsKV,
                              qDesc, queries, residuals, kDesc, keys, vDesc, values, oDesc, out, weightSizeInBytes,
                              weights, workSpaceSizeInBytes, workSpace, reserveSpaceSizeInBytes, reserveSpace):
    h = get_handle_or_raise(handle)
    d = desc_arg(attnDesc, AttnDescriptor, "attnDesc")
    idx = int_arg(currIdx, "currIdx")
    qd, kd = desc_arg(qDesc, SeqDataDescriptor, "qDesc"), desc_arg(kDesc, SeqDataDescriptor, "kDesc")
    vd, od = desc_arg(vDesc, SeqDataDescriptor, "vDesc"), desc_arg(oDesc, SeqDataDescriptor, "oDesc")
    tq, tk = qd.axis(AX.CUDNN_SEQDATA_TIME_DIM), kd.axis(AX.CUDNN_SEQDATA_TIME_DIM)
    lo, hi = int_array(loWinIdx, tq, "loWinIdx"), int_array(hiWinIdx, tq, "hiWinIdx")
    for p, n in ((devSeqLengthsQO, "devSeqLengthsQO"), (devSeqLengthsKV, "devSeqLengthsKV"), (queries, "queries"),
                 (keys, "keys"), (values, "values"), (out, "out"), (weights, "weights")):
        need_ptr(p, n)
    optional_ptrs(residuals=residuals, workSpace=workSpace, reserveSpace=reserveSpace)
    B, tq, tk = geometry(d, qd, kd, vd, od)
    co = d.proj()[3]
    if residuals is not None and co != d.qSize:
        raise BadParamError(f"residuals need the output size ({co}) to equal qSize ({d.qSize})")
    need_w = d.weight_elems() * d.itemsize()
    if size_arg(weightSizeInBytes, "weightSizeInBytes") != need_w:
        raise BadParamError(f"weightSizeInBytes = {weightSizeInBytes}, cudnnGetMultiHeadAttnBuffers reports {need_w}")
    if idx >= 0:
        raise NotSupportedError(f"currIdx = {idx}: the single-time-step inference mode is not supported; pass "
                                "currIdx < 0 to compute every query time step")
    refusals(d)
    band = band_of(lo, hi, tq, tk)
    lay, total = d.buffer_layout(B, tq, tk)
    if reserveSpace is not None:
        ws = _space(reserveSpace, reserveSpaceSizeInBytes, total, "reserveSpace")
    else:
        ws = _space(workSpace, workSpaceSizeInBytes, total, "workSpace")
    ctx = L.build_context(h, d.mathType)
    for name, x, sd, wk, bk, slot in (("q", queries, qd, WK.CUDNN_MH_ATTN_Q_WEIGHTS, WK.CUDNN_MH_ATTN_Q_BIASES, "Q"),
                                      ("k", keys, kd, WK.CUDNN_MH_ATTN_K_WEIGHTS, WK.CUDNN_MH_ATTN_K_BIASES, "K"),
                                      ("v", values, vd, WK.CUDNN_MH_ATTN_V_WEIGHTS, WK.CUDNN_MH_ATTN_V_BIASES, "V")):
        _project(h, ctx, name, x, sd, weights, d, wk, bk, ws, lay[slot][0])
    _attend(h, ctx, d, B, tq, tk, band, ws, lay, devSeqLengthsQO, devSeqLengthsKV, reserveSpace is not None)
    if d.oProjSize:
        _out_proj(h, ctx, d, weights, B, tq, ws, lay)
        y = ws + lay["Y"][0]
    else:
        y = ws + lay["A"][0]
    _finish(h, ctx, d, od, out, residuals, qd, B, tq, y, devSeqLengthsQO)
