"""``cudnn.experimental``: what cudnn-frontend keeps under ``experimental``, where it has a meaning here.

cudnn-frontend's ``experimental`` holds ``ops``: PyTorch-style entry points that build, cache and run
a cuDNN graph per call signature. :mod:`.ops` has ``scaled_dot_product_attention`` (on pygraph's
``sdpa``). The frontend's ``ops.moe_grouped_matmul`` is not here: ncudnn has no MoE grouped-matmul op.
"""
from . import ops

__all__ = ["ops"]
