"""pygraph ``transpose`` of intermediate tensors into a graph output: a strided copy on the data_movement
engine after the producing engine (matmul, pointwise, conv), against NumPy's transpose of the float64
oracle, fresh random inputs, poisoned outputs with gaps left untouched; transposes between intermediates
refused with NOT_SUPPORTED naming the node."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, poison_value, random
from ncudnn.types import cudnnStatus_t as S


def _graph():
    return cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def _run(g, pack, out, shape, span):
    g.build([cudnn.heur_mode.A])
    buf = cuda.to_device(np.full(span, poison_value(np.float32), np.float32))
    ws = cuda.to_device(np.full(max(g.get_workspace_size(), 1), 0xA5, np.uint8))
    g.execute({**pack, out: buf}, ws)
    return buf.copy_to_host()


@pytest.mark.parametrize("policy", ["A", "every"])
def test_transpose_of_a_matmul_output(rng, policy):
    b, m, n, k = 2, 5, 7, 3
    g = _graph()
    A = g.tensor(name="A", dim=[b, m, k], stride=[m * k, k, 1])
    B = g.tensor(name="B", dim=[b, k, n], stride=[k * n, n, 1])
    Y = g.transpose(g.relu(g.matmul(A, B, name="mm"), name="act"), permutation=[0, 2, 1], name="tr")
    Y.set_output(True)
    a, bb = random(rng, [b, m, k]), random(rng, [b, k, n])
    ref = np.maximum(np.matmul(a.astype(np.float64), bb), 0).transpose(0, 2, 1)
    if policy == "A":
        got = _run(g, {A: cuda.to_device(a), B: cuda.to_device(bb)}, Y, None, b * n * m)
        assert Y.get_dim() == [b, n, m] and Y.get_stride() == [n * m, m, 1]
        assert_close(got.reshape(b, n, m), ref, "float32")
        g2 = cudnn.pygraph()            # a serialized graph re-lowers its transpose the same way
        g2.deserialize(g.serialize())
        y2 = cuda.to_device(np.full(b * n * m, poison_value(np.float32), np.float32))
        ws = cuda.to_device(np.full(max(g2.get_workspace_size(), 1), 0xA5, np.uint8))
        g2.execute({"A": cuda.to_device(a), "B": cuda.to_device(bb), "tr::OUT_0": y2}, ws)
        assert_close(y2.copy_to_host().reshape(b, n, m), ref, "float32")
        return
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    count = g.get_execution_plan_count()
    assert count >= 1
    for i in range(count):
        buf = cuda.to_device(np.full(b * n * m, poison_value(np.float32), np.float32))
        ws = cuda.to_device(np.full(max(g.get_workspace_size_plan_at_index(i), 1), 0xA5, np.uint8))
        g.execute_plan_at_index({A: cuda.to_device(a), B: cuda.to_device(bb), Y: buf}, ws, i)
        assert_close(buf.copy_to_host().reshape(b, n, m), ref, "float32", name=g.get_plan_name_at_index(i))


def test_transpose_into_a_strided_output_nchw_to_nhwc(rng):
    """exp(X) (NCHW) transposed to (N, H, W, C) into an output whose rows are padded: the gaps stay poisoned."""
    n, c, h, w = 2, 3, 4, 5
    g = _graph()
    X = g.tensor(name="X", dim=[n, c, h, w], stride=[c * h * w, h * w, w, 1])
    Y = g.transpose(g.exp(X, name="e"), permutation=[0, 2, 3, 1], name="tr")
    pad = c + 2
    Y.set_output(True).set_stride([h * w * pad, w * pad, pad, 1])
    x = random(rng, [n, c, h, w])
    got = _run(g, {X: cuda.to_device(x)}, Y, None, n * h * w * pad).reshape(n, h, w, pad)
    assert_close(got[..., :c], np.exp(x.astype(np.float64)).transpose(0, 2, 3, 1), "float32")
    assert np.isnan(got[..., c:]).all() or (got[..., c:] == poison_value(np.float32)).all()


def test_transpose_of_a_conv_output(rng):
    n, c, hw, k = 1, 4, 5, 6
    g = _graph()
    X = g.tensor(name="X", dim=[n, c, hw, hw], stride=[c * hw * hw, hw * hw, hw, 1])
    W = g.tensor(name="W", dim=[k, c, 3, 3], stride=[c * 9, 9, 3, 1])
    Y = g.transpose(g.conv_fprop(X, W, padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="conv"),
                    permutation=[1, 0, 2, 3], name="tr")
    Y.set_output(True)
    x, wt = random(rng, [n, c, hw, hw]), random(rng, [k, c, 3, 3])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((n, k, hw, hw))
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + hw, j:j + hw], wt[:, :, i, j])
    got = _run(g, {X: cuda.to_device(x), W: cuda.to_device(wt)}, Y, None, n * k * hw * hw)
    assert_close(got.reshape(k, n, hw, hw), ref.transpose(1, 0, 2, 3), "float32")


def test_transpose_between_intermediates_is_refused():
    g = _graph()
    X = g.tensor(name="X", dim=[3, 4], stride=[4, 1])
    Y = g.relu(g.transpose(g.exp(X, name="e"), permutation=[1, 0], name="tr"), name="act")
    Y.set_output(True)
    with pytest.raises(cudnn.CudnnError) as e:
        g.build([cudnn.heur_mode.A])
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED
    assert "node 'tr' (transpose)" in str(e.value) and "set_output(True)" in str(e.value)


def test_bad_permutation_of_an_intermediate():
    g = _graph()
    X = g.tensor(name="X", dim=[3, 4], stride=[4, 1])
    g.transpose(g.exp(X, name="e"), permutation=[0, 0], name="tr").set_output(True)
    with pytest.raises(cudnn.CudnnError) as e:
        g.validate()
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "tr" in str(e.value)
