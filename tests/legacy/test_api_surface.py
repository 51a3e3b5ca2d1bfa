"""Every function of cudnn_ops.h / cudnn_cnn.h exists with the C parameter names, and takes the C
inputs while returning (status, *outs); transform descriptors; the honest NOT_SUPPORTED calls."""
import inspect
import json
from importlib import resources

import numpy as np
import pytest

import ncudnn
import ncudnn.legacy as L

from .conftest import dev, fdesc, poisoned, tdesc

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS


def _functions():
    api = json.loads(resources.files("ncudnn").joinpath("_data/cudnn_api.json").read_text())
    return {k: v for k, v in api["functions"].items() if v["header"] in ("cudnn_ops.h", "cudnn_cnn.h")}


@pytest.mark.parametrize("name, entry", sorted(_functions().items()), ids=sorted(_functions()))
def test_function_exists_with_c_parameters(name, entry):
    if name.endswith("VersionCheck"):
        assert getattr(ncudnn, name)() is not None
        return
    f = getattr(ncudnn, name)
    assert getattr(ncudnn.legacy, name) is f
    params = [p for p in entry["params"] if p != "void"]
    c_names = [p.replace("*", " ").replace("[]", "").split()[-1] for p in params]
    py = list(inspect.signature(inspect.unwrap(f)).parameters)
    assert len(py) + f.n_outs == len(c_names), (py, c_names)
    assert all(n in c_names for n in py), (py, c_names)
    outs = [n for n in c_names if n not in py]
    assert all(c_names.index(a) < c_names.index(b) for a, b in zip(outs, outs[1:])), "outs keep the C order"


def test_calls_never_raise_on_garbage():
    for name in _functions():
        f = getattr(ncudnn, name)
        if not hasattr(f, "n_outs"):
            continue
        n = len(inspect.signature(inspect.unwrap(f)).parameters)
        ret = f(*(["garbage"] * n))
        assert isinstance(ret, tuple) and len(ret) == 1 + f.n_outs
        if n:
            assert ret[0] != OK or name.startswith("cudnnDestroy"), name
            assert ret[0] != S.CUDNN_STATUS_INTERNAL_ERROR, (name, ncudnn.cudnnGetLastErrorString())


def test_transform_descriptor_and_init_dest():
    _, t = L.cudnnCreateTensorTransformDescriptor()
    assert L.cudnnSetTensorTransformDescriptor(t, 4, ncudnn.CUDNN_TENSOR_NHWC, [0, 0, 1, 2], [0, 0, 1, 0], [1, 1],
                                               ncudnn.CUDNN_TRANSFORM_FOLD) == (OK,)
    assert L.cudnnGetTensorTransformDescriptor(t, 4) == (OK, ncudnn.CUDNN_TENSOR_NHWC, [0, 0, 1, 2], [0, 0, 1, 0],
                                                         [1, 1], ncudnn.CUDNN_TRANSFORM_FOLD)
    _, dst = L.cudnnCreateTensorDescriptor()
    st, size = L.cudnnInitTransformDest(t, tdesc((2, 3, 4, 5)), dst)
    assert st == OK and size == 2 * 3 * 6 * 7 * 4
    assert L.cudnnGetTensor4dDescriptor(dst)[1:] == (ncudnn.CUDNN_DATA_FLOAT, 2, 3, 6, 7, 126, 1, 21, 3)
    assert L.cudnnSetTensorTransformDescriptor(t, 4, 0, None, None, [2, 1], 0) == (OK,)
    assert L.cudnnInitTransformDest(t, tdesc((2, 3, 4, 5)), dst)[0] == S.CUDNN_STATUS_NOT_SUPPORTED
    assert L.cudnnSetTensorTransformDescriptor(t, 2, 0, None, None, None, 0)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnSetTensorTransformDescriptor(t, 4, 0, [0, 0, -1, 0], None, None, 0)[0] == S.CUDNN_STATUS_BAD_PARAM


def test_transform_tensor_ex_pads_and_changes_layout(handle, rng):
    _, t = L.cudnnCreateTensorTransformDescriptor()
    L.cudnnSetTensorTransformDescriptor(t, 4, ncudnn.CUDNN_TENSOR_NHWC, [0, 0, 1, 0], [0, 0, 0, 2], None, 0)
    src = tdesc((2, 3, 2, 3))
    _, dd = L.cudnnCreateTensorDescriptor()
    st, size = L.cudnnInitTransformDest(t, src, dd)
    x = rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    out = poisoned(size // 4)
    assert L.cudnnTransformTensorEx(handle, t, 1.5, src, dev(x), 0.0, dd, out) == (OK,), \
        ncudnn.cudnnGetLastErrorString()
    got = out.copy_to_host().reshape(2, 3, 5, 3).transpose(0, 3, 1, 2)  # NHWC memory -> NCHW view
    want = np.zeros((2, 3, 3, 5), np.float32)
    want[:, :, 1:, :3] = 1.5 * x
    np.testing.assert_array_equal(got, want)
    assert L.cudnnTransformTensorEx(handle, t, 1.0, src, dev(x), 1.0, dd, out) == (S.CUDNN_STATUS_NOT_SUPPORTED,)


def test_transform_filter_to_nhwc(handle, rng):
    _, t = L.cudnnCreateTensorTransformDescriptor()
    L.cudnnSetTensorTransformDescriptor(t, 4, ncudnn.CUDNN_TENSOR_NHWC, None, None, None, 0)
    w = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    _, fd = L.cudnnCreateFilterDescriptor()
    L.cudnnSetFilter4dDescriptor(fd, 0, ncudnn.CUDNN_TENSOR_NHWC, 4, 3, 2, 2)
    out = poisoned((4, 2, 2, 3))
    assert L.cudnnTransformFilter(handle, t, 1.0, fdesc((4, 3, 2, 2)), dev(w), 0.0, fd, out) == (OK,), \
        ncudnn.cudnnGetLastErrorString()
    np.testing.assert_array_equal(out.copy_to_host(), w.transpose(0, 2, 3, 1))


def test_unsupported_calls_say_why(handle):
    _, st = L.cudnnCreateSpatialTransformerDescriptor()
    assert L.cudnnSetSpatialTransformerNdDescriptor(st, 0, 0, 4, [1, 2, 3, 4]) == (OK,)
    assert L.cudnnSpatialTfGridGeneratorForward(handle, st, 1, 2) == (S.CUDNN_STATUS_NOT_SUPPORTED,)
    assert "spatial transformer" in ncudnn.cudnnGetLastErrorString()
    _, cp = L.cudnnCreateFusedOpsConstParamPack(ncudnn.CUDNN_FUSED_SCALE_BIAS_ACTIVATION_CONV_BNSTATS)
    assert L.cudnnGetFusedOpsConstParamPackAttribute(cp, 0) == (OK, None, 1)
    assert L.cudnnSetFusedOpsConstParamPackAttribute(cp, 0, 7) == (OK,)
    assert L.cudnnGetFusedOpsConstParamPackAttribute(cp, 0) == (OK, 7, 0)
    _, plan = L.cudnnCreateFusedOpsPlan(ncudnn.CUDNN_FUSED_SCALE_BIAS_ACTIVATION_CONV_BNSTATS)
    assert L.cudnnMakeFusedOpsPlan(handle, plan, cp) == (S.CUDNN_STATUS_NOT_SUPPORTED, None)
    assert "graph API" in ncudnn.cudnnGetLastErrorString()
    assert L.cudnnCreateFusedOpsPlan(99)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnDivisiveNormalizationForward(handle, None, 0, 1.0, None, None, None, None, None, 0.0, None, None) == \
        (S.CUDNN_STATUS_NOT_SUPPORTED,)
