"""Every C-style function of cudnn_graph.h / cudnn_ops.h / cudnn_cnn.h that ncudnn has (the list comes
from the cuDNN 9 API reference, ../shared/reference/cudnn_api.json), called with one bad argument at a
time (inf, nan, 10**400, -1, a string, None, a list where a scalar is expected, a scalar where a list
is), and with too many / too few arguments. Each call returns a tuple whose first element is a
documented cudnnStatus_t, never INTERNAL_ERROR (a bad argument is the caller's fault: BAD_PARAM
normally), never SUCCESS where the argument cannot be valid, and a failure leaves a last-error message.

The other arguments are plausible (a live handle, set descriptors, small device buffers), so the bad
one is reached."""
import inspect
import json
import math
import os
import re

import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
import ncudnn.types
from ncudnn.errors import CUDNN_STATUS_CATEGORY, cudnnGetLastErrorString
from ncudnn.types import cudnnStatus_t as S

API = os.path.join(os.path.dirname(ncudnn.__file__), "_data", "cudnn_api.json")
#: functions that do not follow the tuple convention (they return a value, as in C)
NOT_TUPLES = {"cudnnGetErrorString", "cudnnGetLastErrorString", "cudnnGetVersion", "cudnnGetCudartVersion",
              "cudnnGetMaxDeviceVersion"}
BIG = 10 ** 400


def _functions():
    with open(API) as f:
        funcs = json.load(f)["functions"]
    out = []
    for name, info in funcs.items():
        if name.startswith("cudnnBackend") or name in NOT_TUPLES:
            continue
        fn = getattr(L, name, None) or getattr(ncudnn, name, None)
        if fn is None or not callable(fn):
            continue
        ctypes_ = {}
        for p in info["params"]:
            pname = re.split(r"[\s*]+", p.replace("[]", "").strip())[-1]
            ctypes_[pname] = p
        params = [(pn, ctypes_.get(pn, "")) for pn in inspect.signature(fn).parameters]
        out.append((name, fn, params))
    return out


FUNCTIONS = _functions()


def _ctype(decl):
    """(type name, is_array, is_pointer) of a C parameter declaration."""
    is_array = "[]" in decl
    is_ptr = "*" in decl
    words = decl.replace("const", " ").replace("*", " ").replace("[]", " ").split()
    return (" ".join(words[:-1]) if len(words) > 1 else (words[0] if words else "")), is_array, is_ptr


class Defaults:
    """Plausible arguments by C type: a live handle, set descriptors, small device buffers."""

    def __init__(self):
        self.handle = ncudnn.cudnnCreate()[1]
        self.buf = cuda.to_device(np.zeros(4, np.float32))   # a 1x1x2x2 FLOAT tensor

    def close(self):
        ncudnn.cudnnDestroy(self.handle)

    def descriptor(self, kind):
        create = getattr(L, f"cudnnCreate{kind}Descriptor", None) or getattr(L, f"cudnnCreate{kind}", None)
        if create is None:
            return None
        d = create()[1]
        setter = {
            "Tensor": lambda: L.cudnnSetTensor4dDescriptor(d, 0, 0, 1, 1, 2, 2),
            "Filter": lambda: L.cudnnSetFilter4dDescriptor(d, 0, 0, 1, 1, 1, 1),
            "Convolution": lambda: L.cudnnSetConvolution2dDescriptor(d, 0, 0, 1, 1, 1, 1, 1, 0),
            "Activation": lambda: L.cudnnSetActivationDescriptor(d, 1, 0, 0.0),
            "Pooling": lambda: L.cudnnSetPooling2dDescriptor(d, 0, 0, 1, 1, 0, 0, 1, 1),
            "LRN": lambda: L.cudnnSetLRNDescriptor(d, 5, 1e-4, 0.75, 2.0),
            "OpTensor": lambda: L.cudnnSetOpTensorDescriptor(d, 0, 0, 0),
            "ReduceTensor": lambda: L.cudnnSetReduceTensorDescriptor(d, 0, 0, 0, 0, 0),
        }.get(kind)
        if setter is not None:
            assert setter()[0] == S.CUDNN_STATUS_SUCCESS, (kind, cudnnGetLastErrorString())
        return d

    def value(self, pname, decl):
        t, is_array, is_ptr = _ctype(decl)
        if t == "cudnnHandle_t":
            return self.handle
        m = re.fullmatch(r"cudnn(\w+?)(Descriptor)?_t", t)
        if m and (m.group(2) or t.endswith("Pack_t") or t.endswith("Plan_t")):
            return self.descriptor(m.group(1))
        if is_array:
            return [1, 1, 1, 1]
        if t in ("void",) and is_ptr:
            if re.match(r"(alpha|beta|valuePtr)", pname):
                return 1.0
            return self.buf
        if t in ("double", "float"):
            return 0.0 if pname == "dropout" else 1.0
        if t == "cudaStream_t":
            return 0
        if t == "cudnnCallback_t":
            return None
        if t.startswith("cudnn") or t == "libraryPropertyType":
            return 0   # an enum: its first enumerant
        if t == "size_t":
            return 0
        if "nbDims" in pname:
            return 4
        if pname.startswith("arrayLength"):
            return 2
        return 1   # int, unsigned, int64_t, unsigned long long


def _bad_values(pname, decl):
    """(value, must_fail) for one parameter: must_fail where no C value could be this."""
    t, is_array, is_ptr = _ctype(decl)
    if pname == "udata":   # the callback's user data: any object
        return [(v, False) for v in ("a string", None, -1, math.inf, BIG)]
    enum = isinstance(getattr(ncudnn.types, t, None), type)
    integral = enum or t in ("int", "size_t", "unsigned", "uint32_t", "int32_t", "int64_t", "unsigned long long")
    host_scalar = t in ("double", "float") or (t == "void" and re.match(r"(alpha|beta|valuePtr)", pname))
    vals = [("a string", True), (None, False), (-1, False)]
    if is_array:
        vals += [(5, True), ([math.inf] * 4, True), ([BIG] * 4, True), (["x"] * 4, True), ([math.nan] * 4, True)]
    elif integral and not is_ptr:
        vals += [(math.inf, True), (math.nan, True), (BIG, True), (1.5, True), ([1], True), (-BIG, True)]
    elif host_scalar:   # a C float / double: inf and nan are values; 10**400 is not
        vals += [(math.inf, False), (math.nan, False), (BIG, True), (-BIG, True), ([1, 2], True)]
    else:               # a device pointer, descriptor, handle, stream or callback
        vals += [(math.inf, True), (math.nan, True), (BIG, True), ([1, 2], True)]
    return vals


CASES = []
for _name, _fn, _params in FUNCTIONS:
    for _i, (_pn, _decl) in enumerate(_params):
        for _v, _must in _bad_values(_pn, _decl):
            CASES.append((_name, _i, _v, _must))

# one id per function: the test loops over that function's cases (thousands of ids would be noise)
BY_FUNCTION = {}
for _c in CASES:
    BY_FUNCTION.setdefault(_c[0], []).append(_c[1:])


def _check(name, result, must_fail, what):
    assert isinstance(result, tuple) and result, f"{name}({what}) returned {result!r}, not a status tuple"
    status = result[0]
    assert isinstance(status, S), f"{name}({what}) returned {status!r} as its status"
    assert CUDNN_STATUS_CATEGORY(status) != S.CUDNN_STATUS_INTERNAL_ERROR, \
        f"{name}({what}) -> {status.name}: {cudnnGetLastErrorString()}"
    msg = cudnnGetLastErrorString()
    if must_fail:
        assert status != S.CUDNN_STATUS_SUCCESS, f"{name}({what}) accepted it"
    if status != S.CUDNN_STATUS_SUCCESS:
        assert msg, f"{name}({what}) -> {status.name} with no last-error message"


@pytest.fixture(scope="module")
def defaults():
    d = Defaults()
    yield d
    d.close()


def _args(defaults, name, params):
    d = Defaults.__new__(Defaults)
    d.buf = defaults.buf
    # functions that consume the handle get their own
    d.handle = ncudnn.cudnnCreate()[1] if name in ("cudnnDestroy", "cudnnSetStream") else defaults.handle
    return [d.value(pn, decl) for pn, decl in params]


def test_the_list_is_the_api():
    names = {n for n, _, _ in FUNCTIONS}
    assert len(names) > 120 and {"cudnnSetTensor4dDescriptor", "cudnnConvolutionForward", "cudnnSetStream",
                                 "cudnnSetLRNDescriptor", "cudnnSetDropoutDescriptor"} <= names


#: (function, parameter): a number there (alpha != 1: a blended output) reaches an engine bug outside the
#: argument checks (tested apart below)
ENGINE_BUGS = {("cudnnBatchNormalizationForwardTraining", "alpha"), ("cudnnBatchNormalizationForwardTrainingEx", "alpha"),
               ("cudnnNormalizationForwardTraining", "alpha")}


@pytest.mark.parametrize("name", sorted(BY_FUNCTION))
def test_bad_argument(defaults, name):
    fn = next(f for n, f, _ in FUNCTIONS if n == name)
    params = next(p for n, _, p in FUNCTIONS if n == name)
    for i, value, must_fail in BY_FUNCTION[name]:
        if isinstance(value, (int, float)) and (name, params[i][0]) in ENGINE_BUGS:
            continue
        args = _args(defaults, name, params)
        args[i] = value
        cudnnGetLastErrorString()
        _check(name, fn(*args), must_fail, f"{params[i][0]}={value!r:.40}")


@pytest.mark.parametrize("name", sorted(n for n, _, _ in FUNCTIONS))
def test_wrong_argument_count(defaults, name):
    fn = next(f for n, f, _ in FUNCTIONS if n == name)
    params = next(p for n, _, p in FUNCTIONS if n == name)
    args = _args(defaults, name, params)
    _check(name, fn(*args, 1), True, "one argument too many")
    last = list(inspect.signature(fn).parameters.values())[-1:]
    if args and last[0].default is inspect.Parameter.empty:
        _check(name, fn(*args[:-1]), True, "one argument too few")
    _check(name, fn(*args, bogus=1), True, "an unknown keyword")


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, BIG, -1, "x", None, [1], 1.5])
def test_get_error_string_never_raises(bad):
    s = ncudnn.cudnnGetErrorString(bad)
    assert isinstance(s, str) and s


def test_get_error_string_names_a_status():
    assert ncudnn.cudnnGetErrorString(S.CUDNN_STATUS_BAD_PARAM) == "CUDNN_STATUS_BAD_PARAM"
    assert ncudnn.cudnnGetErrorString(2000) == "CUDNN_STATUS_BAD_PARAM"


@pytest.mark.parametrize("name,param", sorted(ENGINE_BUGS))
@pytest.mark.parametrize("value", [-1, 0.5])
def test_batchnorm_training_blend_alpha(defaults, name, param, value):
    fn = next(f for n, f, _ in FUNCTIONS if n == name)
    params = next(p for n, _, p in FUNCTIONS if n == name)
    args = _args(defaults, name, params)
    args[[p for p, _ in params].index(param)] = value
    _check(name, fn(*args), False, f"{param}={value!r}")


def test_set_stream_to_a_device_array_is_bad_param_and_destroy_still_works():
    h = ncudnn.cudnnCreate()[1]
    arr = cuda.to_device(np.zeros(4, np.float32))
    assert ncudnn.cudnnSetStream(h, arr) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert "not a CUDA stream" in cudnnGetLastErrorString()
    assert ncudnn.cudnnSetStream(h, 2 ** 64) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert ncudnn.cudnnGetStream(h) == (S.CUDNN_STATUS_SUCCESS, 0)
    assert ncudnn.cudnnDestroy(h) == (S.CUDNN_STATUS_SUCCESS,)


def test_tensor_sizes_past_int64_are_bad_param():
    t = L.cudnnCreateTensorDescriptor()[1]
    big = 2 ** 31 - 1
    assert L.cudnnSetTensor4dDescriptor(t, 0, 0, big, big, big, 2)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert "2^63" in cudnnGetLastErrorString()
    assert L.cudnnGetTensorSizeInBytes(t)[0] == S.CUDNN_STATUS_BAD_PARAM   # left unset
    assert L.cudnnSetTensor4dDescriptorEx(t, 0, big, big, big, 2, big, big, big, 1)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnSetTensor4dDescriptor(t, 0, 0, 2, 3, 4, 5) == (S.CUDNN_STATUS_SUCCESS,)
    assert L.cudnnGetTensorSizeInBytes(t) == (S.CUDNN_STATUS_SUCCESS, 2 * 3 * 4 * 5 * 4)
    f = L.cudnnCreateFilterDescriptor()[1]
    assert L.cudnnSetFilter4dDescriptor(f, 0, 0, big, big, big, 4)[0] == S.CUDNN_STATUS_BAD_PARAM
    strides = [big ** 2, big, 1]
    assert L.cudnnSetTensorNdDescriptor(t, 0, 3, [big, big, big], strides)[0] == S.CUDNN_STATUS_BAD_PARAM
