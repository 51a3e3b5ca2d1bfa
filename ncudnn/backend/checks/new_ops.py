"""Finalize checks of softmax, transpose, rotary embedding (forward / backward), diagonal band mask,
expand / contract band matrix and MoE grouped matmul (forward / backward): the shapes and types cuDNN
documents, BAD_PARAM naming the attribute otherwise.

Softmax runs along the last dimension: Y is shaped as X; STATS (the log-sum-exp), MAX and SUM_EXP as X
with its last dimension 1; SINK holds one logit per head, broadcast ([1, H, 1, 1] for a [B, H, S, S_kv] X).
RoPE: X / Y (dY / dX) [..., D]; ROPE_DIM in (0, D] and even (0: D), the rotated segment the trailing
ROPE_DIM columns; FREQS the raw angles, [..., ROPE_DIM] with every other dimension 1 or X's."""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnDataType_t as DT
from ...types import cudnnMoeGroupedMatmulMode_t as MOE
from ..report import bad
from .tensor import tensor_of

FLOAT_TYPES = (DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_DOUBLE)
INDEX_TYPES = (DT.CUDNN_DATA_INT32, DT.CUDNN_DATA_INT64)


def _same_dims(d, name, t, want, what):
    if list(t.dims) != list(want):
        bad(d, name, f"dims {list(t.dims)}, expected {list(want)} ({what})")


def _broadcasts(small, big):
    return len(small) == len(big) and all(a in (1, b) for a, b in zip(small, big))


def finalize_softmax(d):
    P = "CUDNN_ATTR_OPERATION_SOFTMAX_"
    x = tensor_of(d, A[P + "XDESC"])
    if x.rank < 2:
        bad(d, A[P + "XDESC"], f"dims {list(x.dims)}: at least 2 dimensions are expected")
    _same_dims(d, A[P + "YDESC"], tensor_of(d, A[P + "YDESC"]), x.dims, "those of X")
    rows = list(x.dims[:-1]) + [1]
    for n in ("STATS_DESC", "MAX_DESC", "SUM_EXP_DESC"):
        t = tensor_of(d, A[P + n], False)
        if t is not None:
            _same_dims(d, A[P + n], t, rows, "X with its last dimension 1")
    sink = tensor_of(d, A[P + "SINK_DESC"], False)
    if sink is not None and not _broadcasts(sink.dims, rows):
        bad(d, A[P + "SINK_DESC"], f"dims {list(sink.dims)} do not broadcast to {rows}")


def finalize_transpose(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_TRANSPOSE_XDESC)
    y = tensor_of(d, A.CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC)
    perm = [int(p) for p in d.values(A.CUDNN_ATTR_OPERATION_TRANSPOSE_PERMUTATION)]
    if sorted(perm) != list(range(x.rank)):
        bad(d, A.CUDNN_ATTR_OPERATION_TRANSPOSE_PERMUTATION,
            f"{perm} is not a permutation of the {x.rank} dimensions of X")
    _same_dims(d, A.CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC, y, [x.dims[p] for p in perm], "X's dims permuted")


def rope_dim(d, prefix, x):
    """The rotated width: ROPE_DIM, or the whole last dimension when it is 0."""
    r = int(d.value(A[prefix + "ROPE_DIM"]) or 0)
    return r if r else int(x.dims[-1])


def _finalize_rope(prefix, x_name, y_name):
    def check(d):
        x = tensor_of(d, A[prefix + x_name])
        _same_dims(d, A[prefix + y_name], tensor_of(d, A[prefix + y_name]), x.dims, f"those of {x_name[:-4]}")
        r = int(d.value(A[prefix + "ROPE_DIM"]) or 0)
        if r < 0 or r > x.dims[-1] or (r or x.dims[-1]) % 2:
            bad(d, A[prefix + "ROPE_DIM"], f"{r}: an even width in (0, {x.dims[-1]}] (or 0, the whole head) is expected")
        r = rope_dim(d, prefix, x)
        f = tensor_of(d, A[prefix + "FREQSDESC"])
        want = list(x.dims[:-1]) + [r]
        if not _broadcasts(f.dims, want) or f.dims[-1] != r:
            bad(d, A[prefix + "FREQSDESC"], f"dims {list(f.dims)}: [..., {r}] broadcasting to {want} is expected")
        if f.dtype not in FLOAT_TYPES:
            bad(d, A[prefix + "FREQSDESC"], f"{f.dtype.name}: the angles are floating point")
    return check


def finalize_band_mask(d):
    P = "CUDNN_ATTR_OPERATION_DIAGONAL_BAND_MASK_"
    x = tensor_of(d, A[P + "XDESC"])
    if x.rank != 4:
        bad(d, A[P + "XDESC"], f"dims {list(x.dims)}: 4 dimensions [B, H, S_q, S_kv] are expected")
    _same_dims(d, A[P + "YDESC"], tensor_of(d, A[P + "YDESC"]), x.dims, "those of X")
    for n in ("LEFT_BOUND_DESC", "SHIFT_RIGHT_BOUND_DESC", "BDESC"):
        t = tensor_of(d, A[P + n], False)
        if t is not None and t.numel != 1:
            bad(d, A[P + n], f"dims {list(t.dims)}: a scalar (one element) is expected")
    for n in ("SEQ_LEN_QDESC", "SEQ_LEN_KVDESC"):
        t = tensor_of(d, A[P + n], False)
        if t is not None and (t.numel != x.dims[0] or t.dtype not in INDEX_TYPES):
            bad(d, A[P + n], f"dims {list(t.dims)} {t.dtype.name}: one integer per batch ({x.dims[0]}) is expected")


def _finalize_band_matrix(prefix, lower, upper, axis):
    def check(d):
        x = tensor_of(d, A[prefix + "XDESC"])
        y = tensor_of(d, A[prefix + "YDESC"])
        if x.rank != y.rank:
            bad(d, A[prefix + "YDESC"], f"{y.rank} dimensions, X has {x.rank}")
        for n in (lower, upper):
            if int(d.value(A[n])) < 0:
                bad(d, A[n], f"{d.value(A[n])}: a bandwidth is not negative")
        if d.is_set(A[axis]) and not 0 <= int(d.value(A[axis])) < x.rank:
            bad(d, A[axis], f"{d.value(A[axis])} is not a dimension of the rank-{x.rank} X")
    return check


def _moe_offsets(d, name, experts):
    off = tensor_of(d, A[name])
    if off.dtype not in INDEX_TYPES:
        bad(d, A[name], f"{off.dtype.name}: integer offsets are expected")
    if off.numel % experts:
        bad(d, A[name], f"{off.numel} offsets are not a whole number of batches of {experts} experts")


def finalize_moe(d):
    P = "CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_"
    tok, w, out = (tensor_of(d, A[P + n]) for n in ("TOKEN_DESC", "WEIGHT_DESC", "OUTPUT_DESC"))
    for n, t in (("TOKEN_DESC", tok), ("WEIGHT_DESC", w), ("OUTPUT_DESC", out)):
        if t.rank != 3:
            bad(d, A[P + n], f"dims {list(t.dims)}: 3 dimensions are expected")
    if tok.dims[2] != w.dims[1]:
        bad(d, A[P + "WEIGHT_DESC"], f"dims {list(w.dims)}: [E, {tok.dims[2]}, N] (K of the tokens) is expected")
    if out.dims[2] != w.dims[2] or out.dims[0] != tok.dims[0]:
        bad(d, A[P + "OUTPUT_DESC"], f"dims {list(out.dims)}: [{tok.dims[0]}, rows, {w.dims[2]}] is expected")
    _moe_offsets(d, P + "FIRST_TOKEN_OFFSET_DESC", w.dims[0])
    mode = MOE(int(d.value(A[P + "MODE"])))
    needs = {MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_GATHER: ("TOKEN_INDEX_DESC",),
             MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_SCATTER: ("TOKEN_INDEX_DESC", "TOKEN_KS_DESC", "TOP_K")}
    for n in needs.get(mode, ()):
        if not d.is_set(A[P + n]):
            bad(d, A[P + n], f"required in {mode.name}")
    if mode == MOE.CUDNN_MOE_GROUPED_MATMUL_MODE_NONE and out.dims[1] != tok.dims[1]:
        bad(d, A[P + "OUTPUT_DESC"], f"{out.dims[1]} rows, the (routed) tokens have {tok.dims[1]}")
    if d.is_set(A[P + "TOP_K"]) and int(d.value(A[P + "TOP_K"])) < 1:
        bad(d, A[P + "TOP_K"], f"{d.value(A[P + 'TOP_K'])}: at least 1 is expected")


def finalize_moe_bwd(d):
    P = "CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_"
    tok, dw, dout = (tensor_of(d, A[P + n]) for n in ("TOKEN_DESC", "DWEIGHT_DESC", "DOUTPUT_DESC"))
    for n, t in (("TOKEN_DESC", tok), ("DWEIGHT_DESC", dw), ("DOUTPUT_DESC", dout)):
        if t.rank != 3:
            bad(d, A[P + n], f"dims {list(t.dims)}: 3 dimensions are expected")
    if dout.dims[:2] != tok.dims[:2]:
        bad(d, A[P + "DOUTPUT_DESC"], f"dims {list(dout.dims)}: [{tok.dims[0]}, {tok.dims[1]}, N] is expected")
    if dw.dims[1:] != (tok.dims[2], dout.dims[2]):
        bad(d, A[P + "DWEIGHT_DESC"], f"dims {list(dw.dims)}: [E, {tok.dims[2]}, {dout.dims[2]}] is expected")
    _moe_offsets(d, P + "FIRST_TOKEN_OFFSET_DESC", dw.dims[0])


_E, _C = "CUDNN_ATTR_OPERATION_EXPAND_BAND_MATRIX_", "CUDNN_ATTR_OPERATION_CONTRACT_BAND_MATRIX_"
FINALIZERS = {
    D.CUDNN_BACKEND_OPERATION_SOFTMAX_DESCRIPTOR: finalize_softmax,
    D.CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR: finalize_transpose,
    D.CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR: _finalize_rope("CUDNN_ATTR_OPERATION_ROPE_FWD_", "XDESC", "YDESC"),
    D.CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR: _finalize_rope("CUDNN_ATTR_OPERATION_ROPE_BWD_", "DYDESC", "DXDESC"),
    D.CUDNN_BACKEND_OPERATION_DIAGONAL_BAND_MASK_DESCRIPTOR: finalize_band_mask,
    D.CUDNN_BACKEND_OPERATION_EXPAND_BAND_MATRIX_DESCRIPTOR: _finalize_band_matrix(
        _E, _E + "LOWER_BANDWIDTH", _E + "UPPER_BANDWIDTH", _E + "AXIS"),
    D.CUDNN_BACKEND_OPERATION_CONTRACT_BAND_MATRIX_DESCRIPTOR: _finalize_band_matrix(
        _C, _C + "LOWER_BANDWIDTH", _C + "UPPER_BANDWIDTH", _C + "AXIS"),
    D.CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR: finalize_moe,
    D.CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR: finalize_moe_bwd,
}
