"""``cudnn.tensor``: the frontend's tensor attributes, a chainable view over one IR :class:`TensorDesc`.

Setters return the tensor (``Y.set_output(True).set_data_type(cudnn.data_type.HALF)``); getters return
plain lists / frontend enums (``get_dim()`` is ``[]`` until the dims are given or inferred by
``validate``). What the user set is remembered apart from what inference filled in, so a graph can be
validated again after a change.
"""
import json
import weakref

import numpy as np

from ..errors import CudnnError
from ..ir import TensorDesc
from .enums import data_type, tensor_reordering, to_ir_dtype

USER_DIMS, USER_STRIDES, USER_DTYPE, USER_UID = "user_dims", "user_strides", "user_dtype", "user_uid"


class tensor:
    """One tensor of a pygraph (input, output, virtual intermediate or by-value scalar)."""

    def __init__(self, desc, graph=None):
        self._desc = desc
        self._graph = weakref.ref(graph) if graph is not None else None

    # ------------------------------------------------------------------ plumbing
    @property
    def desc(self):
        """The IR descriptor behind this tensor."""
        return self._desc

    def _owner(self):
        return self._graph() if self._graph is not None else None

    def _touch(self):
        g = self._owner()
        if g is not None:
            g._invalidate()

    # ------------------------------------------------------------------ setters
    def set_output(self, value):
        """Mark as a graph output (non-virtual, needs a buffer) or back to a virtual intermediate."""
        self._desc.is_virtual = not bool(value)
        self._touch()
        return self

    def set_is_virtual(self, value):
        self._desc.is_virtual = bool(value)
        self._touch()
        return self

    def set_is_pass_by_value(self, value):
        self._desc.is_by_value = bool(value)
        self._touch()
        return self

    def set_data_type(self, value=data_type.NOT_SET):
        self._desc.dtype = to_ir_dtype(value)
        self._desc.meta[USER_DTYPE] = self._desc.dtype is not None
        self._touch()
        return self

    def set_dim(self, value):
        self._desc.dims = _ints(value, "dims", self._desc) if value is not None and len(value) else None
        self._desc.meta[USER_DIMS] = self._desc.dims is not None
        self._touch()
        return self

    def set_stride(self, value):
        self._desc.strides = _ints(value, "strides", self._desc) if value is not None and len(value) else None
        self._desc.meta[USER_STRIDES] = self._desc.strides is not None
        self._touch()
        return self

    def set_name(self, value):
        self._desc.name = str(value)
        return self

    def set_uid(self, value):
        g = self._owner()
        if g is not None:
            g._reuid(self, int(value))
        else:
            self._desc.uid = int(value)
            self._desc.meta[USER_UID] = True
        return self

    def set_reordering_type(self, value):
        from ..types import cudnnBackendTensorReordering_t as R

        self._desc.reordering = R(int(value))
        self._touch()
        return self

    def set_ragged_offset(self, value):
        self._desc.ragged_offset = value.desc if isinstance(value, tensor) else value
        self._touch()
        return self

    def set_alignment_value(self, value):
        self._desc.meta["alignment_value"] = int(value)
        return self

    def set_alignment(self, value):
        """The byte alignment every buffer bound to this tensor has (cudnn-frontend's default is 16, as
        here). Engines read it: a vector kernel needs >= 16; below that they take an element-wise path or
        refuse. A positive power of two, else BAD_PARAM naming the tensor."""
        n = _int_arg(value, "byte alignment", self._desc)
        if n <= 0 or n & (n - 1):
            raise _bad(self._desc, f"byte alignment {n} is not a positive power of two")
        self._desc.alignment = n
        self._touch()
        return self

    def set_vector_count_and_dimension(self, count, dimension):
        """Vectorized layout (cuDNN's CUDNN_ATTR_TENSOR_VECTOR_COUNT / VECTORIZED_DIMENSION): ``count``
        elements of dim ``dimension`` packed into one (INT8x4: 4, INT8x32: 32; 1 = not vectorized,
        the default, with dimension -1). The count and the dim's range are checked at validate, against
        the dims then known (BAD_PARAM naming the tensor); an engine that cannot read the layout refuses
        the graph with NOT_SUPPORTED_LAYOUT."""
        c = _int_arg(count, "vector count", self._desc)
        d = _int_arg(dimension, "vectorized dimension", self._desc)
        if c < 1:
            raise _bad(self._desc, f"vector count {c} must be >= 1")
        if d < -1:
            raise _bad(self._desc, f"vectorized dimension {d} must be >= -1 (-1: not set)")
        self._desc.vector_count, self._desc.vectorized_dim = c, d
        self._touch()
        return self

    # ------------------------------------------------------------------ getters
    def get_name(self):
        return self._desc.name

    def get_uid(self):
        return self._desc.uid

    def get_dim(self):
        return list(self._desc.dims) if self._desc.dims is not None else []

    def get_stride(self):
        return list(self._desc.strides) if self._desc.strides is not None else []

    def get_data_type(self):
        return data_type(int(self._desc.dtype)) if self._desc.dtype is not None else data_type.NOT_SET

    def get_is_virtual(self):
        return self._desc.is_virtual

    def get_is_pass_by_value(self):
        return self._desc.is_by_value

    def get_reordering_type(self):
        return tensor_reordering(int(self._desc.reordering))

    def get_ragged_offset(self):
        g = self._owner()
        r = self._desc.ragged_offset
        return g._wrap(r) if (g is not None and r is not None) else r

    def get_pass_by_value(self):
        return self._desc.value

    def get_is_output(self):
        return not self._desc.is_virtual

    def get_alignment(self):
        """Byte alignment of the tensor's buffers (16 unless set)."""
        return self._desc.alignment

    def get_vector_count(self):
        """Elements per vector (1: not vectorized)."""
        return self._desc.vector_count

    def get_vector_dimension(self):
        """The vectorized dim (-1: not set)."""
        return self._desc.vectorized_dim

    def get_has_compile_time_constant(self):
        """True for a scalar made by ``tensor_scalar(value, scalar_type.COMPILE_TIME_CONST)``: its value is
        fixed when the plan is built and it takes no variant-pack entry (cudnn-frontend's Python binding
        has no setter; neither has this)."""
        from .enums import scalar_type

        return bool(self._desc.is_by_value and
                    self._desc.meta.get("scalar_type") == int(scalar_type.COMPILE_TIME_CONST))

    # ------------------------------------------------------------------ conveniences
    @property
    def shape(self):
        return tuple(self.get_dim())

    def to_dict(self):
        """The tensor's attributes as the frontend prints them."""
        d = self._desc
        value = d.value.item() if isinstance(d.value, np.generic) else d.value
        return {"name": d.name, "uid": d.uid, "uid_assigned": bool(d.meta.get(USER_UID)),
                "data_type": self.get_data_type().name, "dim": self.get_dim(), "stride": self.get_stride(),
                "is_virtual": d.is_virtual, "is_pass_by_value": d.is_by_value, "pass_by_value": value,
                "reordering_type": self.get_reordering_type().name}

    def __repr__(self):
        return json.dumps(self.to_dict(), default=str)

    __str__ = __repr__


def _bad(desc, why):
    from .errors import graph_error
    from ..types import cudnnStatus_t

    return graph_error(cudnnStatus_t.CUDNN_STATUS_BAD_PARAM, f"{desc.label}: {why}")


def _int_arg(value, what, desc):
    """``value`` as an int: bools, floats (even 2.0) and strings are BAD_PARAM naming the tensor."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _bad(desc, f"{what} must be an integer, got {value!r}")
    return int(value)


def _ints(values, what, owner):
    """Dims / strides as ints: a float (even 2.0), bool or string entry is BAD_PARAM, never truncated."""
    from ..ir.tensor import int_tuple
    from .errors import reraise

    try:
        return int_tuple(values, what, owner.label if isinstance(owner, TensorDesc) else owner)
    except CudnnError as e:
        raise reraise(e) from None


def new_desc(uid, dims=None, strides=None, dtype=None, is_virtual=False, is_by_value=False, name="", value=None):
    """A fresh TensorDesc with the user-set flags recorded."""
    label = f"tensor '{name}'" if name else "tensor"
    dims = _ints(dims, "dims", label) if dims is not None and len(dims) else None
    strides = _ints(strides, "strides", label) if strides is not None and len(strides) else None
    dt = to_ir_dtype(dtype)
    d = TensorDesc(uid=int(uid), dims=dims, strides=strides, dtype=dt, is_virtual=bool(is_virtual),
                   is_by_value=bool(is_by_value), name=name, value=value)
    d.meta.update({USER_DIMS: dims is not None, USER_STRIDES: strides is not None, USER_DTYPE: dt is not None})
    return d
