"""Scaled dot-product attention forward and backward. Q = [B, H, S_q, D], K/V = [B, H_kv, S_kv, D(v)]
(H divisible by H_kv: grouped-query attention); O = [B, H, S_q, D_v]; STATS = [B, H, S_q, 1] (logsumexp).

The mask is cudnn-frontend's diagonal band: with ``shift`` = 0 (``diagonal_alignment`` "top_left") or
S_kv_b - S_q_b ("bottom_right"; the per-batch lengths under a padding mask), key j is kept for query i
when ``j <= i + shift + right_bound`` (right_bound set) and ``j > i + shift - left_bound`` (left_bound
set). ``causal_mask`` / ``causal_mask_bottom_right`` are right_bound 0 with that alignment, and
``sliding_window_length`` is left_bound (the frontend's older spellings, kept as attributes);
:meth:`SdpaFwd.band` resolves them into the one (alignment, left, right) the engines read.
``padding_mask``: SEQ_LEN_Q / SEQ_LEN_KV ([B, 1, 1, 1] integers) give each batch's lengths.
``alibi_mask``: slope_h * (j - i) added to the scores (slopes as ``reference.alibi_slopes``).
BIAS: added to the scaled scores, [1 | B, 1 | H, 1 | S_q, S_kv] broadcast; the backward's optional
DBIAS output (bias's dims) is the gradient summed over the broadcast axes.
"""
from ...types import cudnnDataType_t, cudnnStatus_t
from ..node import Node

S = cudnnStatus_t
ALIGNMENTS = ("top_left", "bottom_right")
SDPA_ATTRS = {"attn_scale": None, "causal_mask": False, "causal_mask_bottom_right": False,
              "sliding_window_length": None, "dropout_probability": 0.0, "generate_stats": True,
              "diagonal_alignment": "top_left", "left_bound": None, "right_bound": None,
              "alibi_mask": False, "padding_mask": False}


def _check_qkv(node, q, k, v):
    for p, t in (("Q", q), ("K", k), ("V", v)):
        if t.ndim != 4:
            node.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p, f"needs 4 dims [B, H, S, D], got {t.dims}")
    if k.dims[:3] != v.dims[:3] or q.dims[0] != k.dims[0] or q.dims[3] != k.dims[3]:
        node.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "K/V", f"Q {q.dims}, K {k.dims}, V {v.dims}")
    if q.dims[1] % k.dims[1]:
        node.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "K", "query heads not a multiple of kv heads")


class _SdpaCommon(Node):
    SCALAR_PORTS = ("SCALE", "SEED", "OFFSET")
    ATTRS = dict(SDPA_ATTRS, attn_scale=1.0)

    def band(self):
        """(alignment, left_bound, right_bound) of the diagonal-band mask (bounds None when unset)."""
        align, left, right = self.diagonal_alignment, self.left_bound, self.right_bound
        if self.causal_mask:
            align, right = "top_left", 0
        elif self.causal_mask_bottom_right:
            align, right = "bottom_right", 0
        if self.sliding_window_length is not None:
            left = self.sliding_window_length
        return align, (None if left is None else int(left)), (None if right is None else int(right))

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        if self.causal_mask and self.causal_mask_bottom_right:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "causal_mask", "top-left and bottom-right causal both set")
        if (self.causal_mask or self.causal_mask_bottom_right) and self.right_bound is not None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "right_bound", "set together with a causal mask")
        if self.sliding_window_length is not None and self.left_bound is not None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "left_bound", "set together with sliding_window_length")
        if self.diagonal_alignment not in ALIGNMENTS:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "diagonal_alignment", f"{self.diagonal_alignment!r} is not one "
                      f"of {ALIGNMENTS}")
        _, left, right = self.band()
        if left is not None and left < 1:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "left_bound", f"{left}: the window needs at least one key (>= 1)")
        if right is not None and right < 0:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "right_bound", f"{right} is negative")
        lens = [p for p in ("SEQ_LEN_Q", "SEQ_LEN_KV") if p in self.inputs]
        if self.padding_mask and len(lens) != 2:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "padding_mask", "needs both SEQ_LEN_Q and SEQ_LEN_KV")
        if lens and not self.padding_mask:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, lens[0], "sequence lengths are read only with the padding mask "
                      "(use_padding_mask=True)")
        for p in lens:
            t = self.inputs[p]
            if t.dtype is not None and t.dtype not in (cudnnDataType_t.CUDNN_DATA_INT32,
                                                        cudnnDataType_t.CUDNN_DATA_INT64):
                self.fail(S.CUDNN_STATUS_BAD_PARAM, p, f"data type {t.dtype.name} is not INT32 / INT64")
        if not 0.0 <= float(self.dropout_probability or 0.0) < 1.0:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "dropout_probability", f"{self.dropout_probability} not in [0, 1)")

    def post_validate(self, ctx):
        q, k = self.inputs["Q"], self.inputs["K"]
        B, Sq, Sk = q.dims[0], q.dims[2], k.dims[2]
        for p in ("SEQ_LEN_Q", "SEQ_LEN_KV"):
            t = self.inputs.get(p)
            if t is not None and tuple(t.dims) not in ((B, 1, 1, 1), (B,)):
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p, f"dims {tuple(t.dims)}, expected {(B, 1, 1, 1)}")
        bias = self.inputs.get("BIAS")
        if bias is not None:
            full = (B, q.dims[1], Sq, Sk)
            if bias.ndim != 4 or any(d not in (1, f) for d, f in zip(bias.dims, full)):
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "BIAS",
                          f"dims {tuple(bias.dims)} do not broadcast to {full}")


class SdpaFwd(_SdpaCommon):
    OP = "sdpa_fwd"
    INPUTS = ("Q", "K", "V")
    OPTIONAL_INPUTS = ("SCALE", "BIAS", "SEQ_LEN_Q", "SEQ_LEN_KV", "SEED", "OFFSET")
    OUTPUTS = ("O",)
    OPTIONAL_OUTPUTS = ("STATS",)

    def infer(self, ctx):
        q, k, v = (self.inputs[p] for p in ("Q", "K", "V"))
        _check_qkv(self, q, k, v)
        self.infer_output("O", (q.dims[0], q.dims[1], q.dims[2], v.dims[3]), ctx, like=q)
        if "STATS" in self.outputs:
            self.infer_output("STATS", (*q.dims[:3], 1), ctx, dtype=cudnnDataType_t.CUDNN_DATA_FLOAT)


class SdpaBwd(_SdpaCommon):
    OP = "sdpa_bwd"
    INPUTS = ("Q", "K", "V", "O", "DO", "STATS")
    OPTIONAL_INPUTS = ("SCALE", "BIAS", "SEQ_LEN_Q", "SEQ_LEN_KV", "SEED", "OFFSET")
    OUTPUTS = ("DQ", "DK", "DV")
    OPTIONAL_OUTPUTS = ("DBIAS",)
    ATTRS = dict(_SdpaCommon.ATTRS, deterministic=False)

    def infer(self, ctx):
        q, k, v = (self.inputs[p] for p in ("Q", "K", "V"))
        _check_qkv(self, q, k, v)
        for out, like in (("DQ", q), ("DK", k), ("DV", v)):
            self.infer_output(out, like.dims, ctx, like=like)
        if "DBIAS" in self.outputs:
            bias = self.inputs.get("BIAS")
            if bias is None:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, "DBIAS", "needs the BIAS input")
            self.infer_output("DBIAS", bias.dims, ctx, like=bias)
