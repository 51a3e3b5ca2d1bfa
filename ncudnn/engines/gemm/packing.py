"""Two or more broadcast vector operands of a GEMM-family epilogue as one packed operand.

The kernels read one bias operand at ``b_off = index * bias_stride``. An epilogue with NV >= 2 vector steps
(conv -> MUL scale [1,K,1,1] -> ADD bias [1,K,1,1], matmul -> MUL dequant [1,1,N] -> ADD [1,1,N], ...)
reads them from one interleaved buffer ``packed[c * NV + j] = operand_j[c * stride_j]`` (``stride_j`` 0 for
a one-element operand): the engine passes NV as the bias stride and step j reads ``bias[b_off + j]``
(a compile-time slot, so the kernel cache key depends on NV and the steps, not on the channel count).

:class:`PackedVectors` is that buffer as a tensor descriptor (the Epilogue's ``bias``: dtypes, strides and
typing Flats come out of the engines' usual bias code); it lives at the end of the plan's workspace
(:func:`vector_workspace`) and is filled by :func:`pack_launches` (one launch of
kernels/pointwise/pack.py per operand) before the GEMM in the same plan. Packed dtype: float32 (the
accumulator type; fp16 / bf16 operands are widened exactly), float64 when an operand is float64 (so an
all-fp64 problem loses nothing). All vector operands share one axis ("col": per channel / GEMM column, or
"row"); one-element operands mix in; all one-element packs on the "scalar" axis (slot j read at j).
"""
from dataclasses import dataclass

from ...ir.tensor import TensorDesc
from ...kernels.pointwise import pack as pk
from ...kernels.runtime import kcache
from ...types import cudnnDataType_t, cudnnStatus_t
from .dtypes import Reject, kdtype
from .launch import Flat, argtypes, flat

__all__ = ["PackedVectors", "pack_vectors", "vector_workspace", "pack_launches", "pack_offset", "PACKED_UID",
           "refuse_packed"]

S = cudnnStatus_t

#: the uid the packed buffer is bound under in a plan's views (no graph tensor has a negative uid)
PACKED_UID = -24
ALIGN = 256


@dataclass(eq=False)
class PackedVectors(TensorDesc):
    """The packed operand: dims of the first vector operand, stride NV along its channel dim."""

    operands: tuple = ()        # ((TensorDesc, element stride along the channel, or 0), ...) in slot order
    n: int = 1                  # channels (elements per operand)

    @property
    def nv(self):
        return len(self.operands)

    def span_elements(self):
        return self.n * self.nv

    @property
    def nbytes(self):
        """Bytes the buffer takes in the workspace (aligned)."""
        return -(-self.n * self.nv * self.itemsize // ALIGN) * ALIGN


def _channel(t):
    """(size, stride) of ``t``'s one non-1 dim ((1, 0) for a one-element tensor); None with two or more."""
    big = [i for i, d in enumerate(t.dims) if d != 1]
    if len(big) > 1:
        return None
    return (t.dims[big[0]], t.strides[big[0]]) if big else (1, 0)


def pack_vectors(vectors):
    """The :class:`PackedVectors` of ``vectors``: ((node, tensor, axis), ...) in chain order; raises Reject
    naming the node whose operand does not pack. Returns (packed, axis)."""
    axis, template = None, None
    for n, t, ax in vectors:
        where = f"node '{n.name}' ({getattr(n.mode, 'name', n.mode)})"
        if ax == "scalar":
            continue
        if ax == "batch":
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: operand {t.label} is per batch: two or more "
                         "broadcast operands fuse per channel / column or per row only")
        if axis is not None and ax != axis:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: operand {t.label} is per-{ax} but "
                         f"{template.label} is per-{axis}: two or more broadcast operands fuse only when they "
                         "share one axis")
        if _channel(t) is None:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: operand {t.label} of dims {t.dims} is batched: "
                         "two or more broadcast operands fuse as plain vectors only")
        if axis is None:
            axis, template = ax, t
    axis = axis or "scalar"
    template = template or vectors[0][1]
    size = _channel(template)[0] if axis != "scalar" else 1
    ops = tuple((t, 0 if ax == "scalar" else _channel(t)[1]) for _, t, ax in vectors)
    wide = any(kdtype(t) == "float64" for t, _ in ops)
    nv = len(ops)
    dims = tuple(template.dims)
    strides = tuple(nv if d != 1 else size * nv for d in dims)
    dt = cudnnDataType_t.CUDNN_DATA_DOUBLE if wide else cudnnDataType_t.CUDNN_DATA_FLOAT
    packed = PackedVectors(PACKED_UID, dims, strides, dt, name=f"packed {nv} vector operands", operands=ops,
                           n=size)
    return packed, axis


def _packed(epi):
    b = getattr(epi, "bias", None)
    return b if isinstance(b, PackedVectors) else None


def vector_workspace(epi, base):
    """The workspace of a plan whose other scratch takes ``base`` bytes: unchanged without packed operands,
    else ``base`` aligned plus the packed buffer (placed after everything else)."""
    p = _packed(epi)
    if p is None:
        return base
    return -(-int(base) // ALIGN) * ALIGN + p.nbytes


def pack_offset(epi, total):
    """Byte offset of the packed buffer in a workspace of ``total`` bytes (:func:`vector_workspace`)."""
    return total - _packed(epi).nbytes


def _kernel(src, dst):
    name = f"pointwise_pack_vector|{src}|{dst}"
    typing = (Flat(0, 1, _storage(dst)), Flat(0, 1, _storage(src)), 1, 1, 1, 1)
    return kcache.get_or_compile(name, lambda: pk.make_pack(src, dst), argtypes(typing))


def _storage(name):
    from ...kernels.runtime import dtypes as kdt
    return kdt.storage_dtype(name)


def pack_launches(epi, views, scratch, total):
    """(views with the packed buffer bound under PACKED_UID, its pack launches) for a plan whose workspace
    is ``total`` bytes; (views, []) without packed operands. One launch per operand, n threads each:
    reads n elements of each operand, writes n * NV packed elements."""
    p = _packed(epi)
    if p is None:
        return views, []
    dst_name = kdtype(p)
    off = pack_offset(epi, total)
    dst = Flat(scratch.ptr + off, p.n * p.nv, _storage(dst_name))
    out = []
    for j, (t, stride) in enumerate(p.operands):
        ck = _kernel(kdtype(t), dst_name)
        out.append(ck.prepare(pk.grid(p.n), pk.THREADS, (dst, flat(views[t.uid], t), p.n, p.nv, j, stride)))
    views = dict(views)
    views[PACKED_UID] = _Ptr(scratch.ptr + off, p.n * p.nv * p.itemsize)
    return views, out


class _Ptr:
    """The packed buffer as a view (what Flat binding reads: ptr, nbytes)."""

    __slots__ = ("ptr", "nbytes")

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = int(ptr), int(nbytes)


def refuse_packed(epi, engine):
    """(status, reason) when ``epi`` has packed operands (engines whose kernels were not verified with them),
    else None."""
    if _packed(epi) is None:
        return None
    return (S.CUDNN_STATUS_NOT_SUPPORTED, f"{engine}: {_packed(epi).nv} broadcast operands (packed): two or "
            "more broadcast operands fuse on the SIMT engines only")
