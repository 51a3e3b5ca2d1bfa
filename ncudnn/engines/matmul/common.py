"""What the matmul engines share: a matmul subgraph as a :class:`~ncudnn.engines.gemm.mapping.GemmMapping`
(one call of a GEMM kernel; the SIMT engines' family base is ``gemm.mapping.GemmEngineBase``, which
conv_gemm_1x1 shares), and the small-problem measures.
"""
import math

from ...types import cudnnStatus_t
from ..gemm import common as gc
from ..gemm.mapping import GemmMapping, batch2, merge_dims

S = cudnnStatus_t


#: the FP8 storage types :func:`matmul_mapping` takes with ``fp8=True`` (A, B, the written output)
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")


def matmul_mapping(sub, fp8=False):
    """The GemmMapping of a matmul subgraph (raises gc.Reject with the node and the reason). ``fp8``: A, B
    and the written output may also be FP8 (:data:`FP8_DTYPES`, for the FP8 tensor-core kernels); the
    mapping's dtypes and byte sizes are then the FP8 ones (every dim and stride is in elements)."""
    kinds = gc.KERNEL_DTYPES + FP8_DTYPES if fp8 else gc.KERNEL_DTYPES
    node = sub.anchor
    for port in ("M_OVERRIDE", "N_OVERRIDE", "K_OVERRIDE"):
        if port in node.inputs:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': {port}: per-batch size override "
                            "tensors are not implemented by the GEMM engines")
    if getattr(node, "irregularly_strided_batch_count", None) is not None:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': irregularly strided batches are "
                        "not implemented")
    A, B = node.inputs["A"], node.inputs["B"]
    C = node.outputs["C"]
    for port, t in (("A", A), ("B", B), ("C", C)):
        gc.check_tensor(node, port, t, kinds)
    M, N, K_ = node.mnk()
    rank = len(C.dims)
    bdims = tuple(C.dims[:-2])

    def bstrides(t):
        return [s if d == bd else 0 for d, s, bd in zip(t.dims[:-2], t.strides[:-2], bdims)]

    def classify(t):
        if len(t.dims) != rank or any(d not in (1, bd) for d, bd in zip(t.dims[:-2], bdims)):
            return None
        if t.dims[-2:] == (1, N):
            return "col"
        if t.dims[-2:] == (M, 1):
            return "row"
        if t.dims[-2:] == (1, 1):       # one value (per batch when a batch dim is not 1)
            return "batch" if any(d != 1 for d in t.dims[:-2]) else "scalar"
        return None

    epi = gc.epilogue_of(sub, C.dims, classify)
    out = epi.out
    if tuple(out.dims) != tuple(C.dims):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{out.label}: dims {out.dims} differ from the "
                        f"matmul output's {C.dims} (the epilogue does not broadcast the output)")
    gc.check_tensor(node, "C", out, kinds)
    tensors = [A, B, out] + [t for t in (epi.residual,) if t is not None]
    bias_batched = epi.bias is not None and any(d != 1 for d in epi.bias.dims[:-2])
    if bias_batched:
        tensors.append(epi.bias)
    sizes, strides = merge_dims(list(bdims), [bstrides(t) for t in tensors])
    batch, bs = batch2(sizes, strides, f"node '{node.name}'")
    a_st = bs[0] + (A.strides[-2], A.strides[-1])
    b_st = bs[1] + (B.strides[-2], B.strides[-1])
    c_st = bs[2] + (out.strides[-2], out.strides[-1])
    res_st = None
    if epi.residual is not None:
        r = epi.residual
        res_st = bs[3] + (r.strides[-2], r.strides[-1])
    bias_st = (0, 1)
    if epi.bias is not None:
        t = epi.bias
        index = {"col": t.strides[-1], "row": t.strides[-2]}.get(epi.bias_axis, 0)
        sb = 0
        if bias_batched:
            s1, s2 = bs[-1]
            if batch[0] > 1 and batch[1] > 1 and s1 != batch[1] * s2:
                raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{t.label}: a per-batch bias whose batch "
                                "strides do not flatten")
            sb = s2 if batch[1] > 1 else s1
        bias_st = (sb, index)
    return GemmMapping(M, N, K_, batch, A, B, a_st, b_st, c_st, epi, bias_st, res_st)


def total_flops(p):
    return 2.0 * p.M * p.N * p.K * p.nb


def is_small(p):
    """Few output tiles of the large configs: the small-tile / split-K engine's problems."""
    return math.ceil(p.M / 128) * math.ceil(p.N / 128) * p.nb < 132
