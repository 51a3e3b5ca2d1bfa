"""pygraph construction and validate: the seed's conv -> bias -> relu graph on channels-last tensors,
shape / stride / dtype inference, names and uids, and the errors bad graphs raise."""
import pytest

import ncudnn as cudnn
from ncudnn.types import cudnnStatus_t as S

N, C, H, W, K, R = 2, 4, 6, 6, 8, 3


def nhwc(n, c, h, w):
    return [c * h * w, 1, w * c, c]


def conv_bias_relu(io=cudnn.data_type.HALF, **conv_kw):
    g = cudnn.pygraph(name="conv_bias_relu", io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[N, C, H, W], stride=nhwc(N, C, H, W), data_type=io)
    Wt = g.tensor(name="W", dim=[K, C, R, R], stride=nhwc(K, C, R, R), data_type=io)
    B = g.tensor(name="bias", dim=[1, K, 1, 1], stride=[K, 1, K, K], data_type=io)
    kw = dict(padding=[1, 1], stride=[1, 1], dilation=[1, 1], compute_data_type=cudnn.data_type.FLOAT)
    kw.update(conv_kw)
    conv = g.conv_fprop(image=X, weight=Wt, **kw)
    biased = g.bias(input=conv, bias=B)
    Y = g.relu(input=biased)
    return g, (X, Wt, B, conv, biased, Y)


def test_seed_graph_validates_and_infers_channels_last_outputs():
    g, (X, Wt, B, conv, biased, Y) = conv_bias_relu()
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    assert Y.get_dim() == [] and conv.get_is_virtual() and not Y.get_is_virtual()
    g.validate()
    out = [N, K, H, W]  # padding 1 keeps H, W for a 3x3 filter
    for t in (conv, biased, Y):
        assert t.get_dim() == out
        assert t.get_stride() == nhwc(*out), "outputs inherit the input's channels-last order"
    assert Y.get_data_type() == cudnn.data_type.HALF
    assert g.get_inputs() == [X, Wt, B] and g.get_outputs() == [Y]


def test_given_output_dims_and_strides_are_kept_and_checked():
    g, (*_, Y) = conv_bias_relu(padding=[0, 0])
    Y.set_output(True).set_dim([N, K, H - 2, W - 2]).set_stride([K * (H - 2) * (W - 2), 1, (W - 2) * K, K])
    g.validate()
    assert Y.get_stride() == [K * (H - 2) * (W - 2), 1, (W - 2) * K, K]
    Y.set_dim([N, K, H, W])  # disagrees with padding 0
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.validate()
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH and "relu.0" in str(e.value)


def test_output_names_follow_node_names():
    g, (*_, conv, biased, Y) = conv_bias_relu()
    assert (conv.get_name(), biased.get_name(), Y.get_name()) == ("conv_fprop.0::Y", "bias.0::OUT_0", "relu.0::OUT_0")
    Z = g.relu(input=Y, name="act2")
    assert Z.get_name() == "act2::OUT_0"
    Z2 = g.relu(input=Y)
    assert Z2.get_name() == "relu.1::OUT_0"


def test_uids_auto_and_user_assigned():
    g, (X, Wt, B, conv, biased, Y) = conv_bias_relu()
    uids = [t.get_uid() for t in (X, Wt, B, conv, biased, Y)]
    assert len(set(uids)) == 6
    auto = X.get_uid()
    Y.set_uid(auto)  # a user uid wins over an automatic one: X is renumbered
    assert Y.get_uid() == auto and X.get_uid() not in uids
    assert g.query_tensor_attributes_of_uid(auto) is Y
    X.set_uid(100)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        Wt.set_uid(100)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES
    T = g.tensor(name="T", dim=[1], stride=[1], data_type=cudnn.data_type.FLOAT, uid=Wt.get_uid())
    assert T.get_uid() != X.get_uid() and len({t.get_uid() for t in (X, Wt, B, conv, biased, Y, T)}) == 7


def test_setters_chain_and_getters_read_back():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    t = g.tensor(name="a", dim=[2, 3], stride=[3, 1])
    assert t.set_name("b").set_dim([3, 2]).set_stride([1, 3]).set_data_type("torch.bfloat16") is t
    assert (t.get_name(), t.get_dim(), t.get_stride(), t.get_data_type()) == ("b", [3, 2], [1, 3],
                                                                              cudnn.data_type.BFLOAT16)
    t.set_is_pass_by_value(True).set_is_virtual(False)
    assert t.get_is_pass_by_value() and not t.get_is_virtual()
    assert '"name": "b"' in repr(t)


def test_data_type_defaults_to_io_type_for_inputs():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[2, 3], stride=[3, 1])
    Y = g.exp(X)
    Y.set_output(True)
    g.validate()
    assert X.get_data_type() == cudnn.data_type.HALF and Y.get_data_type() == cudnn.data_type.HALF


def test_virtual_outputs_take_the_intermediate_type():
    g, (*_, conv, biased, Y) = conv_bias_relu()
    Y.set_output(True)
    g.validate()
    assert conv.get_data_type() == cudnn.data_type.FLOAT


def test_mismatched_shapes_raise_shape_mismatch_naming_the_node():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=[2, 3, 4], stride=[12, 4, 1])
    B = g.tensor(name="B", dim=[2, 5, 4], stride=[20, 4, 1])
    C = g.matmul(A, B, name="mm")
    C.set_output(True)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.validate()
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH
    assert "mm" in str(e.value) and "K mismatch" in str(e.value)
    assert isinstance(e.value, cudnn.CudnnError) and isinstance(e.value, ValueError)


def test_conv_weight_rank_mismatch():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[N, C, H, W], stride=nhwc(N, C, H, W))
    Wt = g.tensor(name="W", dim=[K, C, R], stride=[C * R, R, 1])
    g.conv_fprop(X, Wt, padding=[1, 1]).set_output(True)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.validate()
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH and "conv_fprop.0" in str(e.value)


def test_bad_data_types():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.INT32, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[N, C, H, W], stride=nhwc(N, C, H, W))
    Wt = g.tensor(name="W", dim=[K, C, R, R], stride=nhwc(K, C, R, R))
    g.conv_fprop(X, Wt, padding=[1, 1]).set_output(True)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.validate()
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE
    with pytest.raises(cudnn.NotSupportedError) as e:
        g.tensor(name="Z", dim=[1], stride=[1], data_type="torch.quint4x2")
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE


def test_missing_data_type_and_bad_tensors():
    g = cudnn.pygraph()  # no io type: inputs need their own
    X = g.tensor(name="X", dim=[2, 3], stride=[3, 1])
    g.exp(X).set_output(True)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.validate()
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "X" in str(e.value) and "data type" in str(e.value)
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[2, 0], stride=[3, 1])
    g.exp(X).set_output(True)
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="positive"):
        g.validate()
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="no operations"):
        cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT).validate()


def test_dangling_required_output_and_foreign_tensor():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[2, 3], stride=[3, 1])
    g.exp(X)  # virtual and never read
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="dangling"):
        g.validate()
    other = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="another graph"):
        other.exp(X)


def test_repr_prints_nodes_and_tensors():
    g, (*_, Y) = conv_bias_relu()
    Y.set_output(True)
    g.validate()
    text = repr(g)
    assert '"tag": "conv_fprop"' in text and '"relu.0::OUT_0"' in text and '"HALF"' in text
