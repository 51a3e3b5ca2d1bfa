"""Finalize checks of the SDPA forward and backward operations: the shapes cuDNN documents
(Q [B, H, S_q, D], K [B, H_kv, S_kv, D], V [B, H_kv, S_kv, D_v], O [B, H, S_q, D_v], STATS [B, H, S_q, 1],
gradients shaped as their tensors). Options the engines cannot run are refused at lowering."""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ..report import bad
from .tensor import tensor_of


def _qkvo(d, prefix, o_name):
    q, k, v, o = (tensor_of(d, A[prefix + n]) for n in ("QDESC", "KDESC", "VDESC", o_name))
    for n, t in (("QDESC", q), ("KDESC", k), ("VDESC", v), (o_name, o)):
        if t.rank != 4:
            bad(d, A[prefix + n], f"dims {list(t.dims)}: 4 dimensions [B, H, S, D] are expected")
    if k.dims[:3] != v.dims[:3] or k.dims[0] != q.dims[0] or k.dims[3] != q.dims[3]:
        bad(d, A[prefix + "KDESC"], f"K {list(k.dims)} / V {list(v.dims)} do not match Q {list(q.dims)}")
    if q.dims[1] % k.dims[1]:
        bad(d, A[prefix + "KDESC"], f"{q.dims[1]} query heads are not a multiple of {k.dims[1]} key/value heads")
    want = [q.dims[0], q.dims[1], q.dims[2], v.dims[3]]
    if list(o.dims) != want:
        bad(d, A[prefix + o_name], f"dims {list(o.dims)}, expected {want}")
    stats = tensor_of(d, A[prefix + "STATSDESC"], False)
    if stats is not None and list(stats.dims) != want[:3] + [1]:
        bad(d, A[prefix + "STATSDESC"], f"dims {list(stats.dims)}, expected {want[:3] + [1]}")
    return q, k, v


def finalize_sdpa_fwd(d):
    _qkvo(d, "CUDNN_ATTR_OPERATION_SDPA_FWD_", "ODESC")
    p = d.value(A.CUDNN_ATTR_OPERATION_SDPA_FWD_DROPOUT_PROBABILITY)
    if p is not None and not 0.0 <= float(p) < 1.0:
        bad(d, A.CUDNN_ATTR_OPERATION_SDPA_FWD_DROPOUT_PROBABILITY, f"{p} is not in [0, 1)")


def finalize_sdpa_bwd(d):
    P = "CUDNN_ATTR_OPERATION_SDPA_BWD_"
    q, k, v = _qkvo(d, P, "ODESC")
    for grad, like in (("DQDESC", q), ("DKDESC", k), ("DVDESC", v)):
        g = tensor_of(d, A[P + grad])
        if g.dims != like.dims:
            bad(d, A[P + grad], f"dims {list(g.dims)} differ from its tensor's {list(like.dims)}")
    do, o = tensor_of(d, A[P + "DODDESC"]), tensor_of(d, A[P + "ODESC"])
    if do.dims != o.dims:
        bad(d, A[P + "DODDESC"], f"dims {list(do.dims)} differ from O's {list(o.dims)}")


FINALIZERS = {D.CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: finalize_sdpa_fwd,
              D.CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR: finalize_sdpa_bwd}
