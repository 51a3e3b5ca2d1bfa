"""reference.norm: forwards against the statistics module per slice, backwards by finite differences."""
import statistics as st

import numpy as np
import pytest

from ncudnn import reference as R


def num_grad(f, a, h=1e-6):
    """Central-difference gradient of scalar f at array a (float64)."""
    g = np.zeros_like(a)
    for i in np.ndindex(*a.shape):
        old = a[i]
        a[i] = old + h
        fp = f(a)
        a[i] = old - h
        fm = f(a)
        a[i] = old
        g[i] = (fp - fm) / (2 * h)
    return g


def close(got, want, tol=1e-7):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ------------------------------------------------------------- genstats / bn_finalize / batchnorm
def test_genstats_and_finalize(rng):
    x = rng.uniform(-2, 2, size=(3, 4, 2, 3))
    s, q = R.genstats(x)
    assert s.shape == q.shape == (1, 4, 1, 1)
    C = 4
    scale, bias = rng.uniform(0.5, 2, size=C), rng.uniform(-1, 1, size=C)
    rm, rv = rng.uniform(-1, 1, size=C), rng.uniform(0.5, 2, size=C)
    eps, mom, M = 1e-3, 0.3, 3 * 2 * 3
    out = R.bn_finalize(s, q, scale, bias, M, eps, mom, rm, rv)
    for c in range(C):
        vals = [float(v) for v in x[:, c].ravel()]
        assert s[0, c, 0, 0] == pytest.approx(sum(vals), rel=1e-12)
        assert q[0, c, 0, 0] == pytest.approx(sum(v * v for v in vals), rel=1e-12)
        mean, var, uvar = st.fmean(vals), st.pvariance(vals), st.variance(vals)
        inv = 1 / np.sqrt(var + eps)
        assert out["saved_mean"][0, c, 0, 0] == pytest.approx(mean, rel=1e-11, abs=1e-13)
        assert out["saved_inv_std"][0, c, 0, 0] == pytest.approx(inv, rel=1e-11)
        assert out["eq_scale"][0, c, 0, 0] == pytest.approx(scale[c] * inv, rel=1e-11)
        assert out["eq_bias"][0, c, 0, 0] == pytest.approx(bias[c] - mean * scale[c] * inv,
                                                            rel=1e-10, abs=1e-12)
        assert out["running_mean"][0, c, 0, 0] == pytest.approx((1 - mom) * rm[c] + mom * mean)
        assert out["running_var"][0, c, 0, 0] == pytest.approx((1 - mom) * rv[c] + mom * uvar)
    y, m, inv, nrm, nrv = R.batchnorm_forward_training(x, scale, bias, eps, mom, rm, rv)
    close(out["eq_scale"] * x + out["eq_bias"], y, 1e-11)
    close(nrm, out["running_mean"], 1e-12)
    close(nrv, out["running_var"], 1e-12)
    inf = R.bn_finalize(s, q, scale, bias, M, eps, mom, rm, rv, training=False)
    close(inf["eq_scale"] * x + inf["eq_bias"], R.batchnorm_inference(x, scale, bias, rm, rv, eps),
          1e-12)
    assert inf["saved_mean"] is None
    assert R.bn_finalize(s, q, scale, bias, M, eps, mom)["running_var"] is None


def test_batchnorm_forward_per_channel(rng):
    x = rng.uniform(-2, 2, size=(2, 3, 5))  # channel last here
    scale, bias, eps = rng.uniform(0.5, 2, size=5), rng.uniform(-1, 1, size=5), 1e-5
    y, m, inv, _, _ = R.batchnorm_forward_training(x, scale, bias, eps, channel_axis=-1)
    assert m.shape == (1, 1, 5)
    for c in range(5):
        vals = [float(v) for v in x[..., c].ravel()]
        mean, var = st.fmean(vals), st.pvariance(vals)
        close(y[..., c], scale[c] * (x[..., c] - mean) / np.sqrt(var + eps) + bias[c], 1e-11)
    yi = R.batchnorm_inference(x, scale, bias, [0.5] * 5, [4.0] * 5, 0.0, channel_axis=2)
    close(yi, scale * (x - 0.5) / 2 + bias, 1e-14)


@pytest.mark.parametrize("shape,ca", [((3, 2, 2, 2), 1), ((4, 3), 1), ((2, 2, 3), -1)])
def test_batchnorm_backward_finite_difference(shape, ca, rng):
    x = rng.uniform(-2, 2, size=shape)
    C = shape[ca]
    scale, bias = rng.uniform(0.5, 2, size=C), rng.uniform(-1, 1, size=C)
    w = rng.uniform(-1, 1, size=shape)
    eps = 1e-2
    _, m, inv, _, _ = R.batchnorm_forward_training(x, scale, bias, eps, channel_axis=ca)
    dx, ds, db = R.batchnorm_backward(x, w, scale, m, inv, channel_axis=ca)

    def loss(xx=x, ss=scale, bb=bias):
        return np.sum(w * R.batchnorm_forward_training(xx, ss, bb, eps, channel_axis=ca)[0])
    close(dx, num_grad(lambda a: loss(xx=a), x.copy()))
    close(ds.ravel(), num_grad(lambda a: loss(ss=a), scale.copy()))
    close(db.ravel(), num_grad(lambda a: loss(bb=a), bias.copy()))


# ------------------------------------------------------------- layer / RMS norm
def test_layernorm_forward_per_row(rng):
    x = rng.uniform(-2, 2, size=(3, 4, 2))
    scale, bias, eps = rng.uniform(0.5, 2, size=(1, 4, 2)), rng.uniform(-1, 1, size=(1, 4, 2)), 1e-5
    y, m, inv = R.layernorm_forward(x, scale, bias, eps, (1, 2))
    assert m.shape == inv.shape == (3, 1, 1)
    for n in range(3):
        vals = [float(v) for v in x[n].ravel()]
        mean, var = st.fmean(vals), st.pvariance(vals)
        close(y[n], scale[0] * (x[n] - mean) / np.sqrt(var + eps) + bias[0], 1e-11)


@pytest.mark.parametrize("sshape", [(1, 4, 2), (4, 2), (3, 1, 1)])  # last: adaptive (per sample)
def test_layernorm_backward_finite_difference(sshape, rng):
    x = rng.uniform(-2, 2, size=(3, 4, 2))
    scale, bias = rng.uniform(0.5, 2, size=sshape), rng.uniform(-1, 1, size=sshape)
    w = rng.uniform(-1, 1, size=x.shape)
    eps, axes = 1e-2, (-2, -1)
    _, m, inv = R.layernorm_forward(x, scale, bias, eps, axes)
    dx, ds, db = R.layernorm_backward(x, w, scale, m, inv, axes)
    assert ds.shape == db.shape == sshape

    def loss(xx=x, ss=scale, bb=bias):
        return np.sum(w * R.layernorm_forward(xx, ss, bb, eps, axes)[0])
    close(dx, num_grad(lambda a: loss(xx=a), x.copy()))
    close(ds, num_grad(lambda a: loss(ss=a), scale.copy()))
    close(db, num_grad(lambda a: loss(bb=a), bias.copy()))


@pytest.mark.parametrize("with_bias", [False, True])
def test_rmsnorm(with_bias, rng):
    x = rng.uniform(-2, 2, size=(3, 5))
    scale = rng.uniform(0.5, 2, size=(1, 5))
    bias = rng.uniform(-1, 1, size=(1, 5)) if with_bias else None
    eps = 1e-2
    y, inv = R.rmsnorm_forward(x, scale, eps, -1, bias=bias)
    for n in range(3):
        rms = np.sqrt(st.fmean(float(v) ** 2 for v in x[n]) + eps)
        close(y[n], scale[0] * x[n] / rms + (0 if bias is None else bias[0]), 1e-12)
    w = rng.uniform(-1, 1, size=x.shape)
    dx, ds, db = R.rmsnorm_backward(x, w, scale, inv, -1, has_bias=with_bias)

    def loss(xx=x, ss=scale, bb=bias):
        return np.sum(w * R.rmsnorm_forward(xx, ss, eps, -1, bias=bb)[0])
    close(dx, num_grad(lambda a: loss(xx=a), x.copy()))
    close(ds, num_grad(lambda a: loss(ss=a), scale.copy()))
    if with_bias:
        close(db, num_grad(lambda a: loss(bb=a), bias.copy()))
    else:
        assert db is None


# ------------------------------------------------------------- instance / group norm
def test_instancenorm(rng):
    x = rng.uniform(-2, 2, size=(2, 3, 2, 3))
    scale, bias, eps = rng.uniform(0.5, 2, size=3), rng.uniform(-1, 1, size=3), 1e-2
    y, m, inv = R.instancenorm_forward(x, scale, bias, eps)
    assert m.shape == (2, 3, 1, 1)
    for n, c in np.ndindex(2, 3):
        vals = [float(v) for v in x[n, c].ravel()]
        close(y[n, c], scale[c] * (x[n, c] - st.fmean(vals)) / np.sqrt(st.pvariance(vals) + eps)
              + bias[c], 1e-11)
    w = rng.uniform(-1, 1, size=x.shape)
    dx, ds, db = R.instancenorm_backward(x, w, scale, m, inv)

    def loss(xx=x, ss=scale, bb=bias):
        return np.sum(w * R.instancenorm_forward(xx, ss, bb, eps)[0])
    close(dx, num_grad(lambda a: loss(xx=a), x.copy()))
    close(ds.ravel(), num_grad(lambda a: loss(ss=a), scale.copy()))
    close(db.ravel(), num_grad(lambda a: loss(bb=a), bias.copy()))


def test_groupnorm(rng):
    x = rng.uniform(-2, 2, size=(2, 4, 3))
    scale, bias, eps, G = rng.uniform(0.5, 2, size=4), rng.uniform(-1, 1, size=4), 1e-2, 2
    y, m, inv = R.groupnorm_forward(x, scale, bias, eps, G)
    assert m.shape == (2, 2, 1)
    for n, g in np.ndindex(2, G):
        blk = x[n, 2 * g:2 * g + 2]
        vals = [float(v) for v in blk.ravel()]
        want = (blk - st.fmean(vals)) / np.sqrt(st.pvariance(vals) + eps)
        close(y[n, 2 * g:2 * g + 2], scale[2 * g:2 * g + 2, None] * want
              + bias[2 * g:2 * g + 2, None], 1e-11)
    w = rng.uniform(-1, 1, size=x.shape)
    dx, ds, db = R.groupnorm_backward(x, w, scale, m, inv, G)

    def loss(xx=x, ss=scale, bb=bias):
        return np.sum(w * R.groupnorm_forward(xx, ss, bb, eps, G)[0])
    close(dx, num_grad(lambda a: loss(xx=a), x.copy()))
    close(ds.ravel(), num_grad(lambda a: loss(ss=a), scale.copy()))
    close(db.ravel(), num_grad(lambda a: loss(bb=a), bias.copy()))


def test_bn_bwd_weights_reproduce_batchnorm_backward(rng):
    x = rng.uniform(-2, 2, size=(3, 4, 2, 2))
    dy = rng.uniform(-1, 1, size=x.shape)
    scale, bias = rng.uniform(0.5, 2, size=4), rng.uniform(-1, 1, size=4)
    _, m, inv, _, _ = R.batchnorm_forward_training(x, scale, bias, 1e-3)
    dx, ds, db = R.batchnorm_backward(x, dy, scale, m, inv)
    axes = (0, 2, 3)
    out = R.bn_bwd_weights(x, m, inv, scale, dy.sum(axis=axes), (dy * x).sum(axis=axes))
    close(out["dscale"], ds, 1e-12)
    close(out["dbias"], db, 1e-12)
    close(out["eq_dy_scale"] * dy + out["eq_x_scale"] * x + out["eq_bias"], dx, 1e-12)


def test_batchnorm_inference_with_inv_variance(rng):
    x = rng.uniform(-2, 2, size=(2, 3, 4))
    scale, bias, mean = rng.uniform(size=3), rng.uniform(size=3), rng.uniform(size=3)
    var, eps = rng.uniform(0.5, 2, size=3), 1e-3
    a = R.batchnorm_inference(x, scale, bias, mean, var, eps)
    b = R.batchnorm_inference(x, scale, bias, mean, None, eps, inv_variance=1 / np.sqrt(var + eps))
    close(a, b, 1e-14)
    c = R.batchnorm_inference(x, scale, bias, mean, var, eps)
    for ch in range(3):
        close(c[:, ch], scale[ch] * (x[:, ch] - mean[ch]) / np.sqrt(var[ch] + eps) + bias[ch], 1e-14)


def test_batchnorm_per_activation(rng):
    x = rng.uniform(-2, 2, size=(5, 2, 3))
    scale, bias = rng.uniform(0.5, 2, size=(2, 3)), rng.uniform(-1, 1, size=(2, 3))
    rm, rv = np.zeros((2, 3)), np.ones((2, 3))
    y, m, inv, nrm, nrv = R.batchnorm_forward_training(x, scale, bias, 1e-2, 0.5, rm, rv,
                                                       per_activation=True)
    assert m.shape == (1, 2, 3)
    for c, h in np.ndindex(2, 3):
        vals = [float(v) for v in x[:, c, h]]
        mean, var = st.fmean(vals), st.pvariance(vals)
        close(y[:, c, h], scale[c, h] * (x[:, c, h] - mean) / np.sqrt(var + 1e-2) + bias[c, h], 1e-11)
        assert nrv[0, c, h] == pytest.approx(0.5 + 0.5 * st.variance(vals))
    close(R.batchnorm_inference(x, scale, bias, m, None, 1e-2, inv_variance=inv,
                                per_activation=True), y, 1e-12)
    w = rng.uniform(-1, 1, size=x.shape)
    dx, ds, db = R.batchnorm_backward(x, w, scale, m, inv, per_activation=True)
    f = lambda a: np.sum(w * R.batchnorm_forward_training(a, scale, bias, 1e-2,  # noqa: E731
                                                          per_activation=True)[0])
    close(dx, num_grad(f, x.copy()))
    close(ds[0], num_grad(lambda a: np.sum(w * R.batchnorm_forward_training(
        x, a, bias, 1e-2, per_activation=True)[0]), scale.copy()))
    close(db[0], w.sum(axis=0), 1e-12)
