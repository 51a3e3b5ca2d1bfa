"""The build pipeline's numbered steps, logged at INFO through cuDNN's logging variables
(``CUDNN_LOGLEVEL_DBG=3``, ``CUDNN_LOGDEST_DBG=stderr``)::

    pygraph 'conv_bias_relu' 1/5 VALIDATE: 3 operations, 7 tensors
"""
from .. import log as _log
from ..types import cudnnSeverity_t

STEPS = 5  # validate, build_operation_graph, create_execution_plans, check_support, build_plans


def step(graph, n, what, detail=""):
    if not _log.enabled(cudnnSeverity_t.CUDNN_SEV_INFO):
        return
    msg = f"pygraph '{graph.name}' {n}/{STEPS} {what}" + (f": {detail}" if detail else "")
    _log.log(cudnnSeverity_t.CUDNN_SEV_INFO, msg, handle=getattr(graph, "handle", None))


def info(graph, what):
    if _log.enabled(cudnnSeverity_t.CUDNN_SEV_INFO):
        _log.log(cudnnSeverity_t.CUDNN_SEV_INFO, f"pygraph '{graph.name}' {what}",
                 handle=getattr(graph, "handle", None))
