"""Finalize checks of the operator descriptors: convolution, pointwise, matmul, reduction, resample, RNG."""
from fractions import Fraction

from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnReduceTensorOp_t as R
from ...types import cudnnResampleMode_t as RM
from ...types import cudnnRngDistribution_t as Rng
from ..attrs import MAX_DIMS
from ..report import bad, unsupported

_CONV_ARRAYS = (A.CUDNN_ATTR_CONVOLUTION_DILATIONS, A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
                A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS)


def finalize_convolution(d):
    nb = d.value(A.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS)
    if not 1 <= nb <= MAX_DIMS - 2:
        bad(d, A.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, f"{nb} spatial dimensions: 1 to {MAX_DIMS - 2} allowed")
    for name in _CONV_ARRAYS:
        vals = d.values(name)
        if len(vals) != nb:
            bad(d, name, f"{len(vals)} element(s) set, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS is {nb}")
    for name, lo in ((A.CUDNN_ATTR_CONVOLUTION_DILATIONS, 1), (A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 1),
                     (A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 0), (A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, 0)):
        for i, v in enumerate(d.values(name)):
            if v < lo:
                bad(d, name, f"element {i} is {v}, must be >= {lo}")


def finalize_pointwise(d):
    """Mode-specific requirements (arity, axis) are checked by the pointwise operation."""


def finalize_matmul(d):
    """Nothing beyond the required compute type."""


#: Reduction operators the reduction descriptor accepts (the rest: NOT_SUPPORTED, as documented).
REDUCTION_OPERATORS = (R.CUDNN_REDUCE_TENSOR_ADD, R.CUDNN_REDUCE_TENSOR_MUL, R.CUDNN_REDUCE_TENSOR_MIN,
                       R.CUDNN_REDUCE_TENSOR_MAX)


def finalize_reduction(d):
    op = d.value(A.CUDNN_ATTR_REDUCTION_OPERATOR)
    if op not in REDUCTION_OPERATORS:
        unsupported(d, A.CUDNN_ATTR_REDUCTION_OPERATOR,
                    f"{op.name} is not supported: use ADD, MUL, MIN or MAX")


_RESAMPLE_ARRAYS = (A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS, A.CUDNN_ATTR_RESAMPLE_STRIDES,
                    A.CUDNN_ATTR_RESAMPLE_PRE_PADDINGS, A.CUDNN_ATTR_RESAMPLE_POST_PADDINGS)


def finalize_resample(d):
    nb = d.value(A.CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS)
    if not 1 <= nb <= MAX_DIMS - 2:
        unsupported(d, A.CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS, f"{nb} spatial dimensions: 1 to {MAX_DIMS - 2} supported")
    for name in _RESAMPLE_ARRAYS:
        vals = d.values(name)
        if len(vals) != nb:
            unsupported(d, name, f"{len(vals)} element(s) set, CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS is {nb}")
    for name, positive in ((A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS, True), (A.CUDNN_ATTR_RESAMPLE_STRIDES, True),
                           (A.CUDNN_ATTR_RESAMPLE_PRE_PADDINGS, False),
                           (A.CUDNN_ATTR_RESAMPLE_POST_PADDINGS, False)):
        for i, v in enumerate(d.values(name)):
            if (positive and Fraction(v) <= 0) or Fraction(v) < 0:
                bad(d, name, f"element {i} is {v}: must be {'positive' if positive else 'non-negative'}")
    mode = d.value(A.CUDNN_ATTR_RESAMPLE_MODE)
    if mode == RM.CUDNN_RESAMPLE_BILINEAR:
        window = d.values(A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS)
        if any(Fraction(w) != 2 for w in window):
            unsupported(d, A.CUDNN_ATTR_RESAMPLE_WINDOW_DIMS,
                        f"CUDNN_RESAMPLE_BILINEAR needs every window dimension to be 2, got {window}")


def finalize_rng(d):
    dist = d.value(A.CUDNN_ATTR_RNG_DISTRIBUTION)
    if dist == Rng.CUDNN_RNG_DISTRIBUTION_NORMAL:
        std = d.value(A.CUDNN_ATTR_RNG_NORMAL_DIST_STANDARD_DEVIATION)
        if std < 0:
            bad(d, A.CUDNN_ATTR_RNG_NORMAL_DIST_STANDARD_DEVIATION,
                f"{std} is negative (the default is -1: set it for CUDNN_RNG_DISTRIBUTION_NORMAL)")
    elif dist == Rng.CUDNN_RNG_DISTRIBUTION_UNIFORM:
        lo = d.value(A.CUDNN_ATTR_RNG_UNIFORM_DIST_MINIMUM)
        hi = d.value(A.CUDNN_ATTR_RNG_UNIFORM_DIST_MAXIMUM)
        if hi < lo:
            bad(d, A.CUDNN_ATTR_RNG_UNIFORM_DIST_MAXIMUM, f"maximum {hi} is below minimum {lo}")
    else:
        p = d.value(A.CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY)
        if p is None:
            bad(d, A.CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY,
                "must be set for CUDNN_RNG_DISTRIBUTION_BERNOULLI")
        if not 0.0 <= p <= 1.0:
            bad(d, A.CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, f"{p} is not a probability in [0, 1]")


FINALIZERS = {
    D.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: finalize_convolution,
    D.CUDNN_BACKEND_POINTWISE_DESCRIPTOR: finalize_pointwise,
    D.CUDNN_BACKEND_MATMUL_DESCRIPTOR: finalize_matmul,
    D.CUDNN_BACKEND_REDUCTION_DESCRIPTOR: finalize_reduction,
    D.CUDNN_BACKEND_RESAMPLE_DESCRIPTOR: finalize_resample,
    D.CUDNN_BACKEND_RNG_DESCRIPTOR: finalize_rng,
}
