"""Attention engines: the flash-attention SDPA forward (``fwd.py``) and deterministic backward
(``bwd.py``) over :mod:`ncudnn.kernels.attention`; ``common.py`` holds their support check, knobs and
kernel arguments. Importing the package registers both."""
from . import bwd, fwd  # noqa: F401  (registration)
