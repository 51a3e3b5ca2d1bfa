"""reference.norm_graph: the IR-port dispatch against direct formulas and finite differences."""
import numpy as np
import pytest

from ncudnn import reference as R


def test_layer_and_rms_rows(rng):
    x = rng.uniform(-2, 2, size=(3, 2, 4))
    scale, bias = rng.uniform(0.5, 2, size=(1, 2, 4)), rng.uniform(-1, 1, size=(1, 2, 4))
    out = R.norm_forward("LAYER_NORM", x, 1e-5, scale, bias)
    assert out["MEAN"].shape == (3, 1, 1)
    for n in range(3):
        m, v = x[n].mean(), x[n].var()
        np.testing.assert_allclose(out["Y"][n], scale[0] * (x[n] - m) / np.sqrt(v + 1e-5) + bias[0],
                                   rtol=1e-12)
    rms = R.norm_forward("CUDNN_RMS_NORM", x, 1e-5, scale)
    assert "MEAN" not in rms
    np.testing.assert_allclose(rms["INV_VARIANCE"][:, 0, 0],
                               1 / np.sqrt((x ** 2).mean(axis=(1, 2)) + 1e-5), rtol=1e-13)
    inf = R.norm_forward("LAYER_NORM", x, 1e-5, scale, bias, phase="INFERENCE")
    assert set(inf) == {"Y"}
    no_bias = R.norm_forward("LAYER_NORM", x, 1e-5, scale)     # no BIAS port: zero, not NaN
    np.testing.assert_allclose(no_bias["Y"], out["Y"] - bias, rtol=1e-12, atol=1e-12)


def test_batch_norm_phases_and_backward(rng):
    x = rng.uniform(-2, 2, size=(4, 3, 2))
    scale, bias = rng.uniform(0.5, 2, size=(1, 3, 1)), rng.uniform(-1, 1, size=(1, 3, 1))
    rm, rv = np.zeros((1, 3, 1)), np.ones((1, 3, 1))
    out = R.norm_forward("BATCH_NORM", x, 1e-3, scale, bias, running_mean=rm, running_var=rv,
                         momentum=0.25)
    m = x.mean(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(out["OUTPUT_RUNNING_MEAN"], 0.25 * m, rtol=1e-13)
    np.testing.assert_allclose(out["OUTPUT_RUNNING_VAR"],
                               0.75 + 0.25 * x.var(axis=(0, 2), ddof=1, keepdims=True), rtol=1e-13)
    y = R.norm_forward("BATCH_NORM", x, 1e-3, scale, bias, "CUDNN_NORM_FWD_INFERENCE",
                       mean=out["MEAN"], inv_variance=out["INV_VARIANCE"])["Y"]
    np.testing.assert_allclose(y, out["Y"], rtol=1e-12, atol=1e-13)
    dy = rng.uniform(-1, 1, size=x.shape)
    g = R.norm_backward("BATCH_NORM", x, dy, scale, out["MEAN"], out["INV_VARIANCE"])
    h = 1e-6
    i = (1, 2, 1)
    xp, xm = x.copy(), x.copy()
    xp[i] += h
    xm[i] -= h
    fd = (np.vdot(R.norm_forward("BATCH_NORM", xp, 1e-3, scale, bias)["Y"], dy)
          - np.vdot(R.norm_forward("BATCH_NORM", xm, 1e-3, scale, bias)["Y"], dy)) / (2 * h)
    assert g["DX"][i] == pytest.approx(fd, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("mode", ["LAYER_NORM", "INSTANCE_NORM", "RMS_NORM"])
def test_backward_finite_difference(mode, rng):
    x = rng.uniform(-2, 2, size=(2, 3, 2))
    sshape = (1, 3, 1) if mode == "INSTANCE_NORM" else (1, 3, 2)
    scale, bias = rng.uniform(0.5, 2, size=sshape), rng.uniform(-1, 1, size=sshape)
    dy = rng.uniform(-1, 1, size=x.shape)
    out = R.norm_forward(mode, x, 1e-2, scale, bias)
    g = R.norm_backward(mode, x, dy, scale, out.get("MEAN"), out["INV_VARIANCE"])
    h = 1e-6
    for i in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        fd = (np.vdot(R.norm_forward(mode, xp, 1e-2, scale, bias)["Y"], dy)
              - np.vdot(R.norm_forward(mode, xm, 1e-2, scale, bias)["Y"], dy)) / (2 * h)
        assert g["DX"][i] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(g["DBIAS"], dy.sum(axis=0, keepdims=True).sum(
        axis=2, keepdims=True) if mode == "INSTANCE_NORM" else dy.sum(axis=0, keepdims=True),
        rtol=1e-13)
    with pytest.raises(ValueError):
        R.norm_forward("GROUP_NORM", x, 1e-2, scale, bias)
