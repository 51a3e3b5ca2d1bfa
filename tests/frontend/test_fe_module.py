"""Module level of `import ncudnn as cudnn`: the names the frontend exports, versions, handles and
streams, enums with cuDNN's values, data types from torch / NumPy dtypes, and the exception classes."""
import ml_dtypes
import numpy as np
import pytest

import ncudnn as cudnn
from ncudnn import types as T
from ncudnn.types import cudnnStatus_t as S

FRONTEND_NAMES = [
    "backend_version", "backend_version_string", "get_last_error_string", "norm_forward_phase", "reduction_mode",
    "behavior_note", "cuda_graph_retention", "knob_type", "numerical_note", "build_plan_policy", "data_type",
    "tensor_reordering", "heur_mode", "tensor", "cudnnGraphNotSupportedError", "diagonal_alignment",
    "attention_implementation", "scalar_type", "reshape_mode", "create_handle", "destroy_handle", "get_stream",
    "set_stream", "pygraph", "GraphContext", "convolution_mode", "create_kernel_cache", "create_device_properties",
    "graph", "jit", "graph_cache", "Graph",
]


def test_frontend_names_are_exported():
    missing = [n for n in FRONTEND_NAMES if not hasattr(cudnn, n)]
    assert not missing


def test_versions():
    v = cudnn.backend_version()
    assert v == cudnn.cudnnGetVersion() and v >= 90000
    major, minor, patch = (int(x) for x in cudnn.backend_version_string().split("."))
    assert major * 10000 + minor * 100 + patch == v


def test_kernel_cache_and_device_properties():
    props = cudnn.create_device_properties()
    assert props.sm_count > 0 and len(props.cc) == 2
    cache = cudnn.create_kernel_cache()
    assert cache is not cudnn.create_kernel_cache()   # a fresh cache per call, as cudnn-frontend's
    g = cudnn.pygraph(kernel_cache=cache, device_property=props, sm_count=props.sm_count)
    assert g.kernel_cache is cache and g.sm_count == props.sm_count
    g2 = cudnn.pygraph(sm_count=8)
    assert g2._ctx().device.sm_count == 8 and g._ctx().device is props


def test_handle_and_stream():
    h = cudnn.create_handle()
    assert cudnn.get_stream(h) == 0
    cudnn.set_stream(h, 0)
    cudnn.destroy_handle(h)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        cudnn.set_stream(h, 0)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "destroyed" in str(e.value)
    assert "destroyed" in cudnn.get_last_error_string()


def test_enums_carry_cudnn_values_and_print_like_the_frontend():
    assert int(cudnn.data_type.HALF) == int(T.cudnnDataType_t.CUDNN_DATA_HALF)
    assert int(cudnn.data_type.BFLOAT16) == 9 and cudnn.data_type.NOT_SET == -1
    assert int(cudnn.heur_mode.A) == int(T.cudnnBackendHeurMode_t.CUDNN_HEUR_MODE_A)
    assert int(cudnn.heur_mode.FALLBACK) == int(T.cudnnBackendHeurMode_t.CUDNN_HEUR_MODE_FALLBACK)
    assert {m.name for m in cudnn.build_plan_policy} == {"HEURISTICS_CHOICE", "ALL"}
    assert int(cudnn.reduction_mode.AMAX) == int(T.cudnnReduceTensorOp_t.CUDNN_REDUCE_TENSOR_AMAX)
    assert int(cudnn.numerical_note.TENSOR_CORE) == 0 and cudnn.behavior_note.RUNTIME_COMPILATION == 0
    assert cudnn.knob_type.SPLIT_K == 0 and cudnn.tensor_reordering.F16x16 == 2
    assert cudnn.reshape_mode.LOGICAL == 1 and cudnn.scalar_type.RUNTIME_PARAM in cudnn.scalar_type
    assert cudnn.norm_forward_phase.TRAINING == 1 and cudnn.convolution_mode.CROSS_CORRELATION == 1
    assert str(cudnn.data_type.HALF) == "data_type.HALF"


class FakeTorchDtype:
    """What torch.float16 looks like to duck typing (torch is not installed here)."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


@pytest.mark.parametrize("given, expected", [
    (FakeTorchDtype("float16"), "HALF"), (FakeTorchDtype("bfloat16"), "BFLOAT16"), (FakeTorchDtype("float32"), "FLOAT"),
    (FakeTorchDtype("int64"), "INT64"), (FakeTorchDtype("uint8"), "UINT8"), (FakeTorchDtype("bool"), "BOOLEAN"),
    (FakeTorchDtype("float8_e4m3fn"), "FP8_E4M3"), ("torch.int32", "INT32"),
    (np.float16, "HALF"), (np.dtype(np.float64), "DOUBLE"), (ml_dtypes.bfloat16, "BFLOAT16"),
    (np.dtype(ml_dtypes.float8_e5m2), "FP8_E5M2"), (T.cudnnDataType_t.CUDNN_DATA_INT8, "INT8"), ("HALF", "HALF"),
])
def test_data_types_from_torch_numpy_and_names(given, expected):
    g = cudnn.pygraph()
    t = g.tensor(name="t", dim=[2], stride=[1], data_type=given)
    assert t.get_data_type() == cudnn.data_type[expected]
    t.set_data_type(cudnn.data_type.FLOAT).set_data_type(given)
    assert t.get_data_type() == cudnn.data_type[expected]


def test_pygraph_takes_torch_dtypes_for_its_context():
    g = cudnn.pygraph(io_data_type=FakeTorchDtype("bfloat16"), compute_data_type=FakeTorchDtype("float32"))
    assert g.get_io_data_type() == cudnn.data_type.BFLOAT16 and g.get_compute_data_type() == cudnn.data_type.FLOAT
    assert g.get_intermediate_data_type() == cudnn.data_type.BFLOAT16


def test_exceptions_carry_status_and_builtin_bases():
    for cls, base, cat in [(cudnn.cudnnGraphNotSupportedError, RuntimeError, cudnn.NotSupportedError),
                           (cudnn.cudnnGraphBadParamError, ValueError, cudnn.BadParamError),
                           (cudnn.cudnnGraphExecutionFailedError, RuntimeError, cudnn.ExecutionFailedError),
                           (cudnn.cudnnGraphInternalError, RuntimeError, cudnn.InternalError)]:
        assert issubclass(cls, base) and issubclass(cls, cat) and issubclass(cls, cudnn.CudnnError)
    e = cudnn.cudnnGraphNotSupportedError("why", S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
    assert e.status == S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE and "why" in str(e)


def test_tensor_like_reads_array_geometry():
    from numba import cuda

    g = cudnn.pygraph()
    # A transposed layout: numba's DeviceNDArray cannot .T a 3-D array on a GPU, but keeps F order.
    a = cuda.to_device(np.asfortranarray(np.zeros((4, 3, 2), np.float16)))
    assert a.strides == (2, 8, 24), f"device array strides {a.strides}"
    t = g.tensor_like(a, name="a")
    assert (t.get_dim(), t.get_stride(), t.get_data_type()) == ([4, 3, 2], [1, 4, 12], cudnn.data_type.HALF), \
        (t.get_dim(), t.get_stride(), t.get_data_type())
    assert not t.get_is_pass_by_value(), "a device array is not pass-by-value"
    sl = g.tensor_like(cuda.to_device(np.zeros((2, 3, 8), np.float32))[:, :, ::2], name="sliced")
    assert (sl.get_dim(), sl.get_stride()) == ([2, 3, 4], [24, 8, 2]), (sl.get_dim(), sl.get_stride())
    h = g.tensor_like(np.ones((1, 1), np.float32), name="host")
    assert h.get_is_pass_by_value(), "a host NumPy array is pass-by-value"
    c = g.tensor_like(t, name="copy")
    assert (c.get_dim(), c.get_stride(), c.get_data_type()) == (t.get_dim(), t.get_stride(), t.get_data_type())
    bits = g.tensor_like(cuda.to_device(np.zeros(4, np.uint16)), name="bf16_bits")  # no cuDNN type: set it
    assert bits.get_data_type() == cudnn.data_type.NOT_SET, bits.get_data_type()
    assert bits.set_data_type(cudnn.data_type.BFLOAT16).get_data_type() == cudnn.data_type.BFLOAT16
    s = g.tensor_scalar(3, cudnn.scalar_type.COMPILE_TIME_CONST, name="k")
    assert s.get_is_pass_by_value() and s.get_data_type() == cudnn.data_type.INT32 and s.get_dim() == [1, 1, 1, 1]
