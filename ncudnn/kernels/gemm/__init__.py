"""Register-blocked SIMT GEMM: config (knobs, config list, keep), mainloop (the block kernel shared
with implicit-GEMM conv), operands (strided loaders), splitk (reduce / prescale), gemm (factory and
launcher)."""
from .config import CONFIGS, GemmConfig, check, keep  # noqa: F401
from .gemm import GemmKernel, make_gemm, run_gemm  # noqa: F401
