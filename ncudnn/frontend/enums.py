"""The cudnn-frontend Python enums (``cudnn.data_type.HALF`` ...) and conversions into the IR's types.

Each frontend enum is an IntEnum whose members carry the value of the matching cuDNN backend enum
(``data_type.HALF == CUDNN_DATA_HALF``), so they lower by value. ``NOT_SET`` members are -1.
:func:`to_data_type` also accepts torch dtypes (duck-typed by ``str(dtype)``, torch is optional),
NumPy / ml_dtypes dtypes, and names.
"""
import enum

from .. import types as T

NOT_SET = -1


def _from_backend(name, backend, prefix, extra=(), skip=()):
    members = [(m.name[len(prefix):], int(m)) for m in backend
               if m.name.startswith(prefix) and m.name[len(prefix):] not in skip]
    return enum.IntEnum(name, members + list(extra), module=__name__)


data_type = _from_backend("data_type", T.cudnnDataType_t, "CUDNN_DATA_", [("NOT_SET", NOT_SET)])
#: OPENSOURCE is cudnn-frontend's mode for the engines it ships as source next to the closed cuDNN library.
#: It has no backend value (the backend's modes are 0-3, CUDNN_HEUR_MODES_COUNT is 4): here it takes 4,
#: the value after the backend's last mode, and pygraph maps it onto mode A before the engine layer sees
#: it (every ncudnn engine is open source, so the open-source ranking is the full one).
HEUR_MODE_OPENSOURCE = int(T.cudnnBackendHeurMode_t.CUDNN_HEUR_MODES_COUNT)
heur_mode = enum.IntEnum("heur_mode", [
    ("A", int(T.cudnnBackendHeurMode_t.CUDNN_HEUR_MODE_A)),
    ("B", int(T.cudnnBackendHeurMode_t.CUDNN_HEUR_MODE_B)),
    ("FALLBACK", int(T.cudnnBackendHeurMode_t.CUDNN_HEUR_MODE_FALLBACK)),
    ("OPENSOURCE", HEUR_MODE_OPENSOURCE)], module=__name__)
build_plan_policy = enum.IntEnum("build_plan_policy", [("HEURISTICS_CHOICE", 0), ("ALL", 1)], module=__name__)
norm_forward_phase = _from_backend("norm_forward_phase", T.cudnnBackendNormFwdPhase_t, "CUDNN_NORM_FWD_",
                                   [("NOT_SET", NOT_SET)])
reduction_mode = _from_backend("reduction_mode", T.cudnnReduceTensorOp_t, "CUDNN_REDUCE_TENSOR_",
                               [("NOT_SET", NOT_SET)])
behavior_note = _from_backend("behavior_note", T.cudnnBackendBehaviorNote_t, "CUDNN_BEHAVIOR_NOTE_",
                              skip=("TYPE_COUNT",))
numerical_note = _from_backend("numerical_note", T.cudnnBackendNumericalNote_t, "CUDNN_NUMERICAL_NOTE_",
                               skip=("TYPE_COUNT",))
knob_type = _from_backend("knob_type", T.cudnnBackendKnobType_t, "CUDNN_KNOB_TYPE_", [("NOT_SET", NOT_SET)],
                          skip=("COUNTS",))
convolution_mode = _from_backend("convolution_mode", T.cudnnConvolutionMode_t, "CUDNN_", [("NOT_SET", NOT_SET)])
tensor_reordering = _from_backend("tensor_reordering", T.cudnnBackendTensorReordering_t,
                                  "CUDNN_TENSOR_REORDERING_")
reshape_mode = _from_backend("reshape_mode", T.cudnnBackendReshapeMode_t, "CUDNN_RESHAPE_")
pointwise_mode = _from_backend("pointwise_mode", T.cudnnPointwiseMode_t, "CUDNN_POINTWISE_",
                               [("NOT_SET", NOT_SET)])
resample_mode = _from_backend("resample_mode", T.cudnnResampleMode_t, "CUDNN_RESAMPLE_", [("NOT_SET", NOT_SET)])
padding_mode = _from_backend("padding_mode", T.cudnnPaddingMode_t, "CUDNN_", [("NOT_SET", NOT_SET)])
rng_distribution = _from_backend("rng_distribution", T.cudnnRngDistribution_t, "CUDNN_RNG_DISTRIBUTION_",
                                 [("NOT_SET", NOT_SET)])
scalar_type = enum.IntEnum("scalar_type", [("COMPILE_TIME_CONST", 0), ("RUNTIME_PARAM", 1)], module=__name__)
diagonal_alignment = enum.IntEnum("diagonal_alignment", [("TOP_LEFT", 0), ("BOTTOM_RIGHT", 1)], module=__name__)
attention_implementation = enum.IntEnum("attention_implementation", [("AUTO", 0), ("COMPOSITE", 1),
                                                                       ("UNIFIED", 2)], module=__name__)
cuda_graph_retention = enum.IntEnum("cuda_graph_retention", [("NONE", 0), ("PER_GRAPH", 1)], module=__name__)

for _cls in (data_type, heur_mode, build_plan_policy, norm_forward_phase, reduction_mode, behavior_note, numerical_note,
             knob_type, convolution_mode, tensor_reordering, reshape_mode, pointwise_mode, resample_mode, padding_mode,
             rng_distribution, scalar_type, diagonal_alignment, attention_implementation, cuda_graph_retention):
    _cls.__str__ = lambda self: f"{type(self).__name__}.{self.name}"  # as the frontend prints them

# torch dtype names (str(torch.float16) == "torch.float16") and NumPy names -> data_type
_BY_NAME = {
    "float32": data_type.FLOAT, "float": data_type.FLOAT, "float64": data_type.DOUBLE, "double": data_type.DOUBLE,
    "float16": data_type.HALF, "half": data_type.HALF, "bfloat16": data_type.BFLOAT16,
    "int8": data_type.INT8, "uint8": data_type.UINT8, "int32": data_type.INT32, "int": data_type.INT32,
    "int64": data_type.INT64, "long": data_type.INT64, "bool": data_type.BOOLEAN, "uint32": data_type.UINT32,
    "float8_e4m3fn": data_type.FP8_E4M3, "float8_e5m2": data_type.FP8_E5M2,
    "float8_e8m0fnu": data_type.FP8_E8M0, "float4_e2m1fn_x2": data_type.FP4_E2M1,
    "complex64": data_type.COMPLEX_FP32, "complex128": data_type.COMPLEX_FP64,
}


def to_data_type(x):
    """A frontend ``data_type`` (or None for unset) from a data_type, cudnnDataType_t, torch / NumPy
    dtype or a name. Raises :class:`ncudnn.NotSupportedError` (NOT_SUPPORTED_DATA_TYPE) otherwise."""
    if x is None:
        return None
    if isinstance(x, data_type):
        return None if x == data_type.NOT_SET else x
    if isinstance(x, T.cudnnDataType_t):
        return data_type(int(x))
    if isinstance(x, enum.Enum) and x.name in data_type.__members__:  # another binding's enum
        return None if x.name == "NOT_SET" else data_type[x.name]
    if isinstance(x, int) and not isinstance(x, bool):
        try:
            return None if x == NOT_SET else data_type(x)
        except ValueError:
            pass
    else:
        name = str(getattr(x, "name", None) or x) if not isinstance(x, str) else x
        if not isinstance(x, str) and type(x).__module__.startswith("numpy"):
            name = getattr(x, "name", str(x))
        key = name.rsplit(".", 1)[-1].lower()
        if key in _BY_NAME:
            return _BY_NAME[key]
        if name.upper() in data_type.__members__:
            return data_type[name.upper()]
        try:  # NumPy scalar types (np.float32) and dtype-likes
            import numpy as np

            return _BY_NAME[np.dtype(x).name]
        except Exception:
            pass
    from ..errors import NotSupportedError

    raise NotSupportedError(f"{x!r} is not a data type ncudnn knows (cudnn.data_type, torch or NumPy dtype)",
                            T.cudnnStatus_t.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)


def to_ir_dtype(x):
    """cudnnDataType_t (or None) of anything :func:`to_data_type` accepts."""
    dt = to_data_type(x)
    return None if dt is None else T.cudnnDataType_t(int(dt))


def enum_value(x, enum_cls, what):
    """``x`` as a member of the frontend ``enum_cls`` (accepts members, ints, names, other enums by name)."""
    if isinstance(x, enum_cls):
        return x
    if isinstance(x, enum.Enum):  # a backend enum (CUDNN_HEUR_MODE_A) or another binding's, by name
        hits = [m for m in enum_cls if x.name == m.name or x.name.endswith("_" + m.name)]
        if hits:
            return max(hits, key=lambda m: len(m.name))
    try:
        if isinstance(x, str):
            return enum_cls[x.upper()]
        return enum_cls(int(x))
    except (KeyError, ValueError, TypeError):
        from ..errors import BadParamError

        raise BadParamError(f"{x!r} is not a {enum_cls.__name__} ({', '.join(enum_cls.__members__)})") from None
