"""Multi-head attention descriptors of cudnn_adv.h: cudnnAttnDescriptor_t, cudnnSeqDataDescriptor_t, the
buffer sizes (cudnnGetMultiHeadAttnBuffers) and the weight layout (cudnnGetMultiHeadAttnWeights).

Sequence data: ``dimA`` is indexed by cudnnSeqDataAxis_t (dimA[TIME] = T, dimA[BATCH] = B, dimA[BEAM] = N,
dimA[VECT] = C); ``axes`` lists the axes from the outermost (slowest) to the innermost, which must be VECT;
the buffer is packed in that order. ``seqLengthArray`` holds one length per (batch, beam) pair.

The weights buffer (ncudnn's layout; every block packed, in this order, biases only with
CUDNN_ATTN_ENABLE_PROJ_BIASES; a block is absent when its projection size is 0):

    Wq [H, Pq, Cq]   Wk [H, Pk, Ck]   Wv [H, Pv, Cv]   (packed: W[h, p, c] at (h * P + p) * C + c)
    Wo [H, Co, Pv]   strides (Pv, H * Pv, 1): row o of the [Co, H * Pv] matrix holds every head's inputs
    bq [H, Pq, 1]    bk [H, Pk, 1]     bv [H, Pv, 1]     bo [1, Co, 1]

cudnnGetMultiHeadAttnWeights reports each block as a 3-d tensor descriptor with those dims and strides and
its address in ``weights``; a disabled block (biases off, a zero projection size) gives SUCCESS with a NULL
address and ``wDesc`` untouched. The dims match ``ncudnn.reference.mha``'s weights dict.

Work space (forward, inference) / reserve space (training; the backward calls read it): the projected Q, K,
V, the attention output, the output projection before the residual and padding ([B*N, T, ...] packed,
data type), the attention's logsumexp statistics, and the backward's gradients of those (buffer_layout),
each block 256-byte aligned, sized by the descriptor's maxima.
"""
import math

from ..errors import BadParamError, NotSupportedError, c_api
from ..handle import get_handle_or_raise
from ..ir.tensor import ITEMSIZE
from ..memory import device_pointer
from ..types import (cudnnDataType_t, cudnnMathType_t, cudnnMultiHeadAttnWeightKind_t, cudnnSeqDataAxis_t,
                     cudnnStatus_t)
from ._util import Descriptor, desc_arg, enum_arg, float_arg, host_scalar, int_arg, int_array, need_ptr, size_arg
from .dropout import DropoutDescriptor
from .tensor_desc import TensorDescriptor

S = cudnnStatus_t
DT = cudnnDataType_t
AX = cudnnSeqDataAxis_t
WK = cudnnMultiHeadAttnWeightKind_t
CUDNN_ATTN_QUERYMAP_ALL_TO_ONE = 0
CUDNN_ATTN_QUERYMAP_ONE_TO_ONE = 1 << 0
CUDNN_ATTN_DISABLE_PROJ_BIASES = 0
CUDNN_ATTN_ENABLE_PROJ_BIASES = 1 << 1
MODE_BITS = CUDNN_ATTN_QUERYMAP_ONE_TO_ONE | CUDNN_ATTN_ENABLE_PROJ_BIASES
DATA_TYPES = (DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_DOUBLE)
ALIGN = 256


def _align(n):
    return (int(n) + ALIGN - 1) // ALIGN * ALIGN


class SeqDataDescriptor(Descriptor):
    KIND = "SeqData"

    def __init__(self):
        super().__init__()
        self.dtype, self.dims, self.axes, self.seq_lens, self.fill = None, (), (), (), None

    def axis(self, ax):
        return self.dims[int(ax)]

    def strides(self):
        """Element strides indexed by cudnnSeqDataAxis_t (the buffer packed in ``axes`` order)."""
        st, s = [0] * 4, 1
        for ax in reversed(self.axes):
            st[int(ax)] = s
            s *= self.dims[int(ax)]
        return st

    def nbytes(self):
        return math.prod(self.dims) * ITEMSIZE[self.dtype]

    def signature(self):
        return (int(self.dtype), self.dims, tuple(int(a) for a in self.axes))


@c_api(1)
def cudnnCreateSeqDataDescriptor():
    return SeqDataDescriptor()


@c_api(0)
def cudnnDestroySeqDataDescriptor(seqDataDesc):
    if seqDataDesc is None:
        return
    desc_arg(seqDataDesc, SeqDataDescriptor, "seqDataDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetSeqDataDescriptor(seqDataDesc, dataType, nbDims, dimA, axes, seqLengthArraySize, seqLengthArray,
                              paddingFill):
    d = desc_arg(seqDataDesc, SeqDataDescriptor, "seqDataDesc", need_set=False)
    dt = enum_arg(DT, dataType, "dataType")
    if dt not in DATA_TYPES:
        raise NotSupportedError(f"dataType = {dt.name}: sequence data are HALF, FLOAT or DOUBLE")
    n = int_arg(nbDims, "nbDims")
    if n != 4:
        raise BadParamError(f"nbDims = {n}: sequence data have CUDNN_SEQDATA_DIM_COUNT = 4 dims")
    dims = int_array(dimA, 4, "dimA")
    if any(x <= 0 for x in dims):
        raise BadParamError(f"dimA = {list(dims)}: every dim must be positive")
    ax = tuple(enum_arg(AX, a, f"axes[{i}]") for i, a in enumerate(int_array(axes, 4, "axes")))
    if sorted(int(a) for a in ax) != [0, 1, 2, 3]:
        raise BadParamError(f"axes = {[a.name for a in ax]} is not a permutation of the four axes")
    if ax[3] != AX.CUDNN_SEQDATA_VECT_DIM:
        raise BadParamError(f"axes[3] = {ax[3].name}: the vector dim must be the innermost")
    count = size_arg(seqLengthArraySize, "seqLengthArraySize")
    nb = dims[AX.CUDNN_SEQDATA_BATCH_DIM] * dims[AX.CUDNN_SEQDATA_BEAM_DIM]
    if count != nb:
        raise BadParamError(f"seqLengthArraySize = {count}, batch * beam = {nb} lengths needed")
    lens = int_array(seqLengthArray, nb, "seqLengthArray")
    t = dims[AX.CUDNN_SEQDATA_TIME_DIM]
    if any(not 0 <= x <= t for x in lens):
        raise BadParamError(f"seqLengthArray = {list(lens)}: each length must be in [0, {t}] (dimA[TIME])")
    fill = None if paddingFill is None else host_scalar(paddingFill, "paddingFill")
    d.dtype, d.dims, d.axes, d.seq_lens, d.fill = dt, dims, ax, lens, fill
    d.is_set = True


@c_api(7)
def cudnnGetSeqDataDescriptor(seqDataDesc, nbDimsRequested, seqLengthSizeRequested):
    """(status, dataType, nbDims, dimA, axes, seqLengthArraySize, seqLengthArray, paddingFill): the first
    nbDimsRequested dims / axes and seqLengthSizeRequested lengths."""
    d = desc_arg(seqDataDesc, SeqDataDescriptor, "seqDataDesc")
    nreq = int_arg(nbDimsRequested, "nbDimsRequested", 0)
    lreq = size_arg(seqLengthSizeRequested, "seqLengthSizeRequested")
    return (d.dtype, 4, list(d.dims[:nreq]), [a for a in d.axes[:nreq]], len(d.seq_lens),
            list(d.seq_lens[:lreq]), d.fill)


class AttnDescriptor(Descriptor):
    KIND = "Attn"

    FIELDS = ("attnMode", "nHeads", "smScaler", "dataType", "computePrec", "mathType", "attnDropoutDesc",
              "postDropoutDesc", "qSize", "kSize", "vSize", "qProjSize", "kProjSize", "vProjSize", "oProjSize",
              "qoMaxSeqLength", "kvMaxSeqLength", "maxBatchSize", "maxBeamSize")

    def __init__(self):
        super().__init__()
        self.v = {}

    def __getattr__(self, name):
        v = self.__dict__.get("v")
        if v is not None and name in v:
            return v[name]
        raise AttributeError(name)

    @property
    def biases(self):
        return bool(self.attnMode & CUDNN_ATTN_ENABLE_PROJ_BIASES)

    @property
    def one_to_one(self):
        return bool(self.attnMode & CUDNN_ATTN_QUERYMAP_ONE_TO_ONE)

    def proj(self):
        """(Pq, Pk, Pv, Co): the per-head projection sizes (the input size where a projection is off) and the
        output vector size."""
        pq = self.qProjSize or self.qSize
        pk = self.kProjSize or self.kSize
        pv = self.vProjSize or self.vSize
        return pq, pk, pv, self.oProjSize or self.nHeads * pv

    def blocks(self):
        """wKind -> (element offset, dims, strides) of each weight block present in the weights buffer."""
        H = self.nHeads
        pq, pk, pv, co = self.proj()
        out, off = {}, 0
        specs = [(WK.CUDNN_MH_ATTN_Q_WEIGHTS, self.qProjSize, (H, pq, self.qSize), None),
                 (WK.CUDNN_MH_ATTN_K_WEIGHTS, self.kProjSize, (H, pk, self.kSize), None),
                 (WK.CUDNN_MH_ATTN_V_WEIGHTS, self.vProjSize, (H, pv, self.vSize), None),
                 (WK.CUDNN_MH_ATTN_O_WEIGHTS, self.oProjSize, (H, co, pv), (pv, H * pv, 1))]
        if self.biases:
            specs += [(WK.CUDNN_MH_ATTN_Q_BIASES, self.qProjSize, (H, pq, 1), None),
                      (WK.CUDNN_MH_ATTN_K_BIASES, self.kProjSize, (H, pk, 1), None),
                      (WK.CUDNN_MH_ATTN_V_BIASES, self.vProjSize, (H, pv, 1), None),
                      (WK.CUDNN_MH_ATTN_O_BIASES, self.oProjSize, (1, co, 1), None)]
        for kind, on, dims, strides in specs:
            if not on:
                continue
            out[kind] = (off, dims, strides or (dims[1] * dims[2], dims[2], 1))
            off += math.prod(dims)
        return out

    def weight_elems(self):
        return sum(math.prod(d) for _, d, _ in self.blocks().values())

    def itemsize(self):
        return ITEMSIZE[self.dataType]

    def buffer_layout(self, B, Tq, Tk):
        """name -> (byte offset, elements) of the intermediates in the work / reserve space; total bytes.
        Forward: Q, K, V (projected), A (attention output), Y (output projection), STATS (float32 logsumexp,
        training); backward: dQ, dK, dV (projected gradients), dA, G (float32 per-batch weight-gradient
        partials)."""
        H = self.nHeads
        pq, pk, pv, co = self.proj()
        isz, f32 = self.itemsize(), 4
        wmax = max([math.prod(d) for _, d, _ in self.blocks().values()] or [1])
        sizes = (("Q", B * Tq * H * pq, isz), ("K", B * Tk * H * pk, isz), ("V", B * Tk * H * pv, isz),
                 ("A", B * Tq * H * pv, isz), ("Y", B * Tq * co, isz), ("STATS", B * H * Tq, f32),
                 ("dQ", B * Tq * H * pq, isz), ("dK", B * Tk * H * pk, isz), ("dV", B * Tk * H * pv, isz),
                 ("dA", B * Tq * H * pv, isz), ("G", B * wmax, f32))
        out, off = {}, 0
        for name, n, item in sizes:
            out[name] = (off, n)
            off += _align(n * item)
        return out, off


@c_api(1)
def cudnnCreateAttnDescriptor():
    return AttnDescriptor()


@c_api(0)
def cudnnDestroyAttnDescriptor(attnDesc):
    if attnDesc is None:
        return
    desc_arg(attnDesc, AttnDescriptor, "attnDesc", need_set=False).destroyed = True


def _dropout(desc, name):
    if desc is None:
        return None
    return desc_arg(desc, DropoutDescriptor, name, need_set=False)


@c_api(0)
def cudnnSetAttnDescriptor(attnDesc, attnMode, nHeads, smScaler, dataType, computePrec, mathType, attnDropoutDesc,
                           postDropoutDesc, qSize, kSize, vSize, qProjSize, kProjSize, vProjSize, oProjSize,
                           qoMaxSeqLength, kvMaxSeqLength, maxBatchSize, maxBeamSize):
    d = desc_arg(attnDesc, AttnDescriptor, "attnDesc", need_set=False)
    mode = int_arg(attnMode, "attnMode", 0, 2 ** 32 - 1)
    if mode & ~MODE_BITS:
        raise BadParamError(f"attnMode = {mode:#x}: only CUDNN_ATTN_QUERYMAP_ONE_TO_ONE (1) and "
                            "CUDNN_ATTN_ENABLE_PROJ_BIASES (2) are flags")
    sm = float_arg(smScaler, "smScaler")
    if not (math.isfinite(sm) and sm > 0):
        raise BadParamError(f"smScaler = {sm}: the softmax scaler must be a positive finite number")
    dt = enum_arg(DT, dataType, "dataType")
    cp = enum_arg(DT, computePrec, "computePrec")
    mt = enum_arg(cudnnMathType_t, mathType, "mathType")
    if dt not in DATA_TYPES:
        raise NotSupportedError(f"dataType = {dt.name}: multi-head attention takes HALF, FLOAT or DOUBLE")
    allowed = {DT.CUDNN_DATA_HALF: (DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_FLOAT)}.get(dt, (dt,))
    if cp not in allowed:
        raise BadParamError(f"computePrec = {cp.name} with dataType = {dt.name}: one of "
                            f"{[a.name for a in allowed]}")
    drops = (_dropout(attnDropoutDesc, "attnDropoutDesc"), _dropout(postDropoutDesc, "postDropoutDesc"))
    names = AttnDescriptor.FIELDS[8:]
    vals = dict(zip(names, (qSize, kSize, vSize, qProjSize, kProjSize, vProjSize, oProjSize, qoMaxSeqLength,
                            kvMaxSeqLength, maxBatchSize, maxBeamSize)))
    ints = {}
    for name, v in vals.items():
        lo = 0 if name.endswith("ProjSize") else 1
        x = int_arg(v, name)
        if x < lo:
            raise BadParamError(f"{name} = {x} must be {'>= 0' if lo == 0 else 'positive'}")
        ints[name] = x
    if ints["qProjSize"] != ints["kProjSize"]:
        raise BadParamError(f"qProjSize = {ints['qProjSize']} differs from kProjSize = {ints['kProjSize']}: "
                            "queries and keys are dotted after projection")
    if not ints["qProjSize"] and ints["qSize"] != ints["kSize"]:
        raise BadParamError(f"qSize = {ints['qSize']} differs from kSize = {ints['kSize']} with the Q/K "
                            "projections off")
    d.v = dict(attnMode=mode, nHeads=int_arg(nHeads, "nHeads", 1), smScaler=sm, dataType=dt, computePrec=cp,
               mathType=mt, attnDropoutDesc=attnDropoutDesc, postDropoutDesc=postDropoutDesc, **ints)
    d.drops = drops
    d.is_set = True


@c_api(19)
def cudnnGetAttnDescriptor(attnDesc):
    """(status, attnMode, nHeads, smScaler, dataType, computePrec, mathType, attnDropoutDesc, postDropoutDesc,
    qSize, kSize, vSize, qProjSize, kProjSize, vProjSize, oProjSize, qoMaxSeqLength, kvMaxSeqLength,
    maxBatchSize, maxBeamSize)."""
    d = desc_arg(attnDesc, AttnDescriptor, "attnDesc")
    return tuple(d.v[f] for f in AttnDescriptor.FIELDS)


@c_api(3)
def cudnnGetMultiHeadAttnBuffers(handle, attnDesc):
    """(status, weightSizeInBytes, workSpaceSizeInBytes, reserveSpaceSizeInBytes)."""
    get_handle_or_raise(handle)
    d = desc_arg(attnDesc, AttnDescriptor, "attnDesc")
    _, size = d.buffer_layout(d.maxBatchSize * d.maxBeamSize, d.qoMaxSeqLength, d.kvMaxSeqLength)
    return d.weight_elems() * d.itemsize(), size, size


@c_api(1)
def cudnnGetMultiHeadAttnWeights(handle, attnDesc, wKind, weightSizeInBytes, weights, wDesc):
    """(status, wAddr): the device address of block ``wKind`` in ``weights`` (an int; None, C's NULL, for a
    disabled block); ``wDesc`` is set to the block's 3-d dims and strides."""
    get_handle_or_raise(handle)
    d = desc_arg(attnDesc, AttnDescriptor, "attnDesc")
    kind = enum_arg(WK, wKind, "wKind")
    size = size_arg(weightSizeInBytes, "weightSizeInBytes")
    need_ptr(weights, "weights")
    td = desc_arg(wDesc, TensorDescriptor, "wDesc", need_set=False)
    need = d.weight_elems() * d.itemsize()
    if size != need:
        raise BadParamError(f"weightSizeInBytes = {size}, cudnnGetMultiHeadAttnBuffers reports {need}")
    block = d.blocks().get(kind)
    if block is None:
        return (None,)   # C's NULL
    off, dims, strides = block
    td.set(d.dataType, dims, strides)
    return device_pointer(weights) + off * d.itemsize()
