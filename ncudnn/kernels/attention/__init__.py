"""Attention kernels: the flash-attention forward and the deterministic backward (``fwd.py``,
``bwd.py``), their compile-time knobs (``config.py``) and the shared mask / bias device functions
(``spec.py``); ``cases.py`` registers sm_90 compile checks."""
from .config import AttnConfig, configs, default_config, keep, shortlist, smem_bytes
from .spec import AttnSpec

__all__ = ["AttnConfig", "AttnSpec", "configs", "default_config", "keep", "shortlist", "smem_bytes"]
