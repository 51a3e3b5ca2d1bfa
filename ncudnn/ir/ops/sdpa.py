"""Scaled dot-product attention forward and backward. Q = [B, H, S_q, D], K/V = [B, H_kv, S_kv, D(v)]
(H divisible by H_kv: grouped-query attention); O = [B, H, S_q, D_v]; STATS = [B, H, S_q, 1] (logsumexp)."""
from ...types import cudnnStatus_t
from ..node import Node

S = cudnnStatus_t
SDPA_ATTRS = {"attn_scale": None, "causal_mask": False, "causal_mask_bottom_right": False,
              "sliding_window_length": None, "dropout_probability": 0.0, "generate_stats": True}


def _check_qkv(node, q, k, v):
    for p, t in (("Q", q), ("K", k), ("V", v)):
        if t.ndim != 4:
            node.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, p, f"needs 4 dims [B, H, S, D], got {t.dims}")
    if k.dims[:3] != v.dims[:3] or q.dims[0] != k.dims[0] or q.dims[3] != k.dims[3]:
        node.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "K/V", f"Q {q.dims}, K {k.dims}, V {v.dims}")
    if q.dims[1] % k.dims[1]:
        node.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "K", "query heads not a multiple of kv heads")


class SdpaFwd(Node):
    OP = "sdpa_fwd"
    INPUTS = ("Q", "K", "V")
    OPTIONAL_INPUTS = ("SCALE", "BIAS", "SEQ_LEN_Q", "SEQ_LEN_KV", "SEED", "OFFSET")
    OUTPUTS = ("O",)
    OPTIONAL_OUTPUTS = ("STATS",)
    SCALAR_PORTS = ("SCALE", "SEED", "OFFSET")
    ATTRS = dict(SDPA_ATTRS, attn_scale=1.0)

    def infer(self, ctx):
        q, k, v = (self.inputs[p] for p in ("Q", "K", "V"))
        _check_qkv(self, q, k, v)
        self.infer_output("O", (q.dims[0], q.dims[1], q.dims[2], v.dims[3]), ctx, like=q)
        if "STATS" in self.outputs:
            from ...types import cudnnDataType_t
            self.infer_output("STATS", (*q.dims[:3], 1), ctx, dtype=cudnnDataType_t.CUDNN_DATA_FLOAT)


class SdpaBwd(Node):
    OP = "sdpa_bwd"
    INPUTS = ("Q", "K", "V", "O", "DO", "STATS")
    OPTIONAL_INPUTS = ("SCALE", "BIAS", "SEQ_LEN_Q", "SEQ_LEN_KV", "SEED", "OFFSET")
    OUTPUTS = ("DQ", "DK", "DV")
    SCALAR_PORTS = ("SCALE", "SEED", "OFFSET")
    ATTRS = dict(SDPA_ATTRS, attn_scale=1.0)

    def infer(self, ctx):
        q, k, v = (self.inputs[p] for p in ("Q", "K", "V"))
        _check_qkv(self, q, k, v)
        for out, like in (("DQ", q), ("DK", k), ("DV", v)):
            self.infer_output(out, like.dims, ctx, like=like)
