"""Convolution forward / backward-data / backward-filter operations: the X/W/Y binding rules of both
layouts (SPATIAL_DIMS + 2 and the grouped SPATIAL_DIMS + 3 form) and each BAD_PARAM case."""
import pytest

from backend_build import A, D, S, T, conv_desc, conv_op, expect, finalize, get, tensor

FWD = D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
DGRAD = D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
WGRAD = D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR
KINDS = [FWD, DGRAD, WGRAD]


def grouped_tensors(n=1, g=2, c=3, k=4, d=3, h=5, w=5):
    """The reference's use case: 6-d X [n,g,c,d,h,w], W [g,k,c,1,3,3], Y [n,g,k,d,h-2,w-2]."""
    return (tensor(ord("x"), [n, g, c, d, h, w]), tensor(ord("w"), [g, k, c, 1, 3, 3]),
            tensor(ord("y"), [n, g, k, d, h - 2, w - 2]))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_grouped_6d_form_finalizes(kind):
    x, w, y = grouped_tensors()
    op = conv_op(kind, x, w, y, conv_desc(3), alpha=1.0, beta=0.5)
    geo = op.state["conv"]
    assert (geo.groups, geo.n, geo.c, geo.k, geo.grouped_layout) == (2, 1, 3, 4, True)
    p = {FWD: "FORWARD", DGRAD: "BWD_DATA", WGRAD: "BWD_FILTER"}[kind]
    assert get(op, A[f"CUDNN_ATTR_OPERATION_CONVOLUTION_{p}_BETA"], T.CUDNN_TYPE_FLOAT) == (1, [0.5])
    assert get(op, A[f"CUDNN_ATTR_OPERATION_CONVOLUTION_{p}_ALPHA"], T.CUDNN_TYPE_DOUBLE) == (1, [1.0])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_5d_backward_compatible_form_finalizes(kind):
    x = tensor(1, [2, 6, 4, 7, 7])
    w = tensor(2, [8, 3, 1, 3, 3])
    y = tensor(3, [2, 8, 2, 4, 4])
    op = conv_op(kind, x, w, y, conv_desc(3, pre=[0, 1, 1], post=[0, 1, 1], stride=[2, 2, 2]))
    geo = op.state["conv"]
    assert (geo.groups, geo.c, geo.k, geo.y_spatial) == (2, 3, 4, (2, 4, 4))


def test_4d_with_padding_stride_dilation():
    x, w, y = tensor(1, [2, 3, 9, 9]), tensor(2, [5, 3, 3, 3]), tensor(3, [2, 5, 5, 3])
    conv_op(FWD, x, w, y, conv_desc(2, pre=[1, 0], post=[1, 0], stride=[2, 2], dilation=[1, 2]))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_rank_not_spatial_plus_2_or_3(kind):
    x, w, y = tensor(1, [2, 3, 9, 9]), tensor(2, [5, 3, 3, 3]), tensor(3, [2, 5, 7, 7])
    expect(finalize(conv_op(kind, x, w, y, conv_desc(3), fin=False)), S.CUDNN_STATUS_BAD_PARAM, kind.name,
           "the convolution has 3 spatial dimensions")


@pytest.mark.parametrize("case, fragment", [
    ("channels", "not a multiple"), ("groups", "do not split"), ("n", "[N, G*K]"), ("spatial", "the convolution gives"),
    ("k", "[N, G*K]"), ("too_small", "exceeds the padded input"), ("ranks", "must agree")])
def test_fprop_shape_mismatches(case, fragment):
    dims = {"x": [2, 6, 8, 8], "w": [4, 3, 3, 3], "y": [2, 4, 6, 6]}
    if case == "channels":
        dims["x"] = [2, 7, 8, 8]
    elif case == "groups":
        dims["w"], dims["y"] = [5, 3, 3, 3], [2, 5, 6, 6]
    elif case == "n":
        dims["y"] = [3, 4, 6, 6]
    elif case == "spatial":
        dims["y"] = [2, 4, 6, 5]
    elif case == "k":
        dims["y"] = [2, 8, 6, 6]
    elif case == "too_small":
        dims["w"] = [4, 3, 9, 3]
    x, w, y = tensor(1, dims["x"]), tensor(2, dims["w"]), tensor(3, dims["y"])
    if case == "ranks":
        y = tensor(3, [2, 4, 6, 6, 1])
    op = conv_op(FWD, x, w, y, conv_desc(2), fin=False)
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, FWD.name, fragment)
    assert not op.finalized


def test_grouped_form_needs_packed_groups_and_matching_g():
    x, w, y = grouped_tensors()
    bad_w = tensor(ord("w"), [2, 4, 3, 1, 3, 3], strides=[27, 54, 9, 9, 3, 1])
    expect(finalize(conv_op(FWD, x, bad_w, y, conv_desc(3), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W", "packed")
    other_g = tensor(ord("w"), [3, 4, 3, 1, 3, 3])
    expect(finalize(conv_op(FWD, x, other_g, y, conv_desc(3), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W", "[G, K, C]")
    bad_y = tensor(ord("y"), [1, 2, 5, 3, 3, 3])
    expect(finalize(conv_op(FWD, x, w, bad_y, conv_desc(3), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y", "[N, G, K]")


def test_dgrad_and_wgrad_name_their_own_attributes():
    x, w, y = tensor(1, [2, 6, 8, 8]), tensor(2, [4, 3, 3, 3]), tensor(3, [2, 4, 6, 5])
    expect(finalize(conv_op(DGRAD, x, w, y, conv_desc(2), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY")
    expect(finalize(conv_op(WGRAD, x, w, y, conv_desc(2), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY")


def test_conv_op_needs_finalized_parts_and_all_attributes():
    x, w, y = grouped_tensors()
    c = conv_desc(3, fin=False)
    expect(finalize(conv_op(FWD, x, w, y, c, fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC", "not finalized")
    from backend_build import create, ok, set_attr
    op = create(FWD)
    ok(set_attr(op, A.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, T.CUDNN_TYPE_BACKEND_DESCRIPTOR, x))
    expect(finalize(op), S.CUDNN_STATUS_BAD_PARAM, "required attribute(s) not set",
           "CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA", "CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y")
