"""The IR Slice node: output dims ceil((limit - start) / stride) and strides packed in X's stride order
(NCHW and NHWC), dtype from X unless given, and BAD_PARAM naming the field for every refused value."""
import pytest

from ncudnn.errors import CudnnError
from ncudnn.ir import OpGraph, Slice, TensorDesc, packed_strides
from ncudnn.types import cudnnDataType_t as DT, cudnnStatus_t as S

NHWC = (0, 2, 3, 1)


def _slice(xd, start, limit, steps=None, order=None, y_dtype=None, y_dims=None):
    x = TensorDesc(1, tuple(xd), packed_strides(xd, order), DT.CUDNN_DATA_HALF, name="x")
    y = TensorDesc(2, y_dims, y_dims and packed_strides(y_dims), y_dtype, name="y")
    node = Slice("cut", {"X": x}, {"Y": y}, start_indices=start, limit_indices=limit, strides=steps)
    OpGraph([node]).finalize()
    return node, x, y


def test_dims_and_default_strides_nchw():
    node, x, y = _slice((2, 6, 7, 9), (0, 1, 2, 0), (2, 6, 7, 9), (1, 2, 2, 4))
    assert y.dims == (2, 3, 3, 3) and y.strides == (27, 9, 3, 1) and y.dtype == DT.CUDNN_DATA_HALF
    assert node.x_offset() == 1 * 63 + 2 * 9
    assert node.x_view_strides() == (378, 126, 18, 4)


def test_nhwc_keeps_the_stride_order_and_dtype_may_be_given():
    node, x, y = _slice((2, 8, 4, 5), (1, 0, 1, 1), (2, 8, 4, 4), None, NHWC, DT.CUDNN_DATA_FLOAT)
    assert y.dims == (1, 8, 3, 3) and y.stride_order() == x.stride_order()
    assert y.strides == packed_strides((1, 8, 3, 3), NHWC) and y.dtype == DT.CUDNN_DATA_FLOAT
    assert node.strides == (1, 1, 1, 1) and node.x_offset() == 160 + 40 + 8


@pytest.mark.parametrize("start,limit,steps,field", [
    ((0, 0), (4, 4), None, "start_indices"),            # 2 entries for 3 dims
    ((0, 0, 0), (4, 4, 4), (1, 1), "strides"),
    ((-1, 0, 0), (4, 4, 4), None, "start_indices"),     # negative start
    ((0, 4, 0), (4, 5, 4), None, "start_indices"),      # start at the extent
    ((0, 0, 0), (4, 4, 5), None, "limit_indices"),      # limit past the extent
    ((0, 2, 0), (4, 2, 4), None, "limit_indices"),      # empty window
    ((0, 0, 0), (4, 4, 4), (1, 0, 1), "strides"),       # zero step
    ((0, 0, 0), (4, 4, 4), (1, 1, -2), "strides"),      # negative step
    ((0, "a", 0), (4, 4, 4), None, "start_indices"),    # not integers
])
def test_refused_values_name_the_field(start, limit, steps, field):
    with pytest.raises(CudnnError) as e:
        _slice((4, 4, 4), start, limit, steps)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM
    assert f"node 'cut' (slice): {field}:" in str(e.value), str(e.value)


def test_given_output_dims_must_match():
    with pytest.raises(CudnnError) as e:
        _slice((4, 6), (0, 1), (4, 6), (2, 2), y_dtype=DT.CUDNN_DATA_HALF, y_dims=(2, 2))
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH and "Y" in str(e.value)


def test_start_and_limit_are_required():
    x = TensorDesc(1, (4,), (1,), DT.CUDNN_DATA_FLOAT, name="x")
    with pytest.raises(CudnnError) as e:
        OpGraph([Slice("cut", {"X": x}, {"Y": TensorDesc(2, None, None, None)}, limit_indices=(4,))]).finalize()
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "start_indices" in str(e.value)
