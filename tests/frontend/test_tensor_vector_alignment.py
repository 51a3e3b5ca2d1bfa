"""Tensor attributes cudnn-frontend code calls: get/set_alignment, get_vector_count, get_vector_dimension,
set_vector_count_and_dimension, get_has_compile_time_constant. Defaults and meanings as cudnn-frontend's
Tensor_attributes (alignment 16 bytes, vector count 1, vector dimension -1); the values reach the IR
tensor; bad values are BAD_PARAM naming the tensor."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, random
from ncudnn.types import cudnnStatus_t as S

F = cudnn.data_type.FLOAT


def graph():
    return cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F)


def relu_graph(dims=(4, 8)):
    g = graph()
    X = g.tensor(name="X", dim=list(dims), stride=[dims[1], 1])
    Y = g.relu(input=X, name="act")
    Y.set_output(True)
    return g, X, Y


def test_defaults_are_cudnn_frontends():
    g, X, Y = relu_graph()
    assert X.get_alignment() == 16 and X.get_vector_count() == 1 and X.get_vector_dimension() == -1
    assert Y.get_alignment() == 16 and not X.get_has_compile_time_constant()


def test_setters_chain_and_reach_the_ir_tensor():
    g, X, Y = relu_graph()
    assert X.set_alignment(4) is X
    assert X.set_vector_count_and_dimension(4, 1) is X
    assert (X.get_alignment(), X.get_vector_count(), X.get_vector_dimension()) == (4, 4, 1)
    assert (X.desc.alignment, X.desc.vector_count, X.desc.vectorized_dim) == (4, 4, 1)
    X.set_vector_count_and_dimension(1, -1)
    g.validate()
    ir_x = g.ir.tensors()[X.get_uid()]
    assert (ir_x.alignment, ir_x.vector_count, ir_x.vectorized_dim) == (4, 1, -1)


@pytest.mark.parametrize("value", [0, -16, 3, 12, 2.0, True, "16", None])
def test_bad_alignment_is_bad_param_naming_the_tensor(value):
    g, X, Y = relu_graph()
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        X.set_alignment(value)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "tensor 'X'" in str(e.value)
    assert "alignment" in str(e.value) and X.get_alignment() == 16


@pytest.mark.parametrize("count,dim", [(0, 1), (4, -2), (4.0, 1), (4, None), (False, 1)])
def test_bad_vector_arguments_are_bad_param_at_the_call(count, dim):
    g, X, Y = relu_graph()
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        X.set_vector_count_and_dimension(count, dim)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "tensor 'X'" in str(e.value)
    assert (X.get_vector_count(), X.get_vector_dimension()) == (1, -1)


@pytest.mark.parametrize("count,dim,why", [(3, 1, "vector count 3"), (4, 2, "vectorized dim 2"),
                                           (4, -1, "vectorized dim -1")])
def test_vector_layout_is_checked_at_validate(count, dim, why):
    g, X, Y = relu_graph()
    X.set_vector_count_and_dimension(count, dim)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.validate()
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "tensor 'X'" in str(e.value) and why in str(e.value)


def test_output_vector_layout_is_checked_after_its_dims_are_inferred():
    """An output's dims are inferred after the IR checked the descriptors: the check runs again then."""
    g, X, Y = relu_graph()
    Y.set_vector_count_and_dimension(4, 5)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.validate()
    assert f"tensor '{Y.get_name()}'" in str(e.value) and "vectorized dim 5" in str(e.value)


def test_a_vectorized_tensor_no_engine_reads_is_refused_naming_it():
    g, X, Y = relu_graph()
    X.set_vector_count_and_dimension(4, 1)
    g.validate()
    g.build_operation_graph()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT
    assert "'act'" in str(e.value) and "X: vectorized" in str(e.value)


def test_declared_alignment_runs_and_matches_the_oracle(rng):
    g, X, Y = relu_graph()
    X.set_alignment(4)
    Y.set_alignment(4)
    g.build([cudnn.heur_mode.A])
    x = random(rng, [4, 8])
    yd = cuda.device_array((4, 8), np.float32)
    g.execute({X: cuda.to_device(x), Y: yd}, None)
    assert_close(yd.copy_to_host(), np.maximum(x.astype(np.float64), 0.0), "float32")


def test_tensor_like_copies_the_layout_attributes():
    g, X, Y = relu_graph()
    X.set_alignment(8).set_vector_count_and_dimension(4, 1)
    Z = g.tensor_like(X, name="Z")
    assert (Z.get_alignment(), Z.get_vector_count(), Z.get_vector_dimension()) == (8, 4, 1)


def test_serialize_keeps_the_layout_attributes():
    g, X, Y = relu_graph()
    X.set_alignment(8)
    Y.set_alignment(4)
    g.build([cudnn.heur_mode.A])
    g2 = graph()
    g2.deserialize(g.serialize())
    X2, Y2 = g2.find_tensor("X"), g2.find_tensor(Y.get_name())
    assert (X2.get_alignment(), Y2.get_alignment()) == (8, 4)


def test_has_compile_time_constant(rng):
    g = graph()
    x = g.tensor(name="x", dim=[2, 3], stride=[3, 1])
    c = g.tensor_scalar(2.5, cudnn.scalar_type.COMPILE_TIME_CONST, name="c")
    r = g.tensor_scalar(0.5, cudnn.scalar_type.RUNTIME_PARAM, name="r")
    assert c.get_has_compile_time_constant() and not r.get_has_compile_time_constant()
    assert not x.get_has_compile_time_constant()
    y = g.mul(a=g.add(a=x, b=c), b=r)
    y.set_output(True)
    g.build([cudnn.heur_mode.A])
    xv = random(rng, [2, 3])
    yd = cuda.device_array((2, 3), np.float32)
    g.execute({x: cuda.to_device(xv), y: yd}, None)  # the constant takes no pack entry
    assert_close(yd.copy_to_host(), (xv.astype(np.float64) + 2.5) * 0.5, "float32")
