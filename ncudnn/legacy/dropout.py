"""Dropout (cudnn_ops.h): descriptor, states / reserve sizes, forward and backward.

Forward draws a keep mask with an Rng node (BERNOULLI(1 - p), Philox seeded by the descriptor's
seed; the offset advances by the element count after every call, so successive calls draw fresh
masks), stores it in the reserve space (x's dims, packed, x's data type) and writes
y = x * mask / (1 - p). Backward reads the same reserve space: dx = dy * mask / (1 - p).
The mask convention is reference/legacy.py's (rng_generate(..., seed, offset, 1 - p)).
The RNG state lives in the descriptor; the states buffer is checked for size and not touched.
"""
import math

from ..errors import BadParamError, c_api
from ..handle import get_handle_or_raise
from ..ir import Rng
from ..ir.tensor import ITEMSIZE, packed_strides
from ..types import cudnnDataType_t, cudnnPointwiseMode_t, cudnnRngDistribution_t
from . import lower as L
from ._util import SIZE_MAX, Descriptor, desc_arg, float_arg, int_arg, need_ptr, size_arg
from .tensor_desc import TensorDescriptor

PM = cudnnPointwiseMode_t
I64 = cudnnDataType_t.CUDNN_DATA_INT64
STATES_SIZE = 64  # bytes cudnnDropoutGetStatesSize reports


class DropoutDescriptor(Descriptor):
    KIND = "Dropout"

    def __init__(self):
        super().__init__()
        self.dropout, self.states, self.state_size, self.seed, self.offset = 0.0, None, 0, 0, 0


@c_api(1)
def cudnnCreateDropoutDescriptor():
    return DropoutDescriptor()


@c_api(0)
def cudnnDestroyDropoutDescriptor(dropoutDesc):
    if dropoutDesc is None:
        return
    desc_arg(dropoutDesc, DropoutDescriptor, "dropoutDesc", need_set=False).destroyed = True


@c_api(1)
def cudnnDropoutGetStatesSize(handle):
    get_handle_or_raise(handle)
    return STATES_SIZE


@c_api(1)
def cudnnDropoutGetReserveSpaceSize(xdesc):
    xd = desc_arg(xdesc, TensorDescriptor, "xdesc")
    return math.prod(xd.dims) * ITEMSIZE[xd.dtype]


def _set(d, handle, dropout, states, stateSizeInBytes, seed, restore):
    get_handle_or_raise(handle)
    p = float_arg(dropout, "dropout")
    if not 0.0 <= p < 1.0:
        raise BadParamError(f"dropout = {p} must be in [0, 1)")
    size = int_arg(stateSizeInBytes or 0, "stateSizeInBytes", 0, SIZE_MAX)
    if states is not None and size < STATES_SIZE:
        raise BadParamError(f"stateSizeInBytes = {size} < cudnnDropoutGetStatesSize() = {STATES_SIZE}")
    if states is None and p > 0 and not restore:
        raise BadParamError("states is NULL: allocate cudnnDropoutGetStatesSize() bytes")
    d.dropout, d.states, d.state_size, d.seed = p, states, size, int_arg(seed, "seed", -2 ** 63, SIZE_MAX) & SIZE_MAX
    if not restore:
        d.offset = 0
    d.is_set = True


@c_api(0)
def cudnnSetDropoutDescriptor(dropoutDesc, handle, dropout, states, stateSizeInBytes, seed):
    d = desc_arg(dropoutDesc, DropoutDescriptor, "dropoutDesc", need_set=False)
    _set(d, handle, dropout, states, stateSizeInBytes, seed, restore=False)


@c_api(0)
def cudnnRestoreDropoutDescriptor(dropoutDesc, handle, dropout, states, stateSizeInBytes, seed):
    d = desc_arg(dropoutDesc, DropoutDescriptor, "dropoutDesc", need_set=False)
    _set(d, handle, dropout, states, stateSizeInBytes, seed, restore=True)


@c_api(3)
def cudnnGetDropoutDescriptor(dropoutDesc, handle):
    """(status, dropout, states, seed)."""
    d = desc_arg(dropoutDesc, DropoutDescriptor, "dropoutDesc")
    get_handle_or_raise(handle)
    return d.dropout, d.states, d.seed


def _reserve(xd, reserveSpace, size):
    need_ptr(reserveSpace, "reserveSpace")
    need = math.prod(xd.dims) * ITEMSIZE[xd.dtype]
    if size_arg(size, "reserveSpaceSizeInBytes") < need:
        raise BadParamError(f"reserveSpaceSizeInBytes = {size}, {need} needed")


def _apply(b, src, mask, out, p, nd):
    keep = b.virtual("kept", dtype=cudnnDataType_t.CUDNN_DATA_FLOAT)
    b.pw(PM.CUDNN_POINTWISE_MUL, keep, "keep", X=src, B=mask)
    b.pw(PM.CUDNN_POINTWISE_MUL, out, "rescale", X=keep, B=b.scalar("scale", nd))


@c_api(0)
def cudnnDropoutForward(handle, dropoutDesc, xdesc, x, ydesc, y, reserveSpace, reserveSpaceSizeInBytes):
    h = get_handle_or_raise(handle)
    d = desc_arg(dropoutDesc, DropoutDescriptor, "dropoutDesc")
    xd, yd = desc_arg(xdesc, TensorDescriptor, "xdesc"), desc_arg(ydesc, TensorDescriptor, "ydesc")
    need_ptr(x, "x"), need_ptr(y, "y")
    if xd.dims != yd.dims:
        raise BadParamError(f"xdesc dims {xd.dims} differ from ydesc dims {yd.dims}")
    _reserve(xd, reserveSpace, reserveSpaceSizeInBytes)
    nd = xd.nbDims

    def build(b):
        mask = b.raw("mask", xd.dims, packed_strides(xd.dims), xd.dtype)
        b.add(Rng("keep_mask", {"SEED": b.scalar("seed", nd, I64), "OFFSET": b.scalar("offset", nd, I64)},
                  {"Y": mask}, distribution=cudnnRngDistribution_t.CUDNN_RNG_DISTRIBUTION_BERNOULLI,
                  bernoulli_probability=1.0 - d.dropout))
        _apply(b, b.tensor("x", xd), mask, b.tensor("y", yd), d.dropout, nd)

    key = ("dropout_fwd", d.dropout, xd.signature(), yd.signature())
    L.run(h, key, build, {"x": x, "y": y, "mask": reserveSpace},
          {"seed": d.seed, "offset": d.offset, "scale": 1.0 / (1.0 - d.dropout)})
    d.offset += (math.prod(xd.dims) + 3) // 4 * 4


@c_api(0)
def cudnnDropoutBackward(handle, dropoutDesc, dydesc, dy, dxdesc, dx, reserveSpace, reserveSpaceSizeInBytes):
    h = get_handle_or_raise(handle)
    d = desc_arg(dropoutDesc, DropoutDescriptor, "dropoutDesc")
    dyd, dxd = desc_arg(dydesc, TensorDescriptor, "dydesc"), desc_arg(dxdesc, TensorDescriptor, "dxdesc")
    need_ptr(dy, "dy"), need_ptr(dx, "dx")
    if dyd.dims != dxd.dims:
        raise BadParamError(f"dydesc dims {dyd.dims} differ from dxdesc dims {dxd.dims}")
    _reserve(dyd, reserveSpace, reserveSpaceSizeInBytes)

    def build(b):
        mask = b.raw("mask", dyd.dims, packed_strides(dyd.dims), dyd.dtype)
        _apply(b, b.tensor("dy", dyd), mask, b.tensor("dx", dxd), d.dropout, dyd.nbDims)

    L.run(h, ("dropout_bwd", dyd.signature(), dxd.signature()), build, {"dy": dy, "dx": dx, "mask": reserveSpace},
          {"scale": 1.0 / (1.0 - d.dropout)})
