"""ncudnn.errors: error strings, the category / specific / full-code macros, the C-style convention of
@c_api and the CudnnError hierarchy."""
import threading

import pytest

import ncudnn
from ncudnn import errors
from ncudnn.errors import (CUDNN_STATUS_CATEGORY, CUDNN_STATUS_FULL_ERROR_CODE, CUDNN_STATUS_SPECIFIC_ERROR,
                           BadParamError, CudnnError, ExecutionFailedError, InternalError, NotInitializedError,
                           NotSupportedError, c_api, cudnnGetErrorString, cudnnGetLastErrorString)

S = ncudnn.cudnnStatus_t
ALL_NAMES = list(S.__members__)  # aliases included
CATEGORIES = {0: None, 1000: NotInitializedError, 2000: BadParamError, 3000: NotSupportedError,
              4000: InternalError, 5000: ExecutionFailedError}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_error_string_for_every_status(name):
    st = S[name]
    text = cudnnGetErrorString(st)
    assert text == st.name  # the canonical name (aliases print as the status they alias)
    assert text.startswith("CUDNN_STATUS_") and S[text] == st
    assert cudnnGetErrorString(int(st)) == text


def test_error_string_unknown():
    assert cudnnGetErrorString(1234567) == "CUDNN_STATUS_UNKNOWN"
    assert cudnnGetErrorString("x") == "CUDNN_STATUS_UNKNOWN"


@pytest.mark.parametrize("name", ALL_NAMES)
def test_category_specific_full_identities(name):
    code = int(S[name])
    cat = CUDNN_STATUS_CATEGORY(code)
    spec = CUDNN_STATUS_SPECIFIC_ERROR(code)
    assert cat in CATEGORIES and cat == code - code % 1000
    assert 0 <= spec < 1000 and spec == code % 1000
    assert CUDNN_STATUS_FULL_ERROR_CODE(cat, spec) == code
    assert CUDNN_STATUS_CATEGORY(cat) == cat  # a category is its own category
    if cat >= 2000:  # BAD_PARAM .. EXECUTION_FAILED are themselves statuses (1000 is not)
        assert S(cat).name == {2000: "CUDNN_STATUS_BAD_PARAM", 3000: "CUDNN_STATUS_NOT_SUPPORTED",
                               4000: "CUDNN_STATUS_INTERNAL_ERROR", 5000: "CUDNN_STATUS_EXECUTION_FAILED"}[cat]


def test_category_examples():
    assert CUDNN_STATUS_CATEGORY(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER) == S.CUDNN_STATUS_BAD_PARAM
    assert CUDNN_STATUS_SPECIFIC_ERROR(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER) == 2
    assert CUDNN_STATUS_CATEGORY(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE) == S.CUDNN_STATUS_NOT_SUPPORTED
    assert CUDNN_STATUS_CATEGORY(S.CUDNN_STATUS_SUCCESS) == 0


@pytest.mark.parametrize("name", [n for n in ALL_NAMES if S[n] != 0])
def test_error_class_per_category(name):
    st = S[name]
    e = errors.error_for(st, "why")
    cls = CATEGORIES[CUDNN_STATUS_CATEGORY(st)]
    assert type(e) is cls and isinstance(e, CudnnError)
    assert e.status == st and e.message == "why"
    assert str(e) == f"{st.name}: why"
    with pytest.raises(cls):
        errors.check(st, "why")


def test_check_success_and_default_statuses():
    errors.check(S.CUDNN_STATUS_SUCCESS)
    assert BadParamError().status == S.CUDNN_STATUS_BAD_PARAM
    assert NotSupportedError().status == S.CUDNN_STATUS_NOT_SUPPORTED
    assert NotInitializedError().status == S.CUDNN_STATUS_NOT_INITIALIZED
    assert ExecutionFailedError().status == S.CUDNN_STATUS_EXECUTION_FAILED
    assert CudnnError().status == S.CUDNN_STATUS_INTERNAL_ERROR
    assert BadParamError("m", S.CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND).status == S.CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND


# ----------------------------------------------------------------------- the C-style convention

@c_api(2)
def two_outs(x):
    if x < 0:
        raise BadParamError(f"x={x} is negative", S.CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
    if x == 0:
        raise ZeroDivisionError("boom")
    return x, 2 * x


@c_api(1)
def one_out(x):
    return x + 1


@c_api(0)
def no_outs(fail):
    if fail:
        raise NotSupportedError("nope", S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE)


def test_success_tuples():
    assert two_outs(3) == (S.CUDNN_STATUS_SUCCESS, 3, 6)
    assert one_out(1) == (S.CUDNN_STATUS_SUCCESS, 2)
    assert no_outs(False) == (S.CUDNN_STATUS_SUCCESS,)
    assert (two_outs.n_outs, one_out.n_outs, no_outs.n_outs) == (2, 1, 0)
    assert two_outs.__name__ == "two_outs"


def test_failure_tuple_arity_and_message():
    cudnnGetLastErrorString()
    err, a, b = two_outs(-1)
    assert err == S.CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND and a is None and b is None
    assert cudnnGetLastErrorString() == "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: two_outs: x=-1 is negative"
    assert cudnnGetLastErrorString() == ""  # reading clears it
    assert no_outs(True) == (S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE,)
    assert "no_outs: nope" in cudnnGetLastErrorString()


def test_unexpected_exception_becomes_internal_error():
    assert two_outs(0) == (S.CUDNN_STATUS_INTERNAL_ERROR, None, None)
    msg = cudnnGetLastErrorString()
    assert "unexpected ZeroDivisionError: boom" in msg and msg.startswith("CUDNN_STATUS_INTERNAL_ERROR")


def test_wrong_arguments_never_raise():
    assert one_out("a") == (S.CUDNN_STATUS_INTERNAL_ERROR, None)   # the function's own failure
    cudnnGetLastErrorString()
    # arguments the signature cannot take, or a number no C type holds, are the caller's BAD_PARAM
    assert one_out() == (S.CUDNN_STATUS_BAD_PARAM, None)
    assert "wrong arguments" in cudnnGetLastErrorString()
    assert one_out(1, 2) == one_out(x=1, y=2) == (S.CUDNN_STATUS_BAD_PARAM, None)
    assert one_out(float("inf")) == (S.CUDNN_STATUS_SUCCESS, float("inf"))
    cudnnGetLastErrorString()


def test_get_error_string_of_anything():
    from ncudnn.errors import cudnnGetErrorString

    for bad in (float("inf"), float("nan"), 10 ** 400, "x", None):
        assert cudnnGetErrorString(bad) == "CUDNN_STATUS_UNKNOWN"


def test_success_leaves_last_error_alone():
    two_outs(-1)
    one_out(1)
    assert "x=-1" in cudnnGetLastErrorString()


def test_last_error_is_per_thread():
    two_outs(-1)
    seen = []
    t = threading.Thread(target=lambda: seen.append(cudnnGetLastErrorString()))
    t.start()
    t.join()
    assert seen == [""]
    assert "x=-1" in cudnnGetLastErrorString()


def test_real_c_api_functions_follow_the_convention():
    assert ncudnn.cudnnGetProperty(0) == (S.CUDNN_STATUS_SUCCESS, ncudnn.types.MACROS["CUDNN_MAJOR"])
    assert ncudnn.cudnnGetProperty(9) == (S.CUDNN_STATUS_BAD_PARAM, None)
    assert ncudnn.cudnnGetLastErrorString().startswith("CUDNN_STATUS_BAD_PARAM: cudnnGetProperty")
    assert ncudnn.cudnnGetStream(None) == (S.CUDNN_STATUS_BAD_PARAM, None)
    assert ncudnn.cudnnSetCallback(-1, None, None) == (S.CUDNN_STATUS_BAD_PARAM,)
    ncudnn.cudnnGetLastErrorString()
