"""`ncudnn demo`: the mnistCUDNN-style network through the legacy API.

With the conv, pooling and reduction engines registered it must PASS (every layer and the classes
match the oracle); until then it must stop with exit status 2 and the NOT_SUPPORTED message naming
the missing engine — never a traceback.
"""
import numpy as np
import pytest

import ncudnn
from ncudnn import cli, demo
from ncudnn.engines import registry

NEEDED = ("conv_fprop", "resample_fwd", "reduction")


def _missing():
    kinds = {k for e in registry.engines() for k in getattr(e, "kinds", ())}
    return [k for k in NEEDED if k not in kinds]


def test_demo_runs_or_names_the_missing_engine(capsys):
    code = cli.main(["demo"])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert out.startswith(f"ncudnn {ncudnn.__version__} demo: mnistCUDNN-style LeNet")
    assert ("CUDA simulator" in out) == ncudnn.SIMULATOR
    missing = _missing()
    if missing:
        assert code == 2, out
        assert "FAIL: " in out and any(f"no engine runs the {k} subgraph" in out for k in missing), out
        assert "not registered yet" in out
    else:
        assert code == 0, out
        assert out.rstrip().endswith("PASS")
        assert "classes match" in out and "MISMATCH" not in out
        for layer in ("conv1", "pool1", "conv2", "pool2", "fc1", "relu", "fc2", "softmax"):
            assert layer in out
        assert out.count("image ") == demo.BATCH


def test_inputs_and_weights_are_deterministic():
    size = demo.SIZES["sim"]
    a, b = demo.weights(size), demo.weights(size)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    imgs = demo.digits(size[0])
    assert imgs.shape == (demo.BATCH, 1, size[0], size[0]) and np.array_equal(imgs, demo.digits(size[0]))
    assert len({im.tobytes() for im in imgs}) == demo.BATCH
    side, (k1, r1), (k2, r2), f1 = size
    p2 = ((side - r1 + 1) // 2 - r2 + 1) // 2
    assert a["fc1"].shape == (f1, k2, p2, p2) and a["fc2"].shape == (demo.CLASSES, f1, 1, 1)


def test_reference_network_gives_probabilities():
    size = demo.SIZES["sim"]
    p = demo.reference_forward(demo.weights(size), demo.digits(size[0]))
    assert p.shape == (demo.BATCH, demo.CLASSES)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    assert (p > 0).all()


def test_relu_layer_runs_and_checks_against_the_oracle(rng):
    from numba import cuda

    st, h = ncudnn.cudnnCreate()
    try:
        net = demo.Net(h, demo.SIZES["sim"])
        shape = (demo.BATCH, 4, 1, 1)
        x = cuda.to_device(rng.standard_normal(shape).astype(np.float32))
        net.relu("relu", x, shape)
        assert net.checks[-1][0] == "relu" and net.checks[-1][1] <= 1e-6
        assert net.timings[-1][0] == "relu" and net.timings[-1][1] > 0
    finally:
        ncudnn.cudnnDestroy(h)


@pytest.fixture
def oracle_engines(monkeypatch):
    """Every legacy call whose engine is missing is evaluated by the oracle on the graph it lowered to
    (a test stand-in for the engines; convolutions get an 'implicit GEMM' config that runs this way)."""
    from ncudnn.engines.base import Config
    from ncudnn.engines.ranking import EngineConfig
    from ncudnn.errors import NotSupportedError
    from ncudnn.legacy import conv, conv_algo, lower
    from ncudnn.reference import run_graph

    class OracleEngine:
        name, kinds, global_index = "conv_implicit_gemm", ("conv_fprop", "conv_dgrad", "conv_wgrad"), 99

    oracle_ec = EngineConfig(OracleEngine(), Config("conv_implicit_gemm", ()), (), (), 0, 1e-6)
    real_execute, real_ranked = lower.execute, conv.ranked

    def ranked(low):
        return real_ranked(low) or [oracle_ec]

    def execute(h, low, bind, scalars=None, workspace=None, workspace_size=None, plan=None):
        if plan is not None and plan != "oracle":
            return real_execute(h, low, bind, scalars, workspace, workspace_size, plan)
        try:
            if plan is None:
                return real_execute(h, low, bind, scalars, workspace, workspace_size)
        except NotSupportedError:
            pass
        b = low.builder
        produced = {t.uid for n in low.graph.nodes for t in n.outputs.values()}
        vals = {t.uid: bind[name.split(":")[0]].copy_to_host().astype(np.float64).reshape(t.dims)
                for name, t in b.ext.items() if t.uid not in produced}
        for name, t in b.scalars.items():
            v = (scalars or {}).get(name, (scalars or {}).get(name.split(":")[0]))
            if v is not None:
                t.value = v
        env = run_graph(low.graph, vals)
        for name, t in b.ext.items():
            if t.uid in produced:
                arr = bind[name]
                arr.copy_to_device(env[t.uid].astype(arr.dtype).reshape(arr.shape))

    monkeypatch.setattr(conv, "ranked", ranked)
    monkeypatch.setattr(conv_algo, "ranked", ranked)
    monkeypatch.setattr(conv, "algo_plan", lambda low, direction, algo: "oracle")
    monkeypatch.setattr(lower, "execute", execute)


def test_demo_passes_when_every_layer_runs(oracle_engines, capsys):
    """The whole demo, the oracle standing in for engines not registered: the network, its layer checks
    and the PASS logic work."""
    code = demo.run()
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.rstrip().endswith("PASS") and "classes match" in out
    assert "conv1 (" in out and "softmax" in out and out.count("rel_err") == 12


def _toy_digits(rng, n=96):
    """Ten 8x8 prototype strokes with noise: an easy stand-in for the digits (no scikit-learn needed)."""
    protos = np.zeros((10, 8, 8), np.float32)
    for k in range(10):
        protos[k, k % 8, :] = 1.0 if k < 8 else 0.0
        protos[k, :, (k * 3) % 8] = 1.0
    labels = rng.integers(0, 10, n)
    images = protos[labels] + 0.1 * rng.standard_normal((n, 8, 8)).astype(np.float32)
    return images[:, None].astype(np.float32), labels


def test_training_runs_every_backward_call(oracle_engines, capsys, rng):
    """The training demo through the legacy API (conv / pooling / activation / softmax forward, the three
    convolution backwards, pooling and activation backward, OpTensor, AddTensor SGD): the loss goes down."""
    code = demo.train(small=True, data=_toy_digits(rng))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "epoch 1: loss" in out and "epoch 2: loss" in out and "test accuracy" in out
    assert out.rstrip().endswith("PASS")


def test_training_without_the_dataset_says_so(capsys):
    code = demo.train(data=(None, None))
    assert code == 2 and "scikit-learn" in capsys.readouterr().out
