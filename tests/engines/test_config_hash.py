"""engines.base.Config: frozen, hashed once, equal configs hash and compare equal however they were
made (with_knob in any order, from_json, the constructor), copies and pickles rebuild the hash."""
import copy
import dataclasses
import pickle

import pytest

from ncudnn.engines.base import Config
from ncudnn.types import cudnnBackendKnobType_t as K


def _normalized(c, k, v):
    d = dict(c.knobs)
    d[int(k)] = int(v)
    return tuple(sorted(d.items()))


def test_frozen():
    c = Config("e", ((1, 2),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.knobs = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.engine = "f"


def test_hash_and_equality_do_not_depend_on_how_it_was_made(rng):
    for _ in range(300):
        kinds = [int(k) for k in rng.choice([1, 2, 3, 10, 12, 14], size=int(rng.integers(1, 5)), replace=False)]
        vals = [int(v) for v in rng.integers(0, 9, size=len(kinds))]
        a = Config("eng")
        for k, v in zip(kinds, vals):
            a = a.with_knob(K(k), v)
        b = Config("eng")
        for i in rng.permutation(len(kinds)):
            b = b.with_knob(kinds[i], vals[i])
        c = Config("eng", tuple(sorted(zip(kinds, vals))))
        d = Config.from_json(a.to_json())
        assert a == b == c == d and a.knobs == tuple(sorted(zip(kinds, vals)))
        assert hash(a) == hash(b) == hash(c) == hash(d) == hash(("eng", a.knobs))
        assert hash(a) == hash(a)       # the cached value
        assert len({a, b, c, d}) == 1
        assert a != Config("other", a.knobs) and a != a.with_knob(kinds[0], vals[0] + 1)


def test_with_knob_replaces_adds_and_normalizes(rng):
    for _ in range(300):
        ks = tuple((int(k), int(v)) for k, v in zip(rng.integers(0, 12, 4), rng.integers(0, 9, 4)))
        c = Config("e", ks if rng.integers(2) else tuple(sorted(dict(ks).items())))
        k, v = int(rng.integers(0, 13)), int(rng.integers(0, 9))
        out = c.with_knob(k, v)
        assert out.knobs == _normalized(c, k, v) and out.get(k) == v
        assert c.knobs == ks or c.knobs == tuple(sorted(dict(ks).items()))   # the original is unchanged


def test_copies_and_pickles_rebuild_the_hash():
    c = Config("conv_winograd_nonfused", ((1, 8), (2, 3), (10, 4)))
    h = hash(c)
    for d in (pickle.loads(pickle.dumps(c)), copy.copy(c), copy.deepcopy(c)):
        assert d == c and hash(d) == h
    blob = pickle.dumps(c)
    assert b"_hash" not in blob    # a per-process value never travels
    assert dataclasses.replace(c, engine="x") == Config("x", c.knobs)
    assert [f.name for f in dataclasses.fields(Config)] == ["engine", "knobs"]
