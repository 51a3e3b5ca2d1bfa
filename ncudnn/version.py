"""Version queries: which cuDNN API level ncudnn implements, and what it runs on."""
from .errors import c_api, CudnnError
from .types import MACROS

__version__ = "0.1.0"

#: The cuDNN API level implemented, in cuDNN's encoding major*10000 + minor*100 + patch.
CUDNN_MAJOR = MACROS["CUDNN_MAJOR"]
CUDNN_MINOR = MACROS["CUDNN_MINOR"]
CUDNN_PATCHLEVEL = MACROS["CUDNN_PATCHLEVEL"]
CUDNN_VERSION = CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL

# libraryPropertyType (library_types.h, not a cuDNN enum): MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL = 0, 1, 2


def cudnnGetVersion():
    """size_t cudnnGetVersion(void): the API level (92700 for 9.27.0). Returns a plain int, as in C."""
    return CUDNN_VERSION


def cudnnGetMaxDeviceVersion():
    """size_t: the newest SM this build knows (CUDNN_MAX_SM_MAJOR/MINOR_NUMBER, encoded major*100+minor*10)."""
    return MACROS["CUDNN_MAX_SM_MAJOR_NUMBER"] * 100 + MACROS["CUDNN_MAX_SM_MINOR_NUMBER"] * 10


def cudnnGetCudartVersion():
    """size_t: the CUDA runtime version ncudnn's kernels are compiled against (e.g. 13050), 0 if unknown."""
    try:
        from cuda.bindings import runtime

        err, ver = runtime.cudaRuntimeGetVersion()
        return int(ver) if int(err) == 0 else 0
    except Exception:
        return 0


@c_api(1)
def cudnnGetProperty(type):
    """(status, value) for libraryPropertyType MAJOR_VERSION (0), MINOR_VERSION (1), PATCH_LEVEL (2)."""
    table = {MAJOR_VERSION: CUDNN_MAJOR, MINOR_VERSION: CUDNN_MINOR, PATCH_LEVEL: CUDNN_PATCHLEVEL}
    try:
        return table[int(type)]
    except (KeyError, TypeError, ValueError):
        raise CudnnError(f"libraryPropertyType {type!r} is not MAJOR_VERSION, MINOR_VERSION or PATCH_LEVEL",
                         2000)


@c_api(0)
def cudnnGraphVersionCheck():
    """(status,): SUCCESS when the graph sub-library matches the API level (always true: one package)."""
    if MACROS["CUDNN_GRAPH_MAJOR"] != CUDNN_MAJOR or MACROS["CUDNN_GRAPH_MINOR"] != CUDNN_MINOR:
        raise CudnnError("graph sub-library version differs from the core", 1002)



@c_api(0)
def cudnnOpsVersionCheck():
    """(status,): the ops sub-library matches the core."""


@c_api(0)
def cudnnCnnVersionCheck():
    """(status,): the cnn sub-library matches the core."""


@c_api(0)
def cudnnAdvVersionCheck():
    """(status,): the adv sub-library matches the core."""
