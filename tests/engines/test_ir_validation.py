"""OpGraph.finalize statuses for bad graphs: each documented status, with the node and field named."""
import pytest

from ncudnn.errors import CudnnError
from ncudnn.ir import Matmul, OpGraph, Pointwise, TensorDesc
from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnStatus_t as S

from engine_graphs import pw, t, v

ADD, RELU = PM.CUDNN_POINTWISE_ADD, PM.CUDNN_POINTWISE_RELU_FWD


def status_of(g):
    with pytest.raises(CudnnError) as ei:
        g.finalize()
    return ei.value.status, str(ei.value)


def test_missing_required_input_port():
    st, msg = status_of(OpGraph([pw("add", ADD, t(3, (2, 3)), X=t(1, (2, 3)))]))
    assert st == S.CUDNN_STATUS_BAD_PARAM
    assert "'add'" in msg and "B" in msg


def test_matmul_missing_port_names_it():
    mm = Matmul("mm", {"A": t(1, (1, 2, 3))}, {"C": t(3, (1, 2, 4))})
    st, msg = status_of(OpGraph([mm]))
    assert st == S.CUDNN_STATUS_BAD_PARAM and "'mm'" in msg and "B" in msg


def test_missing_required_attribute():
    node = Pointwise("p", {"X": t(1, (2, 3))}, {"Y": t(2, (2, 3))})
    st, msg = status_of(OpGraph([node]))
    assert st == S.CUDNN_STATUS_BAD_PARAM and "mode" in msg


def test_shape_mismatch_broadcast():
    st, msg = status_of(OpGraph([pw("add", ADD, t(3, (2, 3)), X=t(1, (2, 3)), B=t(2, (2, 4)))]))
    assert st == S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH and "'add'" in msg


def test_shape_mismatch_given_output():
    st, msg = status_of(OpGraph([pw("relu", RELU, t(2, (2, 5)), X=t(1, (2, 3)))]))
    assert st == S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH and "Y" in msg


def test_matmul_k_mismatch():
    mm = Matmul("mm", {"A": t(1, (1, 2, 3)), "B": t(2, (1, 4, 5))}, {"C": t(3, (1, 2, 5))})
    st, msg = status_of(OpGraph([mm]))
    assert st == S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH and "K mismatch" in msg


def test_not_supported_data_type():
    a = t(1, (1, 2, 3), DT.CUDNN_DATA_INT32)
    mm = Matmul("mm", {"A": a, "B": t(2, (1, 3, 4))}, {"C": t(3, (1, 2, 4))})
    st, msg = status_of(OpGraph([mm]))
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE and "'mm'" in msg and "A" in msg


def test_dangling_virtual_output():
    g = OpGraph([pw("relu", RELU, v(5), X=t(1, (2, 3))), pw("neg", PM.CUDNN_POINTWISE_NEG, t(2, (2, 3)),
                                                              X=t(1, (2, 3)))])
    st, msg = status_of(g)
    assert st == S.CUDNN_STATUS_BAD_PARAM and "dangling" in msg and "'relu'" in msg


def test_virtual_read_but_never_written():
    st, msg = status_of(OpGraph([pw("relu", RELU, t(2, (2, 3)), X=v(5))]))
    assert st == S.CUDNN_STATUS_BAD_PARAM and "no operation writes it" in msg


def test_cycle():
    a, b = v(10), v(11)
    g = OpGraph([pw("p", ADD, a, X=t(1, (2, 3)), B=b), pw("q", RELU, b, X=a)])
    st, msg = status_of(g)
    assert st == S.CUDNN_STATUS_BAD_PARAM and "cycle" in msg


def test_uid_naming_two_tensors():
    g = OpGraph([pw("p", RELU, t(2, (2, 3)), X=t(1, (2, 3))), pw("q", RELU, t(3, (2, 3)), X=t(1, (4, 3)))])
    st, _ = status_of(g)
    assert st == S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES


def test_two_writers():
    out = t(3, (2, 3))
    g = OpGraph([pw("p", RELU, out, X=t(1, (2, 3))), pw("q", RELU, out, X=t(2, (2, 3)))])
    st, msg = status_of(g)
    assert st == S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES and "'p'" in msg and "'q'" in msg


def test_empty_graph_and_bad_tensor():
    assert status_of(OpGraph([]))[0] == S.CUDNN_STATUS_BAD_PARAM
    bad = TensorDesc(1, (2, 3), (3, 1), DT.CUDNN_DATA_FLOAT, alignment=3)
    assert status_of(OpGraph([pw("p", RELU, t(2, (2, 3)), X=bad)]))[0] == S.CUDNN_STATUS_BAD_PARAM


def test_virtual_outputs_are_inferred():
    x = t(1, (2, 3, 4))
    mid, out = v(10), t(2, (2, 3, 4))
    g = OpGraph([pw("relu", RELU, mid, X=x), pw("neg", PM.CUDNN_POINTWISE_NEG, out, X=mid)]).finalize()
    assert mid.dims == (2, 3, 4) and mid.strides == (12, 4, 1) and mid.dtype == DT.CUDNN_DATA_FLOAT
    assert [n.name for n in g.nodes] == ["relu", "neg"]


def test_intermediate_float_is_not_mistaken_for_unset():
    # CUDNN_DATA_FLOAT is 0: a graph-wide intermediate type of FLOAT must win over the input's HALF
    x = t(1, (2, 3), DT.CUDNN_DATA_HALF)
    mid, out = v(10), t(2, (2, 3), DT.CUDNN_DATA_HALF)
    OpGraph([pw("relu", RELU, mid, X=x), pw("neg", PM.CUDNN_POINTWISE_NEG, out, X=mid)],
            intermediate_dtype=DT.CUDNN_DATA_FLOAT).finalize()
    assert mid.dtype == DT.CUDNN_DATA_FLOAT
