"""What the three implicit-GEMM convolutions share: dtype/epilogue normalisation, argument checks."""
import numpy as np

from ..runtime import dtypes as dt
from ..pointwise import epilogue as ep
from ..gemm.gemm import dummy  # noqa: F401  (re-exported)
from .geometry import extent


def normalize(dtypes, spec):
    """(dtype names, ftype, spec with out dtype / ftype filled, bias dtype, residual dtype)."""
    names = tuple(dt.dtype_name(d) for d in dtypes)
    ftype = dt.compute_type(names[:3])
    spec = ep.EpilogueSpec(spec.steps, out_dtype=names[2], ftype=ftype)
    bias_dt = names[3] if len(names) > 3 else names[2]
    res_dt = names[4] if len(names) > 4 else names[2]
    return names, ftype, spec, bias_dt, res_dt


def check_tensor(name, arr, shape, strides):
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat 1-D array")
    if extent(shape, strides) > arr.shape[0]:
        raise ValueError(f"{name}: shape {shape} with strides {strides} reaches past {arr.shape[0]} elements")


def bias_args(kern, bias, per_group, stride=1):
    if kern.spec.bias_axis and bias is None:
        raise ValueError("epilogue has a bias step: pass bias")
    if bias is None:
        return (dummy(kern.dtypes[2]), 0, 0)
    return (bias, per_group * stride, stride)


def need_residual(kern, residual):
    if kern.spec.has_residual and residual is None:
        raise ValueError("epilogue has a residual step: pass residual")
    return residual if residual is not None else dummy(kern.dtypes[2])


def check_table(table, need):
    if table is None or table.shape[0] < need or table.dtype != np.int32:
        raise ValueError(f"IMPLICIT_PRECOMP_GEMM needs the int32 offset table ({need} elements)")
