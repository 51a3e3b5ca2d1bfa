"""ncudnn: cuDNN rebuilt from scratch in Python, every kernel a hand-written numba.cuda kernel.

Three cuDNN-compatible front ends (the backend descriptor API, the cudnn-frontend ``pygraph`` API and
the legacy v7-style API) over one op-graph IR, one engine layer and one kernel layer.
"""
from . import platform as _platform

# Must run before anything imports numba: with no GPU, kernels run in numba's CUDA simulator.
SIMULATOR = _platform.select_backend()

from . import types  # noqa: E402
from .types import *  # noqa: E402,F401,F403  (the 69 enum classes)
from .errors import (  # noqa: E402,F401
    CUDNN_STATUS_CATEGORY, CUDNN_STATUS_FULL_ERROR_CODE, CUDNN_STATUS_SPECIFIC_ERROR, BadParamError,
    CudnnError, ExecutionFailedError, InternalError, NotInitializedError, NotSupportedError,
    cudnnGetErrorString, cudnnGetLastErrorString)
from .version import (  # noqa: E402,F401
    CUDNN_VERSION, __version__, cudnnAdvVersionCheck, cudnnCnnVersionCheck, cudnnGetCudartVersion,
    cudnnGetMaxDeviceVersion, cudnnGetProperty, cudnnGetVersion, cudnnGraphVersionCheck,
    cudnnOpsVersionCheck)


def _export_enum_values(namespace):
    """Every enum value as a module-level constant: ncudnn.CUDNN_STATUS_BAD_PARAM, ..."""
    for enum_cls in types.ENUMS.values():
        for name, member in enum_cls.__members__.items():
            namespace.setdefault(name, member)


_export_enum_values(globals())

from .handle import (  # noqa: E402,F401
    cudnnCreate, cudnnDestroy, cudnnGetStream, cudnnQueryRuntimeError, cudnnSetStream)
from .log import cudnnDebug_t, cudnnGetCallback, cudnnSetCallback  # noqa: E402,F401

# cudnn-frontend Python API: `import ncudnn as cudnn` runs code written for `import cudnn`
from .frontend import *  # noqa: E402,F401,F403

# the cudnn_graph backend descriptor API (C-style: (status, *outs))
from .backend import (  # noqa: E402,F401
    cudnnBackendCreateDescriptor, cudnnBackendDestroyDescriptor, cudnnBackendExecute, cudnnBackendFinalize,
    cudnnBackendGetAttribute, cudnnBackendInitialize, cudnnBackendPopulateCudaGraph, cudnnBackendSetAttribute,
    cudnnBackendUpdateCudaGraph, cudnnGetExecutionPlanWorkspaceSize)

# the legacy cudnn_ops / cudnn_cnn API (C-style: (status, *outs)); ncudnn.legacy lists it
from .legacy import *  # noqa: E402,F401,F403

# cudnn-frontend's ``cudnn.experimental`` (its ``ops``), where it has a meaning here
from . import experimental  # noqa: E402,F401
