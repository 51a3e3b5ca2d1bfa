"""`ncudnn demo`: the mnistCUDNN-style network through the legacy API.

With the conv, pooling and reduction engines registered it must PASS (every layer and the classes
match the oracle); until then it must stop with exit status 2 and the NOT_SUPPORTED message naming
the missing engine — never a traceback.
"""
import numpy as np

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
        assert "FAIL: conv1" in out and "no engine runs the conv_fprop subgraph" in out
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
