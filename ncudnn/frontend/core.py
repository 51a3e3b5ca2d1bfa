"""``cudnn.pygraph``: graph construction (tensors, op records) and ``validate``.

Every op method (in the ``ops_*`` mixins) appends an :class:`OpRecord`: the frontend op name, the
node name, its tensor arguments by keyword, its other arguments, its output tensors, and a ``lower``
function that turns the record into IR nodes. ``validate`` lowers every record into a fresh
:class:`ncudnn.ir.OpGraph` and finalizes it, which checks the graph and infers the dims, strides and
data types of the outputs (visible afterwards through ``get_dim()`` etc.). Planning, building and
execution live in :mod:`.pipeline`; serialization in :mod:`.serialize`.
"""
import json
import numbers
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np

from ..errors import CudnnError
from ..ir import OpGraph
from ..ir.tensor import packed_strides
from ..types import cudnnDataType_t, cudnnStatus_t
from . import log_steps
from .enums import data_type, scalar_type, to_ir_dtype
from .errors import graph_error, reraise
from .kernel_cache import kernel_cache as KernelCache
from .ops_conv import ConvMatmulOps
from .ops_norm import NormOps
from .ops_other import OtherOps
from .ops_pointwise import PointwiseOps
from .pipeline import PipelineMixin
from .serialize import SerializeMixin
from .tensor import USER_DIMS, USER_DTYPE, USER_STRIDES, USER_UID, new_desc, tensor
from .values import describe_array, host_scalar, np_scalar, scalar_dtype

S = cudnnStatus_t
DT = cudnnDataType_t


@dataclass
class OpRecord:
    kind: str                                   # the frontend method name ("conv_fprop")
    name: str                                   # node name (outputs are "<name>::<PORT>")
    tensors: Dict[str, object]                  # tensor kwargs: port -> tensor, or list of tensors
    params: Dict[str, object]                   # the other kwargs, as given (after defaults)
    outputs: List[Optional[tensor]]             # in return order (None for an absent output)
    out_ports: List[str]
    lower: Callable = None                      # (graph, record) -> [IR nodes]
    compute_data_type: object = None
    extra: Dict[str, object] = field(default_factory=dict)   # hidden tensors (e.g. an internal epsilon)

    def out(self, port):
        return self.outputs[self.out_ports.index(port)]


@dataclass
class GraphContext:
    io_data_type: object = None
    intermediate_data_type: object = None
    compute_data_type: object = None


class pygraph(PointwiseOps, ConvMatmulOps, NormOps, OtherOps, PipelineMixin, SerializeMixin):
    """A cuDNN operation graph, built op by op, validated, planned, built and executed.

    >>> g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, compute_data_type=cudnn.data_type.FLOAT)
    >>> X = g.tensor(name="X", dim=[8, 64, 56, 56], stride=[200704, 1, 3584, 64])
    >>> Y = g.relu(input=X); Y.set_output(True)
    >>> g.build([cudnn.heur_mode.A]); g.execute({X: x, Y: y}, workspace)
    """

    def __init__(self, name="test_graph", io_data_type=None, intermediate_data_type=None,
                 compute_data_type=None, handle=None, sm_count=None, sm_version=None, kernel_cache=None,
                 device_property=None, is_dynamic_shape_enabled=False, is_override_shape_enabled=False,
                 cuda_graph_retention=None, **kwargs):
        io = to_ir_dtype(io_data_type)
        self.name = name
        self._context = GraphContext(io, _first(to_ir_dtype(intermediate_data_type), io),
                                     _first(to_ir_dtype(compute_data_type), io))
        self.handle = handle
        self.sm_count = sm_count
        self.sm_version = sm_version
        if kernel_cache is not None and not isinstance(kernel_cache, KernelCache):
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{name}': kernel_cache must come from "
                              f"cudnn.create_kernel_cache(), got {type(kernel_cache).__name__}")
        self.kernel_cache = kernel_cache
        self.device_property = device_property
        # a kernel cache turns dynamic shapes on, as cudnn-frontend's pygraph does
        self.is_dynamic_shape_enabled = bool(is_dynamic_shape_enabled) or kernel_cache is not None
        self.is_override_shape_enabled = bool(is_override_shape_enabled)
        self.cuda_graph_retention = cuda_graph_retention
        self.options = dict(kwargs)
        self._tensors: List[tensor] = []
        self._by_uid: Dict[int, tensor] = {}
        self._records: List[OpRecord] = []
        self._node_count: Dict[str, int] = {}
        self._next_uid = 1
        self._bindings: Dict[int, object] = {}  # uid -> array given in place of a tensor at build time
        self._views: Dict[tensor, tuple] = {}  # hidden view tensor -> (graph input, element offset): ops_view
        self._ir = None
        self._validated = False
        self._init_pipeline()

    # ================================================================== tensors
    def tensor(self, dim, stride=None, data_type=data_type.NOT_SET, is_virtual=False, is_pass_by_value=False,
               ragged_offset=None, reordering_type=None, name="", uid=-1, ragged_offset_multiplier=1,
               alignment_value=1, **kwargs):
        """A graph tensor. ``stride`` defaults to packed row-major; ``data_type`` to the graph's io type
        (intermediate type when virtual) at validate. Accepts torch / NumPy dtypes as ``data_type``."""
        dim = list(dim) if dim is not None else []
        if stride is None or not len(stride):
            stride = list(packed_strides(dim)) if dim else None
        t = self._new_tensor(dims=dim, strides=stride, dtype=data_type, is_virtual=is_virtual,
                             is_by_value=is_pass_by_value, name=name, uid=uid)
        if reordering_type is not None:
            t.set_reordering_type(reordering_type)
        if ragged_offset is not None:
            t.set_ragged_offset(ragged_offset)
        if alignment_value != 1:
            t.set_alignment_value(alignment_value)
        return t

    def tensor_like(self, template, name="", is_virtual=False):
        """A tensor with the dims, strides and data type of another tensor or of any array object
        (``shape`` + ``stride()`` as torch, ``__cuda_array_interface__``, NumPy-style byte ``strides``)."""
        if isinstance(template, tensor):
            d = template.desc
            t = self._new_tensor(dims=d.dims, strides=d.strides, dtype=d.dtype, is_virtual=is_virtual,
                                 is_by_value=d.is_by_value, name=name, value=d.value)
            # the layout attributes come along, as cudnn-frontend copies the whole attribute set
            t.desc.alignment, t.desc.vector_count, t.desc.vectorized_dim = d.alignment, d.vector_count, d.vectorized_dim
            t.desc.reordering = d.reordering
            return t
        dims, strides, dt, host = describe_array(template)
        return self._new_tensor(dims=dims, strides=strides, dtype=dt, is_virtual=is_virtual,
                                is_by_value=host, name=name)

    def tensor_scalar(self, value, scalar_type=scalar_type.RUNTIME_PARAM, name="", data_type=None):
        """A pass-by-value scalar (dims [1, 1, 1, 1]) holding ``value``; its data type follows the value
        (float -> FLOAT, int -> INT32, bool -> BOOLEAN) unless given."""
        dt = data_type if data_type is not None else scalar_dtype(value)
        t = self._new_tensor(dims=[1, 1, 1, 1], strides=[1, 1, 1, 1], dtype=dt, is_by_value=True,
                             name=name or f"scalar_{len(self._tensors)}", value=np_scalar(value, dt))
        t.desc.meta["scalar_type"] = int(scalar_type)
        return t

    def query_tensor_attributes_of_uid(self, uid):
        """The tensor with ``uid`` (raises BAD_PARAM when there is none)."""
        t = self._by_uid.get(int(uid))
        if t is None:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{self.name}' has no tensor with uid {uid}")
        return t

    def _new_tensor(self, dims=None, strides=None, dtype=None, is_virtual=False, is_by_value=False, name="",
                    uid=-1, value=None):
        user_uid = uid is not None and int(uid) >= 0
        if user_uid:
            self._claim_uid(int(uid))
        desc = new_desc(int(uid) if user_uid else self._alloc_uid(), dims, strides, dtype, is_virtual,
                        is_by_value, name or f"tensor_{len(self._tensors)}", value)
        desc.meta[USER_UID] = user_uid
        t = tensor(desc, self)
        self._tensors.append(t)
        self._by_uid[desc.uid] = t
        self._invalidate()
        return t

    def _alloc_uid(self):
        while self._next_uid in self._by_uid:
            self._next_uid += 1
        self._next_uid += 1
        return self._next_uid - 1

    def _claim_uid(self, uid, owner=None):
        """Make ``uid`` free for a user assignment: an auto-numbered holder is renumbered; two user
        assignments of one uid are an error (BAD_PARAM_DUPLICATED_ENTRIES)."""
        holder = self._by_uid.get(uid)
        if holder is None or holder is owner:
            return
        if holder.desc.meta.get(USER_UID):
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                              f"uid {uid} is already assigned to tensor '{holder.get_name()}'")
        fresh = self._alloc_uid()
        del self._by_uid[uid]
        if uid in self._bindings:
            self._bindings[fresh] = self._bindings.pop(uid)
        holder.desc.uid = fresh
        self._by_uid[fresh] = holder

    def _reuid(self, t, uid):
        self._claim_uid(uid, owner=t)
        if self._by_uid.get(t.desc.uid) is t:
            del self._by_uid[t.desc.uid]
        if t.desc.uid in self._bindings:
            self._bindings[uid] = self._bindings.pop(t.desc.uid)
        t.desc.uid = uid
        t.desc.meta[USER_UID] = True
        self._by_uid[uid] = t
        self._invalidate()

    def _wrap(self, desc):
        return self._by_uid.get(desc.uid)

    def _as_tensor(self, arg, name):
        """A graph tensor for an op argument: a tensor as is; a Python number becomes a by-value scalar;
        an array (torch, CuPy, numba, ...) a tensor like it, bound to that array for execute."""
        if arg is None or isinstance(arg, tensor):
            if arg is not None and arg._owner() is not self:
                raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"{name}: tensor '{arg.get_name()}' belongs to "
                                  "another graph")
            return arg
        if isinstance(arg, (numbers.Number, np.generic)):
            return self.tensor_scalar(arg, name=name)
        t = self.tensor_like(arg, name=name)
        if t.desc.is_by_value:
            t.desc.value = host_scalar(arg, t.desc.dtype)
        else:
            self._bindings[t.get_uid()] = arg
        return t

    # ================================================================== op records
    def _get_name(self, kind, name):
        if name:
            return str(name)
        n = self._node_count.get(kind, 0)
        self._node_count[kind] = n + 1
        return f"{kind}.{n}"

    def _add_op(self, kind, name, tensors, params, out_ports, lower, compute_data_type=None, present=None,
                suffix=None, out_dims=None):
        """Record an op. ``tensors``: port -> tensor-like (None = not given) or list; ``out_ports`` in
        return order; ``present(port) -> bool`` says which outputs exist; ``suffix`` renames ports in
        output names; ``out_dims``: dims of the (first) output, or {port: dims}, for shapes the IR cannot
        infer. Returns one tensor, or the list of outputs (None where absent)."""
        name = self._get_name(kind, name)
        conv = {}
        for port, v in tensors.items():
            if isinstance(v, (list, tuple)):
                conv[port] = [self._as_tensor(x, f"{name}::{port}_{i}") for i, x in enumerate(v)]
            else:
                conv[port] = self._as_tensor(v, f"{name}::{port}")
        outs = []
        for port in out_ports:
            if present is not None and not present(port):
                outs.append(None)
                continue
            label = (suffix or {}).get(port, port)
            outs.append(self._new_tensor(is_virtual=True, name=f"{name}::{label}"))
        if out_dims is not None:
            given = out_dims if isinstance(out_dims, dict) else {out_ports[0]: out_dims}
            for port, dims in given.items():
                t = outs[out_ports.index(port)]
                if t is not None:
                    t.set_dim(dims)
        rec = OpRecord(kind, name, conv, dict(params), outs, list(out_ports), lower,
                       to_ir_dtype(compute_data_type))
        self._records.append(rec)
        self._invalidate()
        return outs[0] if len(outs) == 1 else outs

    def _hidden_scalar(self, rec, key, value):
        """A by-value scalar the lowering of ``rec`` needs but the frontend op does not take (made once)."""
        t = rec.extra.get(key)
        if t is None:
            t = rec.extra[key] = self.tensor_scalar(value, name=f"{rec.name}::{key}")
            t.desc.meta["hidden"] = True
        return t

    def _compute_dtype(self, rec):
        return _first(rec.compute_data_type, self._context.compute_data_type)

    # ================================================================== validate
    def _invalidate(self):
        self._validated = False
        self._ir = None
        if hasattr(self, "_plans_state"):
            self._reset_plans()

    def _consumed_uids(self):
        used = set()
        for rec in self._records:
            for v in rec.tensors.values():
                for t in (v if isinstance(v, list) else [v]):
                    if t is not None:
                        used.add(t.get_uid())
        return used

    def _keep_output(self, t, required=False):
        """An output port's descriptor, or None for an optional virtual output nobody reads."""
        if t is None:
            return None
        if required or not t.desc.is_virtual or t.get_uid() in self._consumed:
            return t.desc
        return None

    def _reset_inferred(self):
        produced = {id(t) for rec in self._records for t in rec.outputs if t is not None}
        for t in self._tensors:
            d, m = t.desc, t.desc.meta
            if id(t) in produced:
                if not m.get(USER_DIMS):
                    d.dims = None
                if not m.get(USER_STRIDES):
                    d.strides = None
                if not m.get(USER_DTYPE):
                    d.dtype = None
                    if not d.is_virtual and d.dims is not None:  # the IR checks given tensors before inferring
                        d.dtype = self._context.io_data_type
            elif d.dtype is None and not m.get(USER_DTYPE):
                d.dtype = self._context.intermediate_data_type if d.is_virtual else self._context.io_data_type
        for rec in self._records:  # outputs given dims but no strides: packed, in the first input's order
            first = next((v for v in rec.tensors.values() if isinstance(v, tensor)), None)
            for t in rec.outputs:
                d = t.desc if t is not None else None
                if d is None or d.dims is None or d.strides is not None:
                    continue
                like = first.desc if first is not None else None
                order = like.stride_order() if like is not None and like.strides is not None and \
                    like.ndim == len(d.dims) else None
                d.strides = packed_strides(d.dims, order)

    def lower(self):
        """A fresh IR :class:`OpGraph` of the records (not finalized)."""
        self._reset_inferred()
        self._consumed = self._consumed_uids()
        nodes = []
        for rec in self._records:
            try:
                got = rec.lower(self, rec)
            except CudnnError as e:
                here = f"node '{rec.name}' ({rec.kind})"
                raise reraise(e, "" if e.message.startswith(here) else here) from None
            nodes.extend(got if isinstance(got, list) else [got])
        c = self._context
        return OpGraph(nodes, io_dtype=c.io_data_type, intermediate_dtype=c.intermediate_data_type,
                       compute_dtype=c.compute_data_type, name=self.name,
                       dynamic_shapes=self.is_dynamic_shape_enabled)

    def validate(self):
        """Check the graph and infer the outputs' dims, strides and data types (the IR's finalize).
        Raises the frontend error of the IR's status (``.status``), naming the node and field."""
        log_steps.step(self, 1, "VALIDATE", f"{len(self._records)} operations, {len(self._tensors)} tensors")
        if not self._records:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{self.name}' has no operations")
        for rec in self._records:
            for t in rec.outputs:
                if t is not None and t.desc.is_by_value:
                    raise graph_error(S.CUDNN_STATUS_BAD_PARAM,
                                      f"node '{rec.name}': output '{t.get_name()}' cannot be pass-by-value")
        ir = self.lower()
        try:
            ir.finalize()
            for t in ir.tensors().values():  # outputs' dims are inferred after the IR checked descriptors
                if t.vector_count != 1:
                    t.validate()
        except CudnnError as e:
            raise reraise(e, f"graph '{self.name}' validate") from None
        self._ir = ir
        self._validated = True
        return None

    @property
    def ir(self):
        """The finalized IR graph (after validate)."""
        if not self._validated:
            self.validate()
        return self._ir

    # ================================================================== inspection
    @property
    def context(self):
        return self._context

    def get_io_data_type(self):
        return _fe_dtype(self._context.io_data_type)

    def get_intermediate_data_type(self):
        return _fe_dtype(self._context.intermediate_data_type)

    def get_compute_data_type(self):
        return _fe_dtype(self._context.compute_data_type)

    def get_inputs(self):
        produced = {t.get_uid() for rec in self._records for t in rec.outputs if t is not None}
        return [t for t in self._tensors if not t.desc.is_virtual and t.get_uid() not in produced
                and not t.desc.meta.get("hidden")]

    def get_outputs(self):
        return [t for rec in self._records for t in rec.outputs if t is not None and not t.desc.is_virtual]

    def find_tensor(self, name_or_uid):
        if isinstance(name_or_uid, numbers.Integral):
            return self._by_uid.get(int(name_or_uid))
        hits = [t for t in self._tensors if t.get_name() == name_or_uid]
        if len(hits) > 1:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"tensor name {name_or_uid!r} is ambiguous: use the uid")
        return hits[0] if hits else None

    def to_dict(self):
        c = self._context
        return {
            "name": self.name,
            "context": {"io_data_type": _fe_dtype(c.io_data_type).name,
                        "intermediate_data_type": _fe_dtype(c.intermediate_data_type).name,
                        "compute_data_type": _fe_dtype(c.compute_data_type).name},
            "nodes": [{"name": r.name, "tag": r.kind,
                       "inputs": {p: ([x.get_name() for x in v] if isinstance(v, list) else v.get_name())
                                  for p, v in r.tensors.items() if v is not None},
                       "outputs": {p: t.get_name() for p, t in zip(r.out_ports, r.outputs) if t is not None},
                       "params": {k: _plain(v) for k, v in r.params.items() if v is not None}}
                      for r in self._records],
            "tensors": {str(t.get_uid()): t.to_dict() for t in self._tensors},
        }

    def __repr__(self):
        return json.dumps(self.to_dict(), indent=2, default=str)


# ---------------------------------------------------------------------- helpers

def _first(*xs):
    """The first of ``xs`` that is not None (CUDNN_DATA_FLOAT is 0: never use ``or`` on data types)."""
    return next((x for x in xs if x is not None), None)


def _fe_dtype(dt):
    return data_type(int(dt)) if dt is not None else data_type.NOT_SET


def _plain(v):
    import enum

    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, slice):
        return [v.start, v.stop, v.step]
    return v
