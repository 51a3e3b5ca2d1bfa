"""The cudnn-frontend Python API (``import ncudnn as cudnn`` runs code written for ``import cudnn``).

``pygraph`` builds an op graph tensor by tensor and op by op (:mod:`.core`, the ``ops_*`` mixins), lowers
it into :mod:`ncudnn.ir` at ``validate``, plans and builds it through :mod:`ncudnn.engines.api`
(:mod:`.pipeline`, :mod:`.plan_queries`), and executes it on device arrays from torch, CuPy, numba,
``__cuda_array_interface__`` / DLPack producers, or raw pointers. Also: serialization (:mod:`.serialize`),
shape overrides (:mod:`.overrides`), CUDA-graph recording (:mod:`.cudagraph`), the dynamic-shape kernel
cache (:mod:`.kernel_cache`), and the ``graph`` / ``jit`` / ``graph_cache`` / ``Graph`` conveniences
(:mod:`.sugar`).

Not yet: ``transpose`` of intermediate tensors (of graph inputs it runs as a copy; ``slice`` of any
tensor runs, see :mod:`.ops_view`); batch-norm ``peer_stats``; attention options beyond
masks, bias, sequence lengths and dropout.
"""
from .enums import (attention_implementation, behavior_note, build_plan_policy, convolution_mode,
                    cuda_graph_retention, data_type, diagonal_alignment, heur_mode, knob_type, norm_forward_phase,
                    numerical_note, padding_mode, pointwise_mode, reduction_mode, resample_mode, reshape_mode,
                    rng_distribution, scalar_type, tensor_reordering)
from .errors import (cudnnGraphBadParamError, cudnnGraphExecutionFailedError, cudnnGraphInternalError,
                     cudnnGraphNotInitializedError, cudnnGraphNotSupportedError)
from .core import GraphContext, pygraph
from .module import (backend_version, backend_version_string, create_device_properties, create_handle,
                     create_kernel_cache, destroy_handle, get_last_error_string, get_stream, set_stream)
from .plan_queries import knob
from .sugar import Graph, graph, graph_cache, jit
from .tensor import tensor

__all__ = [
    "attention_implementation", "behavior_note", "build_plan_policy", "convolution_mode", "cuda_graph_retention",
    "data_type", "diagonal_alignment", "heur_mode", "knob_type", "norm_forward_phase", "numerical_note",
    "padding_mode", "pointwise_mode", "reduction_mode", "resample_mode", "reshape_mode", "rng_distribution",
    "scalar_type", "tensor_reordering", "cudnnGraphNotSupportedError", "cudnnGraphBadParamError",
    "cudnnGraphInternalError", "cudnnGraphExecutionFailedError", "cudnnGraphNotInitializedError", "pygraph",
    "GraphContext", "tensor", "backend_version", "backend_version_string", "create_handle", "destroy_handle",
    "get_stream", "set_stream", "get_last_error_string", "create_kernel_cache", "create_device_properties",
    "Graph", "graph", "graph_cache", "jit", "knob",
]
