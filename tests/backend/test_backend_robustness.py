"""No input reaches an unexpected exception: every Set / Get / Finalize on every descriptor type with
values of every wrong kind answers a documented status (never INTERNAL_ERROR) and a message."""
import itertools

import numpy as np
import pytest

from backend_build import D, S, T, create, tensor
from ncudnn.backend import cudnnBackendFinalize, cudnnBackendGetAttribute, cudnnBackendSetAttribute
from ncudnn.backend.schema import SCHEMA
from ncudnn.errors import peek_last_error

GARBAGE = [None, "x", -1, 2 ** 70, 1.5, float("nan"), True, object(), [], [1, 2, 3], (1, 0), np.arange(3),
           np.float32(2.0)]


@pytest.mark.parametrize("dtype", list(SCHEMA), ids=lambda d: d.name)
def test_garbage_never_raises_or_gives_internal_error(dtype):
    d = create(dtype)
    others = [tensor(1, [2]), create(D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)]
    for name, attr in SCHEMA[dtype].attrs.items():
        types = list(attr.types) + [T.CUDNN_TYPE_CHAR if T.CUDNN_TYPE_CHAR not in attr.types else T.CUDNN_TYPE_INT64]
        for atype, count, value in itertools.product(types, (0, 1, 3), GARBAGE + others):
            status = cudnnBackendSetAttribute(d, name, atype, count, value)[0]
            assert status != S.CUDNN_STATUS_INTERNAL_ERROR, (name, atype, count, value, peek_last_error())
            if status != S.CUDNN_STATUS_SUCCESS:
                assert peek_last_error()
        for atype, count in itertools.product(types, (0, 1, -1)):
            status = cudnnBackendGetAttribute(d, name, atype, count)[0]
            assert status not in (S.CUDNN_STATUS_SUCCESS, S.CUDNN_STATUS_INTERNAL_ERROR), (name, atype)
    status = cudnnBackendFinalize(d)[0]
    assert status != S.CUDNN_STATUS_INTERNAL_ERROR, peek_last_error()
