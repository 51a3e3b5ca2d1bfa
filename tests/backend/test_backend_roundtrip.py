"""Set -> Finalize -> Get round trips on every operation descriptor the other tests build: each
attribute reads back as set (descriptor-typed ones as finalized copies of the same descriptors),
unset optional attributes read back as their documented defaults, and count-only queries agree."""
import pytest

import test_backend_lowering as lowering
from backend_build import T, get
from ncudnn.backend.schema import SCHEMA


def _same(a, b):
    if hasattr(a, "attrs"):
        return a.type == b.type and a.finalized and b.finalized and a.attrs.keys() == b.attrs.keys()
    return a == b


@pytest.mark.parametrize("case", list(lowering.CASES))
def test_every_attribute_reads_back(case):
    d = lowering.CASES[case][0]()
    for name, attr in SCHEMA[d.type].attrs.items():
        if attr.kind not in ("required", "optional"):
            continue
        if name in d.attrs:
            atype, values = d.attrs[name]
            count, _ = get(d, name, atype, 0)
            assert count == len(values), name
            count, got = get(d, name, atype, count)
            assert len(got) == len(values) and all(_same(g, v) for g, v in zip(got, values)), name
            if atype == T.CUDNN_TYPE_BACKEND_DESCRIPTOR:
                assert all(g is not v for g, v in zip(got, values))  # filled copies, not the caller's objects
        else:
            count, got = get(d, name, attr.types[0])
            assert got == (attr.default or []) and count == len(got), name
