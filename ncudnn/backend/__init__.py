"""The cudnn_graph backend descriptor API (``cudnnBackend*``), C-style, over the IR and the engine layer.

``api.py`` holds the functions; ``machinery.py`` the generic Set/Get/Finalize semantics; the
``schema_*.py`` modules the attribute schema of every descriptor type; ``checks/`` the per-descriptor
finalize checks; ``lower.py`` the lowering of an operation graph to ``ncudnn.ir``;
``engine_bridge.py`` the calls into ``ncudnn.engines``; ``execute.py`` cudnnBackendExecute.
"""
from .api import (cudnnBackendCreateDescriptor, cudnnBackendDestroyDescriptor, cudnnBackendExecute,
                  cudnnBackendFinalize, cudnnBackendGetAttribute, cudnnBackendInitialize,
                  cudnnBackendPopulateCudaGraph, cudnnBackendSetAttribute, cudnnBackendUpdateCudaGraph,
                  cudnnGetExecutionPlanWorkspaceSize)
from .descriptor import BackendDescriptor
from .lower import lower_operation_graph

__all__ = ["cudnnBackendCreateDescriptor", "cudnnBackendDestroyDescriptor", "cudnnBackendExecute",
           "cudnnBackendFinalize", "cudnnBackendGetAttribute", "cudnnBackendInitialize",
           "cudnnBackendPopulateCudaGraph", "cudnnBackendSetAttribute", "cudnnBackendUpdateCudaGraph",
           "cudnnGetExecutionPlanWorkspaceSize", "BackendDescriptor", "lower_operation_graph"]
