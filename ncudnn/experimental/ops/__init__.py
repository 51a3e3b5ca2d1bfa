"""cudnn-frontend's ``experimental.ops`` entry points that ncudnn can run (see :mod:`ncudnn.experimental`)."""
from .sdpa import scaled_dot_product_attention

__all__ = ["scaled_dot_product_attention"]
