"""One node class per op. ``NODE_TYPES`` maps the stable op name to its class."""
from .bn_bwd_weights import BnBwdWeights
from .bn_finalize import BnFinalize
from .conv_dgrad import ConvDgrad
from .conv_fprop import ConvFprop
from .conv_wgrad import ConvWgrad
from .ctc_loss import CtcLoss
from .data_movement import Concat, Reshape, Slice
from .genstats import GenStats
from .matmul import Matmul
from .misc import BlockScaleDequantize, BlockScaleQuantize, PagedCacheLoad, Rng, Signal
from .norm_bwd import NormBwd
from .norm_fwd import NormFwd
from .pointwise import Pointwise
from .reduction import Reduction
from .resample_bwd import ResampleBwd
from .resample_fwd import ResampleFwd
from .sdpa import SdpaBwd, SdpaFwd

NODE_TYPES = {cls.OP: cls for cls in (
    ConvFprop, ConvDgrad, ConvWgrad, Matmul, Pointwise, Reduction, GenStats, BnFinalize, BnBwdWeights,
    NormFwd, NormBwd, ResampleFwd, ResampleBwd, Concat, Reshape, Rng, Signal, BlockScaleQuantize,
    BlockScaleDequantize, PagedCacheLoad, SdpaFwd, SdpaBwd, Slice, CtcLoss)}

__all__ = [c.__name__ for c in NODE_TYPES.values()] + ["NODE_TYPES"]
