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


def _clone_with(op, rng, pool_dims):
    """A new descriptor with ``op``'s attributes (read back through the API), one of them replaced."""
    from backend_build import get
    from ncudnn.backend.values import ENUM_OF_TYPE
    d = create(op.type)
    names = [n for n, a in SCHEMA[op.type].attrs.items() if a.kind in ("required", "optional")]
    target = names[int(rng.integers(len(names)))]
    for name in names:
        attr = SCHEMA[op.type].attrs[name]
        if name != target:
            for atype in attr.types:
                status, count, vals = cudnnBackendGetAttribute(op, name, atype, 64)
                if status == S.CUDNN_STATUS_SUCCESS:
                    if count:
                        cudnnBackendSetAttribute(d, name, atype, count, vals)
                    break
            continue
        atype = attr.types[0]
        if atype == T.CUDNN_TYPE_BACKEND_DESCRIPTOR:
            old = get(op, name, atype)[1]
            if not old or old[0].type != D.CUDNN_BACKEND_TENSOR_DESCRIPTOR:
                continue
            info = old[0].state["tensor"]
            dims = list(info.dims)
            choice = rng.integers(3)
            if choice == 0 and len(dims) > 1:
                dims.pop(int(rng.integers(len(dims))))
            elif choice == 1:
                i = int(rng.integers(len(dims)))
                dims[i] = max(1, dims[i] + int(rng.choice([-1, 1, 2])))
            else:
                dims = pool_dims[int(rng.integers(len(pool_dims)))]
            vals = [tensor(info.uid, dims, dtype=info.dtype, virtual=info.is_virtual, by_value=info.is_by_value,
                           alignment=info.alignment)] * max(1, len(old))
        elif atype in ENUM_OF_TYPE:
            members = [m for m in ENUM_OF_TYPE[atype] if not m.name.endswith("COUNT")]
            vals = [members[int(rng.integers(len(members)))]]
        elif atype in (T.CUDNN_TYPE_FLOAT, T.CUDNN_TYPE_DOUBLE):
            vals = [float(rng.uniform(-1, 2))]
        elif atype == T.CUDNN_TYPE_BOOLEAN:
            vals = [bool(rng.random() < 0.5)]
        else:
            vals = [int(rng.integers(-1, 5))]
        cudnnBackendSetAttribute(d, name, atype, len(vals), vals)
    return d


@pytest.mark.parametrize("case", __import__("test_backend_lowering").CASES)
def test_mutated_operations_finalize_and_lower_without_internal_errors(case):
    from backend_build import graph
    import test_backend_lowering as lowering
    rng = np.random.default_rng(sum(map(ord, case)))
    pool = [[4], [2, 8], [1, 8, 1, 1], [2, 8, 4, 4], [1, 1, 1, 1], [2, 4, 4, 4, 4], [1, 2, 4, 3, 3, 3]]
    op = lowering.CASES[case][0]()
    for trial in range(25):
        d = _clone_with(op, rng, pool)
        status = cudnnBackendFinalize(d)[0]
        assert status != S.CUDNN_STATUS_INTERNAL_ERROR or "CUDNN_GROUP_NORM" in peek_last_error(), peek_last_error()
        if status == S.CUDNN_STATUS_SUCCESS:
            gs = cudnnBackendFinalize(graph([d], fin=False))[0]
            assert gs != S.CUDNN_STATUS_INTERNAL_ERROR, peek_last_error()
