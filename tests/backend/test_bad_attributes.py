"""cudnnBackendSetAttribute with bad values, systematically: every settable attribute of every descriptor
type in the schema, in each type it accepts, given inf, nan, 10**400, -1, a string, None, a nested list
and a wrong element count, plus calls with too many / too few arguments. Each returns a status tuple
whose status is documented and never INTERNAL_ERROR (SUCCESS only where the value is one C could
pass), with a last-error message on failure; then Finalize of the descriptor also never answers
INTERNAL_ERROR."""
import math

import pytest

import ncudnn
from ncudnn.backend import cudnnBackendCreateDescriptor, cudnnBackendFinalize, cudnnBackendSetAttribute
from ncudnn.backend.schema import SCHEMA
from ncudnn.errors import CUDNN_STATUS_CATEGORY, cudnnGetLastErrorString
from ncudnn.types import cudnnBackendAttributeType_t as T
from ncudnn.types import cudnnStatus_t as S

BIG = 10 ** 400
#: attribute types whose elements are C numbers with inf / nan among their values
FLOATING = {t for t in T if t.name in ("CUDNN_TYPE_FLOAT", "CUDNN_TYPE_DOUBLE", "CUDNN_TYPE_HALF", "CUDNN_TYPE_BFLOAT16")}
#: attribute types that take any pointer-sized value (a raw address is not checkable)
POINTERS = {T.CUDNN_TYPE_VOID_PTR}


def _bad_values(atype):
    """(elementCount, value, must_fail)."""
    vals = [(1, "a string", atype != T.CUDNN_TYPE_CHAR), (1, None, False),
            (1, [[1, 2]], atype != T.CUDNN_TYPE_FRACTION),   # a fraction is a (numerator, denominator) pair
            (-1, [1], True), (BIG, [1], True), (math.inf, [1], True), (2, [1], True)]
    if atype in FLOATING:
        vals += [(1, math.inf, False), (1, math.nan, False), (1, BIG, True), (1, -BIG, True)]
    elif atype in POINTERS:   # checked against the tensors at execute, as in C
        vals += [(1, math.inf, False), (1, BIG, False), (1, -1, False)]
    else:
        vals += [(1, math.inf, True), (1, math.nan, True), (1, BIG, True), (1, -BIG, True), (1, 1.5, True)]
    return vals


CASES = sorted({(dtype.name, name.name) for dtype, sch in SCHEMA.items() for name, a in sch.attrs.items()
                if a.settable})


def _check(what, result, must_fail):
    assert isinstance(result, tuple) and isinstance(result[0], S), f"{what} returned {result!r}"
    status = result[0]
    msg = cudnnGetLastErrorString()
    assert CUDNN_STATUS_CATEGORY(status) != S.CUDNN_STATUS_INTERNAL_ERROR, f"{what} -> {status.name}: {msg}"
    if must_fail:
        assert status != S.CUDNN_STATUS_SUCCESS, f"{what} accepted it"
    if status != S.CUDNN_STATUS_SUCCESS:
        assert msg, f"{what} -> {status.name} with no last-error message"


def test_the_schema_is_covered():
    assert len(CASES) > 200


@pytest.mark.parametrize("dtype_name", sorted({d for d, _ in CASES}))
def test_set_attribute_bad_values(dtype_name):
    from ncudnn.types import cudnnBackendAttributeName_t as A
    from ncudnn.types import cudnnBackendDescriptorType_t as D

    dtype = D[dtype_name]
    for _, attr_name in (c for c in CASES if c[0] == dtype_name):
        name = A[attr_name]
        for atype in SCHEMA[dtype].attrs[name].types:
            for count, value, must_fail in _bad_values(atype):
                desc = cudnnBackendCreateDescriptor(dtype)[1]
                what = f"{dtype_name}.{attr_name} {atype.name} count={count!r:.20} value={value!r:.30}"
                cudnnGetLastErrorString()
                _check(what, cudnnBackendSetAttribute(desc, name, atype, count, value), must_fail)
                _check(f"Finalize after {what}", cudnnBackendFinalize(desc), False)


@pytest.mark.parametrize("bad", [math.inf, math.nan, BIG, -1, "x", None, [1]])
def test_bad_attribute_name_type_and_descriptor(bad):
    from ncudnn.types import cudnnBackendDescriptorType_t as D

    desc = cudnnBackendCreateDescriptor(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)[1]
    from ncudnn.types import cudnnBackendAttributeName_t as A

    for args in ((desc, bad, T.CUDNN_TYPE_INT64, 1, [1]),
                 (desc, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, bad, 1, [1]),
                 (bad, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, 1, [1])):
        _check(f"SetAttribute{args!r:.80}", cudnnBackendSetAttribute(*args), True)
    _check("CreateDescriptor", cudnnBackendCreateDescriptor(bad), True)
    _check("Finalize", cudnnBackendFinalize(bad), True)


def test_wrong_argument_counts():
    from ncudnn.types import cudnnBackendAttributeName_t as A
    from ncudnn.types import cudnnBackendDescriptorType_t as D

    desc = cudnnBackendCreateDescriptor(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)[1]
    _check("too few", cudnnBackendSetAttribute(desc, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, 1), True)
    _check("too many", cudnnBackendSetAttribute(desc, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, 1, [1], 2),
           True)
    _check("no args", cudnnBackendFinalize(), True)
    _check("create, two", cudnnBackendCreateDescriptor(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1), True)
    assert ncudnn.cudnnGetLastErrorString() == ""


@pytest.mark.parametrize("dims,strides", [
    ([1, 2], [2 ** 63 - 1, 2 ** 63 - 1]),          # one step of stride 2^63-1 is past int64 bytes
    ([2 ** 40, 2 ** 40], [2 ** 40, 1]),            # 2^80 elements
    ([2, 2 ** 62], [2 ** 62, 1]),
])
def test_tensor_past_int64_bytes_is_bad_param(dims, strides):
    from ncudnn.types import cudnnBackendAttributeName_t as A
    from ncudnn.types import cudnnBackendDescriptorType_t as D

    t = cudnnBackendCreateDescriptor(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)[1]
    for name, atype, vals in ((A.CUDNN_ATTR_TENSOR_DATA_TYPE, T.CUDNN_TYPE_DATA_TYPE, [ncudnn.CUDNN_DATA_FLOAT]),
                              (A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, [1]),
                              (A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, T.CUDNN_TYPE_INT64, [4]),
                              (A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, dims),
                              (A.CUDNN_ATTR_TENSOR_STRIDES, T.CUDNN_TYPE_INT64, strides)):
        assert cudnnBackendSetAttribute(t, name, atype, len(vals), vals) == (S.CUDNN_STATUS_SUCCESS,)
    assert cudnnBackendFinalize(t) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert "int64_t" in cudnnGetLastErrorString()
