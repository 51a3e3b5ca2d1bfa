"""Engine "conv_implicit_precomp": convolution fprop / dgrad / wgrad as implicit GEMM with a
precomputed offset table (IMPLICIT_PRECOMP_GEMM): fprop / dgrad, per reduction index (channel, t, r,
s), the activation delta, the dilated tap offsets and the filter offset; wgrad, per (n, o, p, q). The
table is built on the host and uploaded once when the plan is built: the plan owns it (20 bytes per
entry), so the per-run workspace holds only split-K partials.

Same problems and fused epilogues as conv_implicit_gemm. Offsets must fit int32. SPLIT_RS = 1 runs
the dgrad of a strided convolution as one stride-1 GEMM per output phase (kernels/conv/dgrad_phased:
no zero tap multiplied, no split-K).
"""
from ...types import cudnnBackendLayoutType_t, cudnnStatus_t
from ..gemm import common as gc
from .common import ConvEngineBase, table_fits
from ..registry import register

S = cudnnStatus_t


@register
class ConvImplicitPrecompEngine(ConvEngineBase):
    name = "conv_implicit_precomp"
    PRECOMP = True
    PHASED = True
    LOADER_EFF = 0.95   # estimate: one table read per load against the plain GEMM loaders
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW

    def extra_check(self, sub, p):
        ok, why = table_fits(p)
        if not ok:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"node '{p.node.name}': {why}")
