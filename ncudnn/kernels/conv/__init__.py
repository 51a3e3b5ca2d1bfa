"""Implicit-GEMM convolutions on the GEMM block kernel: geometry (shapes/strides, 1-3 spatial dims),
operands (the swapped A/B loaders and outputs), table (IMPLICIT_PRECOMP_GEMM offsets), fprop,
dgrad, dgrad_phased (strided dgrad as one stride-1 GEMM per output phase), wgrad."""
from .geometry import ConvGeometry, geometry, packed_strides  # noqa: F401
from .fprop import ConvFprop, make_conv_fprop  # noqa: F401
from .dgrad import ConvDgrad, make_conv_dgrad  # noqa: F401
from .dgrad_phased import ConvDgradPhased, make_conv_dgrad_phased  # noqa: F401
from .wgrad import ConvWgrad, make_conv_wgrad  # noqa: F401
