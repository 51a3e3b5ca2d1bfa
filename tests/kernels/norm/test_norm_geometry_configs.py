"""The norm kernels' launch geometries are frozen dataclasses (issue #22): named fields, ``check()`` -> (ok, reason),
``keep(problem)``, and the tuple behaviour their callers had (unpacking, ordering, hashing, equality by value)."""
import dataclasses
import pickle

import pytest

from ncudnn.kernels.norm import bn_cols as kc, bn_colsv as kv, bn_persist as kp, row_bwd as kb


def _all():
    return [kc.cols_config(1000, 70, 132), kv.colsv_config(100352, 256, 132), kv.colsv_config(70, 7, 4, vec=1),
            kp.persist_config(100352, 256, 132, 512), kp.persist_config(70, 16, 132, 512, fill=True),
            kb.fused_config(1024, 8192, 132, 4), kb.fused_config(2048, 10, 132, 4)]


@pytest.mark.parametrize("i", range(7))
def test_geometry_is_a_frozen_dataclass_with_tuple_behaviour(i):
    g = _all()[i]
    assert dataclasses.is_dataclass(g) and not isinstance(g, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.chunks = 1
    as_tuple = tuple(getattr(g, f.name) for f in dataclasses.fields(g))
    assert tuple(g) == as_tuple and list(g) == list(as_tuple)       # unpacks as the tuple it was
    again = _all()[i]
    assert again == g and hash(again) == hash(g) and {g: 1}[again] == 1
    assert pickle.loads(pickle.dumps(g)) == g
    assert g.check() == (True, "")
    bigger = dataclasses.replace(g, chunk_rows=g.chunk_rows + 1) if hasattr(g, "chunk_rows") else \
        dataclasses.replace(g, grid=g.grid + 1)
    assert g < bigger and sorted([bigger, g]) == [g, bigger]          # ordered as its tuple


def test_field_order_and_values():
    assert tuple(kp.persist_config(70, 16, 132, 512, fill=True)) == (4, 128, 1, 132, 1)
    assert [f.name for f in dataclasses.fields(kc.ColsConfig)] == ["tx", "ty", "unroll", "tiles", "chunks",
                                                                   "chunk_rows"]
    assert [f.name for f in dataclasses.fields(kv.ColsVConfig)] == ["txv", "ty", "vec", "unroll", "tiles", "chunks",
                                                                    "chunk_rows"]
    assert [f.name for f in dataclasses.fields(kp.PersistConfig)] == ["txv", "ty", "tiles", "chunks", "chunk_rows"]
    assert [f.name for f in dataclasses.fields(kb.FusedConfig)] == ["block", "vpt", "rows", "grid", "vec", "stages",
                                                                    "blocks_per_sm"]
    c = kb.fused_config(1024, 8192, 132, 4)
    assert c == kb.FusedConfig(block=128, vpt=2, rows=4, grid=264, vec=4, stages=2, blocks_per_sm=2)


def test_check_reasons():
    ok, why = kc.ColsConfig(32, 64, 8, 1, 1, 8).check()
    assert not ok and "32 x 64 threads per block > 1024" in why
    ok, why = kv.ColsVConfig(32, 8, 2, 4, 1, 1, 8).check()
    assert not ok and "VEC 2" in why
    ok, why = kp.PersistConfig(64, 8, 1, 0, 8).check()
    assert not ok and "at least 1" in why
    ok, why = kb.FusedConfig(128, 16, 1, 1, 4, 1, 1).check()
    assert not ok and "64 values" in why
    ok, why = kb.FusedConfig(128, 2, 1, 1, 4, 3, 1).check()
    assert not ok and "STAGES 3" in why


def test_keep_covers_the_problem():
    c = kc.cols_config(1000, 70, 132)
    assert c.keep(1000, 70) and not c.keep(1000 * 100, 70) and not c.keep(1000, 70 * 10)
    v = kv.colsv_config(100352, 256, 132)
    assert v.keep(100352, 256) and not v.keep(100352, 254)            # VEC 4: C % 4
    p = kp.persist_config(100352, 256, 132, 512)
    assert p.keep(100352, 256, 132) and not p.keep(100352, 256, 64)   # more blocks than co-resident
    f = kb.fused_config(1024, 8192, 132, 4)
    assert f.keep(1024, 8192) and not f.keep(1 << 14, 8192) and not f.keep(1026, 8192)
