"""Engine "conv_implicit_gemm": convolution fprop / dgrad / wgrad as implicit GEMM (IMPLICIT_GEMM:
the loaders decompose each reduction index themselves, no offset table; no workspace but the
split-K partials).

fprop: M = N*O*P*Q, N = K/G, K = C/G*T*R*S; dgrad gathers dy (exact for any stride); wgrad reduces
over N*O*P*Q with SPLIT_K (deterministic workspace partials by default, SPLIT_K_BUF = 0: atomics,
NONDETERMINISTIC). 1-3 spatial dims, any stride / padding / dilation, groups (depthwise included),
convolution and cross-correlation, NCHW / NHWC / any strides. fprop and dgrad fuse a per-channel
bias, the pointwise chain and one residual (or backward activation) operand; wgrad fuses pointwise
steps. The FALLBACK engine for convolutions.
"""
from ...types import cudnnBackendLayoutType_t
from .common import ConvEngineBase
from ..registry import register


@register
class ConvImplicitGemmEngine(ConvEngineBase):
    name = "conv_implicit_gemm"
    PRECOMP = False
    LOADER_EFF = 0.85   # estimate: per-load index arithmetic against the precomputed table
    fallback = True
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW
