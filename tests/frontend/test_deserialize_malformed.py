"""deserialize() of malformed blobs: bad UTF-8, bad JSON, missing / mistyped fields, deep nesting, an op
kind that names some other attribute of the graph, and a seeded fuzz of byte flips and truncations of a
valid blob. Every outcome is a graph that executes correctly (against the float64 oracle) or a
CudnnError with BAD_PARAM (SERIALIZATION_VERSION_MISMATCH for another version); never a bare Python
exception."""
import json

import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.errors import CUDNN_STATUS_CATEGORY, CudnnError
from ncudnn.testing import assert_close, poison_value, random
from ncudnn.types import cudnnStatus_t as S

SHAPE = [2, 3, 4]


def built_graph():
    g = cudnn.pygraph(name="g", io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=SHAPE, stride=[12, 4, 1])
    B = g.tensor(name="B", dim=[1, 3, 1], stride=[3, 1, 1])
    Y = g.relu(input=g.add(a=X, b=B, name="add"), name="act")
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    return g


@pytest.fixture(scope="module")
def blob():
    return built_graph().serialize(as_bytes=True)


def deserialized(data):
    g = cudnn.pygraph()
    g.deserialize(cudnn.cudnnCreate()[1], data)
    return g


def check_outcome(data, rng=None):
    """Success (then the graph must compute relu(X + B)) or a CudnnError of the BAD_PARAM category."""
    try:
        g = deserialized(data)
    except CudnnError as e:
        assert CUDNN_STATUS_CATEGORY(e.status) == S.CUDNN_STATUS_BAD_PARAM or \
            e.status == S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH, f"{e.status.name}: {e}"
        return False
    if rng is not None:
        X, B, Y = (g.find_tensor(n) for n in ("X", "B", "act::OUT_0"))
        if None in (X, B, Y) or Y.get_dim() != SHAPE:
            return True   # a flip renamed / reshaped a tensor consistently: a different valid graph
        x, b = random(rng, SHAPE), random(rng, [1, 3, 1])
        y = cuda.to_device(np.full(SHAPE, poison_value(np.float32), np.float32))
        g.execute({X: cuda.to_device(x), B: cuda.to_device(b), Y: y}, None)
        assert_close(y.copy_to_host(), np.maximum(x.astype(np.float64) + b, 0), "float32")
    return True


def test_valid_blob_round_trips(blob, rng):
    assert check_outcome(blob, rng)


@pytest.mark.parametrize("data", [
    b"\xff\xfe\x00garbage", b"", b"{", b"[]", b"42", b'"text"', b"null",
    b'{"schema": "ncudnn.frontend.pygraph", "version": 1}',
    b"[" * 100000 + b"]" * 100000,
])
def test_malformed_blob_is_bad_param(data):
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        deserialized(data)
    assert CUDNN_STATUS_CATEGORY(e.value.status) == S.CUDNN_STATUS_BAD_PARAM and "deserialize" in str(e.value)


def _edit(blob, fn):
    d = json.loads(blob)
    fn(d)
    return json.dumps(d).encode()


EDITS = [
    lambda d: d["ops"][0].update(kind="execute"),            # a graph method, not an op
    lambda d: d["ops"][0].update(kind="__class__"),
    lambda d: d["ops"][0].update(kind="deserialize"),
    lambda d: d["ops"][0].update(kind="no_such_op"),
    lambda d: d["ops"][0].update(kind=["relu"]),
    lambda d: d["ops"][0]["tensors"].update(a=12345),         # a uid no tensor has
    lambda d: d.update(tensors=5),
    lambda d: d.update(context=[1]),
    lambda d: d.update(context=[10 ** 30, None, None]),
    lambda d: d["tensors"][0].update(dims=[0, -1]),
    lambda d: d["tensors"][0].update(dims="abc"),
    lambda d: d["tensors"][0].update(strides=[1, 2]),
    lambda d: d.pop("ops"),
    lambda d: d.update(plan={"engine": "no_such_engine"}),
    lambda d: d.update(plan={"config": 1}),
    lambda d: d.update(plan=7),
]


@pytest.mark.parametrize("edit", EDITS, ids=[f"edit{i}" for i in range(len(EDITS))])
def test_edited_blob_is_bad_param(blob, edit):
    data = _edit(blob, edit)
    with pytest.raises(CudnnError) as e:
        deserialized(data)
    assert CUDNN_STATUS_CATEGORY(e.value.status) in (S.CUDNN_STATUS_BAD_PARAM, S.CUDNN_STATUS_NOT_SUPPORTED), \
        f"{e.value.status.name}: {e.value}"


@pytest.mark.parametrize("edit", [
    lambda d: d.pop("plan"),                           # serialize() always writes it (null when unbuilt)
    lambda d: d["plan"].pop("config"),                 # the record of a plan without its knobs
], ids=["no_plan_key", "plan_without_config"])
def test_a_mangled_plan_record_is_bad_param_not_an_unbuilt_or_bare_plan(blob, edit):
    """Found by the seeded fuzz: a flipped byte in the key "plan" or "config" used to deserialize into a
    graph with no plan (execute then failed) or into a config with no knobs (NOT_SUPPORTED)."""
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        deserialized(_edit(blob, edit))
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "malformed" in str(e.value)


def test_op_kind_must_be_an_op_method(blob):
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="not a pygraph op"):
        deserialized(_edit(blob, lambda d: d["ops"][0].update(kind="execute")))


def test_seeded_fuzz_of_flips_and_truncations(blob):
    """Byte flips and truncations of a valid blob (a fixed seed: the same 150 blobs every run)."""
    rng = np.random.default_rng(20261202)
    oks = 0
    for i in range(150):
        data = bytearray(blob)
        if i % 3 == 0:
            data = data[:int(rng.integers(0, len(data)))]
        else:
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        oks += check_outcome(bytes(data), rng)
    assert oks < 150
