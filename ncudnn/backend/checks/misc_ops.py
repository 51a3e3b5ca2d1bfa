"""Finalize checks of concat, signal, reshape, slice, RNG and paged-cache-load operations."""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnDataType_t as DT
from ..report import bad
from .tensor import tensor_of


def finalize_concat(d):
    axis = d.value(A.CUDNN_ATTR_OPERATION_CONCAT_AXIS)
    ins = [t.state["tensor"] for t in d.values(A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS)]
    out = tensor_of(d, A.CUDNN_ATTR_OPERATION_CONCAT_OUTPUT_DESC)
    if not 0 <= axis < out.rank:
        bad(d, A.CUDNN_ATTR_OPERATION_CONCAT_AXIS, f"{axis} is not a dimension of the rank-{out.rank} output")
    for i, t in enumerate(ins):
        if t.rank != out.rank:
            bad(d, A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS, f"input {i} has {t.rank} dimensions, the output {out.rank}")
        for j, (a, b) in enumerate(zip(t.dims, out.dims)):
            if j != axis and a != b:
                bad(d, A.CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS,
                    f"input {i} dims {list(t.dims)} differ from the output {list(out.dims)} in dimension {j}")
    total = sum(t.dims[axis] for t in ins)
    if total != out.dims[axis]:
        bad(d, A.CUDNN_ATTR_OPERATION_CONCAT_OUTPUT_DESC,
            f"dimension {axis} is {out.dims[axis]}, the inputs sum to {total}")
    if d.is_set(A.CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX):
        idx = d.value(A.CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX)
        if not 0 <= idx < len(ins):
            bad(d, A.CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX, f"{idx} is not an index into {len(ins)} inputs")


def finalize_signal(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_SIGNAL_XDESC)
    y = tensor_of(d, A.CUDNN_ATTR_OPERATION_SIGNAL_YDESC, False)
    if y is not None and (y.dims != x.dims or y.dtype != x.dtype):
        bad(d, A.CUDNN_ATTR_OPERATION_SIGNAL_YDESC, "the pass-through output must match X in dims and data type")
    flag = tensor_of(d, A.CUDNN_ATTR_OPERATION_SIGNAL_FLAGDESC)
    if flag.is_virtual:
        bad(d, A.CUDNN_ATTR_OPERATION_SIGNAL_FLAGDESC, "the flag tensor must not be virtual")


def finalize_reshape(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_RESHAPE_XDESC)
    y = tensor_of(d, A.CUDNN_ATTR_OPERATION_RESHAPE_YDESC)
    if x.numel != y.numel:
        bad(d, A.CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
            f"{list(y.dims)} holds {y.numel} elements, X {list(x.dims)} holds {x.numel}")


def finalize_slice(d):
    """One start / limit (/ stride) per dim of X, 0 <= start < limit <= extent, stride >= 1, and Y's dims
    ceil((limit - start) / stride) per dim; BAD_PARAM naming the attribute."""
    P = "CUDNN_ATTR_OPERATION_SLICE_"
    x = tensor_of(d, A[P + "XDESC"])
    y = tensor_of(d, A[P + "YDESC"])
    start = [int(v) for v in d.values(A[P + "START_INDICES"])]
    limit = [int(v) for v in d.values(A[P + "LIMIT_INDICES"])]
    steps = [int(v) for v in d.values(A[P + "STRIDES"])] if d.is_set(A[P + "STRIDES"]) else [1] * x.rank
    for name, v in (("START_INDICES", start), ("LIMIT_INDICES", limit), ("STRIDES", steps)):
        if len(v) != x.rank:
            bad(d, A[P + name], f"{len(v)} values, X has {x.rank} dimensions")
    for i, (a, b, k, n) in enumerate(zip(start, limit, steps, x.dims)):
        if k < 1:
            bad(d, A[P + "STRIDES"], f"dimension {i}: stride {k} (must be >= 1)")
        if not 0 <= a < n:
            bad(d, A[P + "START_INDICES"], f"dimension {i}: start {a} outside [0, {n})")
        if not a < b <= n:
            bad(d, A[P + "LIMIT_INDICES"], f"dimension {i}: limit {b} outside ({a}, {n}]")
    want = [-(-(b - a) // k) for a, b, k in zip(start, limit, steps)]
    if list(y.dims) != want:
        bad(d, A[P + "YDESC"], f"dims {list(y.dims)}, the slice of X {list(x.dims)} gives {want}")


def _all_ones(d, name, t):
    if any(v != 1 for v in t.dims) or any(v != 1 for v in t.strides):
        bad(d, name, f"dims {list(t.dims)} strides {list(t.strides)}: all dimensions and strides must be 1")


def finalize_rng_op(d):
    _all_ones(d, A.CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, tensor_of(d, A.CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC))
    seed = d.value(A.CUDNN_ATTR_OPERATION_RNG_SEED)
    if hasattr(seed, "state"):
        _all_ones(d, A.CUDNN_ATTR_OPERATION_RNG_SEED, seed.state["tensor"])


def finalize_paged_cache_load(d):
    y = tensor_of(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC)
    cont = tensor_of(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC)
    table = tensor_of(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC)
    seq = tensor_of(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC)
    if not y.is_virtual:
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, "the reconstructed cache must be a virtual tensor")
    for n, t in ((A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, cont),
                 (A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, table),
                 (A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, seq)):
        if t.is_virtual:
            bad(d, n, "must not be virtual")
        if t.rank != 4:
            bad(d, n, f"{t.rank} dimensions, 4 expected")
    if y.rank != 4:
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, f"{y.rank} dimensions, 4 expected")
    if table.dtype != DT.CUDNN_DATA_INT32:
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, f"{table.dtype.name}: INT32 expected")
    if seq.dtype not in (DT.CUDNN_DATA_INT32, DT.CUDNN_DATA_INT64):
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, f"{seq.dtype.name}: INT32 or INT64 expected")
    b = y.dims[0]
    if list(seq.dims) != [b, 1, 1, 1]:
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, f"dims {list(seq.dims)}: [{b}, 1, 1, 1] expected")
    if table.dims[0] != b or table.dims[1] != 1 or table.dims[3] != 1:
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC,
            f"dims {list(table.dims)}: [{b}, 1, ceil(max_seq/block_size), 1] expected")
    if (y.dims[1], y.dims[3]) != (cont.dims[1], cont.dims[3]):
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC,
            f"dims {list(y.dims)}: H and D must match the container's {list(cont.dims)}")
    if y.dims[2] > table.dims[2] * cont.dims[2]:
        bad(d, A.CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC,
            f"sequence length {y.dims[2]} exceeds {table.dims[2]} pages of {cont.dims[2]}")


FINALIZERS = {
    D.CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR: finalize_concat,
    D.CUDNN_BACKEND_OPERATION_SIGNAL_DESCRIPTOR: finalize_signal,
    D.CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: finalize_reshape,
    D.CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR: finalize_slice,
    D.CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR: finalize_rng_op,
    D.CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR: finalize_paged_cache_load,
}
