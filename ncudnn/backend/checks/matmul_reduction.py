"""Finalize checks of the matmul and reduction operations.

Matmul: A [..., M, K] x B [..., K, N] -> C [..., M, N]; every batch dimension of A and B divides C's,
and C's is the larger of the two (broadcast of a B/c batch). Fewer than 2 dimensions is
NOT_SUPPORTED, anything else inconsistent is BAD_PARAM.
Reduction: Y has X's rank and each dimension equals X's or is 1 (or divides it, the grouped-query case).
"""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ..report import bad, unsupported
from .tensor import tensor_of

MA, MB, MC = (A.CUDNN_ATTR_OPERATION_MATMUL_ADESC, A.CUDNN_ATTR_OPERATION_MATMUL_BDESC,
              A.CUDNN_ATTR_OPERATION_MATMUL_CDESC)
BATCH_COUNT = A.CUDNN_ATTR_OPERATION_MATMUL_IRREGULARLY_STRIDED_BATCH_COUNT


def finalize_matmul_op(d):
    a, b, c = (tensor_of(d, n) for n in (MA, MB, MC))
    for n, t in ((MA, a), (MB, b), (MC, c)):
        if t.rank < 2:
            unsupported(d, n, f"{t.rank} dimension(s): matmul tensors need at least 2")
    if not a.rank == b.rank == c.rank:
        bad(d, MB, f"A, B and C have {a.rank}, {b.rank} and {c.rank} dimensions: they must agree")
    m, k = a.dims[-2:]
    k2, n = b.dims[-2:]
    if k != k2:
        bad(d, MB, f"B is {list(b.dims)}: its K ({k2}) differs from A's ({k}, A is {list(a.dims)})")
    if tuple(c.dims[-2:]) != (m, n):
        bad(d, MC, f"C is {list(c.dims)}: [..., M, N] = [..., {m}, {n}] expected")
    for i, (x, y, z) in enumerate(zip(a.dims[:-2], b.dims[:-2], c.dims[:-2])):
        if z % x or z % y or z != max(x, y):
            bad(d, MC, f"batch dimension {i}: A has {x}, B has {y}, C has {z}; each must divide C's, "
                "which must be the larger")
    count = d.value(BATCH_COUNT)
    if count < 0:
        bad(d, BATCH_COUNT, f"{count} is negative")
    if count != 1 and any(x != 1 for t in (a, b, c) for x in t.dims[:-2]):
        bad(d, BATCH_COUNT, f"{count} irregularly strided batches together with regular batch "
            "dimensions: use one or the other")
    d.state["matmul"] = {"m": m, "n": n, "k": k, "batch": tuple(c.dims[:-2])}


def finalize_reduction_op(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_REDUCTION_XDESC)
    y = tensor_of(d, A.CUDNN_ATTR_OPERATION_REDUCTION_YDESC)
    if x.rank != y.rank:
        bad(d, A.CUDNN_ATTR_OPERATION_REDUCTION_YDESC, f"{y.rank} dimensions, X has {x.rank}")
    for i, (xi, yi) in enumerate(zip(x.dims, y.dims)):
        if yi != xi and (yi > xi or xi % yi):
            bad(d, A.CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                f"dimension {i} is {yi}: it must equal X's {xi}, be 1, or divide it")
    d.state["reduced_axes"] = tuple(i for i, (xi, yi) in enumerate(zip(x.dims, y.dims)) if xi != yi)


FINALIZERS = {
    D.CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: finalize_matmul_op,
    D.CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: finalize_reduction_op,
}
