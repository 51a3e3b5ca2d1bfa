"""An output whose layout maps two elements to one address (a stride 0 on a dim of size > 1, or
strides that collide) is BAD_PARAM at validate, naming the node and the tensor: two results would race
for one element and the answer would depend on the schedule. Inputs may broadcast with stride 0."""
import numpy as np
import pytest

import ncudnn as cudnn
from ncudnn.ir.tensor import overlap


@pytest.mark.parametrize("dims,strides,why", [
    ((4, 8), (0, 1), "stride 0 on dim 0"),
    ((4, 4), (1, 1), "two elements"),
    ((2, 3, 4), (12, 4, 0), "stride 0 on dim 2"),
    ((3, 3), (2, 1), "two elements"),
])
def test_overlapping_layouts_are_named(dims, strides, why):
    assert why in overlap(dims, strides)


@pytest.mark.parametrize("dims,strides", [
    ((4, 8), (8, 1)), ((4, 8), (1, 4)), ((3, 2), (2, 3)),  # packed, transposed, interleaved without collision
    ((4, 1, 8), (8, 0, 1)), ((2, 3), (100, 7)), ((5,), (3,)),  # size-1 dim with stride 0, padded, strided
])
def test_layouts_without_collisions_pass(dims, strides):
    assert overlap(dims, strides) is None


def _graph(out_stride, op="relu"):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    x = g.tensor(name="x", dim=[4, 8], stride=[8, 1])
    y = getattr(g, op)(x, name="act")
    y.set_output(True).set_name("y").set_stride(out_stride)
    return g


@pytest.mark.parametrize("stride", [[0, 1], [1, 0], [1, 1], [2, 1]])
def test_pygraph_output_with_overlapping_strides_is_bad_param(stride):
    g = _graph(stride)
    with pytest.raises(cudnn.CudnnError) as e:
        g.validate()
    assert e.value.status == cudnn.cudnnStatus_t.CUDNN_STATUS_BAD_PARAM
    msg = str(e.value)
    assert "'y'" in msg and "act" in msg and "overlap" in msg


def test_broadcast_input_with_stride_zero_is_fine():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    x = g.tensor(name="x", dim=[4, 8], stride=[8, 1])
    b = g.tensor(name="b", dim=[4, 8], stride=[0, 1])  # one row read by all four
    y = g.add(x, b)
    y.set_output(True)
    g.validate()
    g.build_operation_graph()
