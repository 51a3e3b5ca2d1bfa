"""A graph-level execution plan: the subgraphs of a partitioned graph, each with its engine config
and built :class:`SubPlan`, run in order. Virtual tensors crossing subgraphs live in the workspace.

Workspace layout (every piece 256-byte aligned)::

    [ materialized intermediates ... | scratch shared by the sub-plans (the largest of theirs) ]
"""
from ..errors import CudnnError
from ..types import cudnnStatus_t

S = cudnnStatus_t
ALIGN = 256


def _round_up(n, a=ALIGN):
    return (n + a - 1) // a * a


class ExecutionPlan:
    def __init__(self, graph, parts, materialize):
        self.graph = graph
        self.parts = list(parts)          # SubPlan objects, in execution order
        self.materialize = sorted(materialize)
        tensors = graph.tensors()
        self.offsets = {}
        off = 0
        for uid in self.materialize:
            self.offsets[uid] = off
            off += _round_up(tensors[uid].nbytes_needed())
        self.scratch_offset = off
        self.scratch_size = max([p.workspace_size for p in self.parts] + [0])
        self.workspace_size = off + _round_up(self.scratch_size) if (off or self.scratch_size) else 0
        self._tensors = tensors
        self.external_uids = sorted(uid for uid, t in tensors.items() if not t.is_virtual and not t.is_by_value)

    @property
    def engine_names(self):
        return [p.engine.name for p in self.parts]

    def describe(self):
        return "; ".join(f"{p.sub.describe()} on {p.config}" for p in self.parts)

    def check_workspace(self, workspace_nbytes):
        if self.workspace_size and workspace_nbytes < self.workspace_size:
            raise CudnnError(f"workspace of {workspace_nbytes} bytes, the plan needs {self.workspace_size}",
                             S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)

    def execute(self, buffers, workspace, stream=0):
        """``buffers``: uid -> device array (the dims/strides of the tensor) for every external tensor,
        and by-value scalars; ``workspace``: a device uint8 array (or None when the size is 0)."""
        missing = [u for u in self.external_uids if u not in buffers]
        if missing:
            raise CudnnError(f"variant pack lacks device pointers for uids {missing}", S.CUDNN_STATUS_BAD_PARAM)
        for uid, t in self._tensors.items():
            if t.is_by_value and uid not in buffers:
                buffers[uid] = t.value
        if self.workspace_size:
            if workspace is None:
                raise CudnnError(f"the plan needs {self.workspace_size} bytes of workspace, none given",
                                 S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
            self.check_workspace(workspace.size * workspace.dtype.itemsize)
            for uid in self.materialize:
                buffers[uid] = _typed_view(workspace, self.offsets[uid], self._tensors[uid])
        scratch = workspace[self.scratch_offset:self.scratch_offset + self.scratch_size] \
            if self.scratch_size else None
        for part in self.parts:
            part.execute(buffers, scratch, stream)


def _typed_view(workspace, offset, t):
    """A strided device view of ``t`` inside the byte workspace."""
    from ..memory import view_from_bytes

    return view_from_bytes(workspace, offset, t)
