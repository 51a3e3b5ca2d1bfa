"""The base of every op node: ports, attributes, and one fixed lifecycle.

The lifecycle order lives here alone (cudnn-frontend's node_interface habit)::

    pre_validate   ports present, attribute values legal, data types supported
    infer          fill dims / strides / dtypes of virtual outputs (and check given ones)
    post_validate  shapes consistent across ports

Each step raises :class:`CudnnError` with a documented status and a message naming the node and
the field. Subclasses declare their ports and attributes as class data and override the steps.
"""
from ..errors import CudnnError
from ..types import cudnnDataType_t, cudnnStatus_t
from .tensor import FLOAT_TYPES, packed_strides

S = cudnnStatus_t
DT = cudnnDataType_t


class _Required:
    def __repr__(self):
        return "REQUIRED"


#: ATTRS default meaning "must be set" (None means optional and unset)
REQUIRED = _Required()


class GraphContext:
    """Graph-wide defaults used while inferring: io, intermediate and compute data types."""

    def __init__(self, io_dtype=None, intermediate_dtype=None, compute_dtype=None):
        self.io_dtype = DT(io_dtype) if io_dtype is not None else None
        self.intermediate_dtype = DT(intermediate_dtype) if intermediate_dtype is not None else None
        self.compute_dtype = DT(compute_dtype) if compute_dtype is not None else None


class Node:
    OP = "node"
    #: required input ports, optional input ports, required and optional outputs
    INPUTS = ()
    OPTIONAL_INPUTS = ()
    OUTPUTS = ()
    OPTIONAL_OUTPUTS = ()
    #: attribute name -> default (REQUIRED = must be set; None = optional, unset)
    ATTRS = {}
    #: ports that may be by-value scalars
    SCALAR_PORTS = ()

    def __init__(self, name="", inputs=None, outputs=None, compute_dtype=None, **attrs):
        self.name = name or self.OP
        self.inputs = {k: v for k, v in (inputs or {}).items() if v is not None}
        self.outputs = {k: v for k, v in (outputs or {}).items() if v is not None}
        self.compute_dtype = DT(compute_dtype) if compute_dtype is not None else None
        unknown = set(attrs) - set(self.ATTRS)
        if unknown:
            raise CudnnError(f"node '{self.name}' ({self.OP}): unknown attribute(s) {sorted(unknown)}",
                             S.CUDNN_STATUS_BAD_PARAM)
        for k, default in self.ATTRS.items():
            v = attrs.get(k, default)
            setattr(self, k, default if v is None and default is not REQUIRED else v)

    # ------------------------------------------------------------------ lifecycle
    def run_lifecycle(self, ctx):
        """The one order every node goes through."""
        self.pre_validate(ctx)
        self.infer(ctx)
        self._check_outputs_complete()
        self.post_validate(ctx)

    def pre_validate(self, ctx):
        for port in self.INPUTS:
            if port not in self.inputs:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, "required input is not set")
        for port in self.OUTPUTS:
            if port not in self.outputs:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, "required output is not set")
        known = set(self.INPUTS) | set(self.OPTIONAL_INPUTS)
        for port in self.inputs:
            if port not in known:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, f"not an input of {self.OP}")
        known = set(self.OUTPUTS) | set(self.OPTIONAL_OUTPUTS)
        for port in self.outputs:
            if port not in known:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, f"not an output of {self.OP}")
        for k, default in self.ATTRS.items():
            if getattr(self, k) is REQUIRED:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, k, "required attribute is not set")
        for port, t in self.inputs.items():
            if t.is_by_value and port not in self.SCALAR_PORTS:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, "cannot be a by-value scalar")
            if t.dims is None and not t.is_virtual:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, "dims not set")
        for port, t in self.outputs.items():
            if t.is_by_value:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port, "an output cannot be a by-value scalar")

    def infer(self, ctx):
        """Default: nothing to infer (ops whose outputs must be given)."""

    def post_validate(self, ctx):
        """Default: nothing more to check."""

    # ------------------------------------------------------------------ helpers
    def fail(self, status, field, message):
        raise CudnnError(f"node '{self.name}' ({self.OP}): {field}: {message}", status)

    def tensors(self):
        return list(self.inputs.values()) + list(self.outputs.values())

    def attributes(self):
        """Attribute values, for cache keys and serialization (enums as ints, sequences as tuples)."""
        out = {}
        for k in self.ATTRS:
            v = getattr(self, k)
            if isinstance(v, (list, tuple)):
                v = tuple(int(x) if hasattr(x, "__index__") else x for x in v)
            elif hasattr(v, "__index__") and not isinstance(v, bool):
                v = int(v)
            out[k] = v
        return out

    def infer_output(self, port, dims, ctx, like=None, dtype=None):
        """Fill or check output ``port``: dims must match when given; strides default to packed in the
        stride order of ``like`` (an input tensor) when ranks agree; dtype to the graph's
        intermediate (virtual) or io type."""
        t = self.outputs[port]
        dims = tuple(int(d) for d in dims)
        if t.dims is None:
            t.dims = dims
        elif tuple(t.dims) != dims:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, port,
                      f"dims {tuple(t.dims)} but the inputs give {dims}")
        if t.strides is None:
            order = None
            if like is not None and like.strides is not None and like.ndim == len(dims):
                order = like.stride_order()
            t.strides = packed_strides(dims, order)
        if t.dtype is None:  # (CUDNN_DATA_FLOAT is 0: test for None, never truthiness)
            if dtype is None:
                dtype = ctx.intermediate_dtype if t.is_virtual else ctx.io_dtype
            if dtype is None and like is not None:
                dtype = like.dtype
            t.dtype = dtype if dtype is not None else DT.CUDNN_DATA_FLOAT
        return t

    def check_float(self, port):
        t = self.inputs.get(port) or self.outputs.get(port)
        if t is not None and t.dtype is not None and t.dtype not in FLOAT_TYPES:
            self.fail(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, port,
                      f"data type {t.dtype.name} is not a floating type")

    def _check_outputs_complete(self):
        for port, t in self.outputs.items():
            if t.dims is None or t.strides is None or t.dtype is None:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, port,
                          "output shape could not be inferred: give its dims and strides")
            t.validate()

    def __repr__(self):
        ins = ", ".join(f"{k}={v.uid}" for k, v in self.inputs.items())
        outs = ", ".join(f"{k}={v.uid}" for k, v in self.outputs.items())
        return f"<{type(self).__name__} '{self.name}' in({ins}) out({outs})>"
