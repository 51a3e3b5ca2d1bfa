"""Small helpers shared by the reference ops: float64 conversion and enum lookup."""
import numpy as np


def f64(a):
    """``a`` as a float64 ndarray (a copy); accepts any float dtype incl. ml_dtypes bfloat16 / fp8."""
    a = np.asarray(a)
    if a.dtype.kind == "V" or a.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return a.astype(np.float32).astype(np.float64)
    return a.astype(np.float64)


def enum_member(enum_cls, value, prefix):
    """Resolve ``value`` (member, int, full name 'CUDNN_X_Y' or short name 'Y') to ``enum_cls``."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        name = value.upper()
        for cand in (name, prefix + name):
            if cand in enum_cls.__members__:
                return enum_cls.__members__[cand]
        raise ValueError(f"unknown {enum_cls.__name__} name {value!r}")
    return enum_cls(int(value))


def as_tuple(v, n, name):
    """An int (or scalar) repeated n times, or a length-n sequence, as a tuple."""
    if np.ndim(v) == 0:
        return (v,) * n
    v = tuple(v)
    if len(v) != n:
        raise ValueError(f"{name} needs {n} values, got {len(v)}")
    return v
