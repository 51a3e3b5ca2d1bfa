"""pygraph ``slice`` of intermediate tensors: the IR Slice node on the data_movement engine between
pointwise subgraphs (NCHW and NHWC), against NumPy slicing of the float64 oracle, fresh random inputs,
poisoned outputs; refused slices with their documented status."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, poison_value, random
from ncudnn.types import cudnnStatus_t as S


def _graph():
    return cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def _poisoned(shape):
    return cuda.to_device(np.full(shape, poison_value(np.float32), np.float32))


def test_slice_of_a_virtual_sum(rng):
    g = _graph()
    X = g.tensor(name="X", dim=[3, 4, 6], stride=[24, 6, 1])
    B = g.tensor(name="B", dim=[3, 4, 6], stride=[24, 6, 1])
    S_ = g.add(X, B, name="sum")
    Y = g.slice(S_, slices=[slice(1, 3), slice(None, None, 2), slice(-4, None)], name="cut")
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    assert Y.get_dim() == [2, 2, 4]
    x, b = random(rng, [3, 4, 6]), random(rng, [3, 4, 6])
    y = _poisoned([2, 2, 4])
    ws = cuda.to_device(np.full(max(g.get_workspace_size(), 1), 0xA5, np.uint8))
    g.execute({X: cuda.to_device(x), B: cuda.to_device(b), Y: y}, ws)
    ref = (x.astype(np.float64) + b)[1:3, ::2, -4:]
    assert_close(y.copy_to_host(), ref, "float32")


def test_slice_between_pointwise_ops_nhwc(rng):
    """relu(slice(neg(X))) with X channels-last: the slice keeps X's stride order."""
    n, c, h, w = 2, 5, 3, 4
    g = _graph()
    X = g.tensor(name="X", dim=[n, c, h, w], stride=[c * h * w, 1, w * c, c])
    Y = g.relu(g.slice(g.neg(X, name="neg"), slices=[slice(None), slice(1, 5, 2), slice(1, 3)], name="cut"),
               name="act")
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    assert Y.get_dim() == [2, 2, 2, 4]
    x = random(rng, [n, h, w, c])          # NHWC memory
    y = _poisoned([2, 2, 4, 2])            # Y packed NHWC like X
    assert Y.get_stride() == [16, 1, 8, 2]
    ws = cuda.to_device(np.full(max(g.get_workspace_size(), 1), 0xA5, np.uint8))
    g.execute({X: cuda.to_device(x), Y: y}, ws)
    ref = np.maximum(-x.astype(np.float64).transpose(0, 3, 1, 2)[:, 1:5:2, 1:3], 0)
    assert_close(y.copy_to_host().transpose(0, 3, 1, 2), ref, "float32")


@pytest.mark.parametrize("slices,status", [
    ([slice(0, 2)] * 4, S.CUDNN_STATUS_BAD_PARAM),               # more slices than dims
    ([slice(2, 2)], S.CUDNN_STATUS_BAD_PARAM),                   # empty
    ([slice(None), slice(None, None, -1)], S.CUDNN_STATUS_NOT_SUPPORTED),
])
def test_refused_slices_of_intermediates(slices, status):
    g = _graph()
    X = g.tensor(name="X", dim=[4, 6, 5], stride=[30, 5, 1])
    g.slice(g.exp(X), slices=slices, name="cut").set_output(True)
    with pytest.raises(cudnn.CudnnError) as e:
        g.validate()
    assert e.value.status == status and "node 'cut' (slice)" in str(e.value)
