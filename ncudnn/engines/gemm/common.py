"""What the GEMM-family engines (matmul_*, conv_*, winograd_*) share, under one name (``from ..gemm import
common as gc``):

* tiles.py: the tile tables (TILE_SIZE knob values) and the tile / split / swizzle choices over them;
* cost.py: the cost model (``heuristics.gemm_time`` with a tile's efficiency);
* dtypes.py: :class:`Reject` and the tensor / precision checks of problem translation;
* epilogue.py: the fused epilogue, the subgraph's pointwise chain as a
  :class:`~ncudnn.kernels.pointwise.epilogue.EpilogueSpec` (bias, unary pointwise, scale, one residual /
  backward-activation operand), or a reason why not;
* launch.py: compile through the kernel cache and prepare ``cuLaunchKernel`` launches of a
  :class:`~ncudnn.kernels.gemm.launch.BlockKernels` (main kernel, split-K reduce or prescale);
* packing.py: two or more broadcast vector operands packed into one (workspace, pack launches);
* plans.py: the built plans and the trailing reduction / genstats (Tail).
"""
from ...types import cudnnBackendKnobType_t, cudnnPointwiseMode_t, cudnnStatus_t
from . import cost as _cost, dtypes as _dtypes, epilogue as _epilogue, launch as _launch, plans as _plans
from . import packing as _packing, tiles as _tiles
from .cost import *       # noqa: F401,F403
from .dtypes import *     # noqa: F401,F403
from .epilogue import *   # noqa: F401,F403
from .launch import *     # noqa: F401,F403
from .packing import *    # noqa: F401,F403
from .plans import *      # noqa: F401,F403
from .tiles import *      # noqa: F401,F403

S = cudnnStatus_t
K = cudnnBackendKnobType_t
PM = cudnnPointwiseMode_t

__all__ = ["S", "K", "PM"] + [name for m in (_tiles, _cost, _dtypes, _epilogue, _launch, _packing, _plans) for name in m.__all__]

