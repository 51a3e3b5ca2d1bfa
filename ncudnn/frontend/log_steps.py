"""The build pipeline's numbered steps, logged at INFO through cuDNN's logging variables
(``CUDNN_LOGLEVEL_DBG=3``, ``CUDNN_LOGDEST_DBG=stderr``) and, as cudnn-frontend does, to
``CUDNN_FRONTEND_LOG_FILE`` (``stdout``, ``stderr`` or a path) when ``CUDNN_FRONTEND_LOG_INFO=1``::

    pygraph 'conv_bias_relu' 1/5 VALIDATE: 3 operations, 7 tensors
"""
import os
import sys

from .. import log as _log
from ..types import cudnnSeverity_t

STEPS = 5  # validate, build_operation_graph, create_execution_plans, check_support, build_plans


def _frontend_log(msg):
    if os.environ.get("CUDNN_FRONTEND_LOG_INFO", "0") in ("0", ""):
        return
    dest = os.environ.get("CUDNN_FRONTEND_LOG_FILE", "")
    line = f"[cudnn_frontend] INFO: {msg}\n"
    try:
        if dest in ("stdout", "stderr"):
            (sys.stdout if dest == "stdout" else sys.stderr).write(line)
        elif dest:
            with open(dest, "a", encoding="utf-8") as f:
                f.write(line)
    except OSError:
        pass  # an unusable destination: logging goes quiet, as in cudnn-frontend


def info(graph, what):
    msg = f"pygraph '{graph.name}' {what}"
    _frontend_log(msg)
    if _log.enabled(cudnnSeverity_t.CUDNN_SEV_INFO):
        _log.log(cudnnSeverity_t.CUDNN_SEV_INFO, msg, handle=getattr(graph, "handle", None))


def step(graph, n, what, detail=""):
    info(graph, f"{n}/{STEPS} {what}" + (f": {detail}" if detail else ""))
