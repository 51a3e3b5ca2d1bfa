"""The backend API refuses an output layout that maps two elements to one address (see
tests/ir/test_output_overlap.py): finalizing the operation graph is BAD_PARAM with the reason in the
last error. (A stride 0 is refused earlier, when the tensor descriptor is finalized.)"""
from backend_build import S, expect, finalize, graph, pointwise_desc, pointwise_op, tensor
from ncudnn.types import cudnnPointwiseMode_t as P


def test_backend_output_with_colliding_strides_is_bad_param():
    x, y = tensor(1, [4, 4], [4, 1]), tensor(2, [4, 4], [1, 1])
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_RELU_FWD), x=x, y=y)
    expect(finalize(graph([op], fin=False)), S.CUDNN_STATUS_BAD_PARAM, "overlap", "two elements")
