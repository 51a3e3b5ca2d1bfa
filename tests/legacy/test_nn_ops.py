"""Pooling, softmax, batch normalization, ReduceTensor and dropout against the oracle (on the engines
when registered; otherwise the lowered graph in the oracle, then skip naming the missing engine)."""
import numpy as np
import pytest

import ncudnn
import ncudnn.legacy as L
from ncudnn import reference as R
from ncudnn.legacy import pooling
from ncudnn.testing import assert_close, size

from .conftest import check_or_skip, dev, engines_for, last_lowered, poisoned, tdesc

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
PM = ncudnn.cudnnPoolingMode_t
SHAPE = size((2, 3, 5, 4), (16, 64, 28, 28))
_POOL_REF = {PM.CUDNN_POOLING_MAX: ("MAXPOOL", ncudnn.CUDNN_NEG_INF_PAD),
             PM.CUDNN_POOLING_MAX_DETERMINISTIC: ("MAXPOOL", ncudnn.CUDNN_NEG_INF_PAD),
             PM.CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING: ("AVGPOOL_INCLUDE_PADDING", ncudnn.CUDNN_ZERO_PAD),
             PM.CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING: ("AVGPOOL_EXCLUDE_PADDING", ncudnn.CUDNN_ZERO_PAD)}


def pool_desc(mode, win=(3, 2), pad=(1, 0), stride=(2, 2)):
    _, p = L.cudnnCreatePoolingDescriptor()
    assert L.cudnnSetPooling2dDescriptor(p, mode, 0, *win, *pad, *stride) == (OK,)
    return p


@pytest.mark.parametrize("mode", list(PM), ids=lambda m: m.name)
def test_pooling_forward_backward(handle, rng, mode):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    p = pool_desc(mode)
    ys = L.cudnnGetPooling2dForwardOutputDim(p, tdesc(SHAPE))[1:]
    name, pad_mode = _POOL_REF[mode]
    kw = dict(window=(3, 2), stride=(2, 2), pre_pad=(1, 0), post_pad=(1, 0), padding_mode=pad_mode)
    out = R.resample_forward(x, name, **kw)
    ref = out[0] if isinstance(out, tuple) else out
    y = poisoned(ys)
    ret = L.cudnnPoolingForward(handle, p, 1.0, tdesc(SHAPE), dev(x), 0.0, tdesc(ys), y)
    try:
        check_or_skip(handle, ret, ["resample_fwd"], {"y": y}, {"y": ref}, {"x": x})
    except pytest.skip.Exception:
        pass  # the backward still gets its oracle check below
    dy = rng.standard_normal(ys).astype(np.float32)
    prior = rng.standard_normal(SHAPE).astype(np.float32)
    dx = dev(prior)
    yv = ref.astype(np.float32)
    ret = L.cudnnPoolingBackward(handle, p, 2.0, tdesc(ys), dev(yv), tdesc(ys), dev(dy), tdesc(SHAPE), dev(x), 1.0,
                                 tdesc(SHAPE), dx)
    dref = 2.0 * R.resample_backward(dy, name, x_shape=SHAPE, x=x, **kw) + prior
    check_or_skip(handle, ret, ["resample_bwd"], {"dx": dx}, {"dx": dref}, {"x": x, "y": yv, "dy": dy, "dx": prior},
                  {"alpha": 2.0})


def test_pooling_wrong_output_dims(handle):
    p = pool_desc(PM.CUDNN_POOLING_MAX)
    ret = L.cudnnPoolingForward(handle, p, 1.0, tdesc(SHAPE), dev(np.ones(SHAPE, np.float32)), 0.0,
                                tdesc((1, 1, 1, 1)), dev(np.ones((1, 1, 1, 1), np.float32)))
    assert ret == (S.CUDNN_STATUS_BAD_PARAM,) and "gives" in ncudnn.cudnnGetLastErrorString()


@pytest.mark.parametrize("algo", list(ncudnn.cudnnSoftmaxAlgorithm_t), ids=lambda a: a.name)
@pytest.mark.parametrize("mode", list(ncudnn.cudnnSoftmaxMode_t), ids=lambda m: m.name)
def test_softmax_forward_backward(handle, rng, algo, mode):
    x = rng.uniform(-3, 3, SHAPE).astype(np.float32)
    axis = (1, 2, 3) if mode == ncudnn.CUDNN_SOFTMAX_MODE_INSTANCE else 1
    log = algo == ncudnn.CUDNN_SOFTMAX_LOG
    ref = R.log_softmax(x, axis) if log else R.softmax(x, axis)
    y = poisoned(SHAPE)
    ret = L.cudnnSoftmaxForward(handle, algo, mode, 1.0, tdesc(SHAPE), dev(x), 0.0, tdesc(SHAPE), y)
    try:
        check_or_skip(handle, ret, ["reduction"], {"y": y}, {"y": ref}, {"x": x}, tol=1e-5)
    except pytest.skip.Exception:
        pass
    yv, dy = ref.astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)
    prior = rng.standard_normal(SHAPE).astype(np.float32)
    dx = dev(prior)
    ret = L.cudnnSoftmaxBackward(handle, algo, mode, 0.5, tdesc(SHAPE), dev(yv), tdesc(SHAPE), dev(dy), 2.0,
                                 tdesc(SHAPE), dx)
    dref = 0.5 * R.softmax_backward(yv, dy, axis, log=log) + 2.0 * prior
    check_or_skip(handle, ret, ["reduction"], {"dx": dx}, {"dx": dref}, {"y": yv, "dy": dy, "dx": prior},
                  {"alpha": 0.5}, tol=1e-5)


def bn_params(rng, mode, shape=SHAPE):
    pshape = (1,) + tuple(shape[1:]) if mode == ncudnn.CUDNN_BATCHNORM_PER_ACTIVATION else (1, shape[1], 1, 1)
    _, pd = L.cudnnCreateTensorDescriptor()
    assert L.cudnnDeriveBNTensorDescriptor(pd, tdesc(shape), mode) == (OK,)
    assert L.cudnnGetTensorNdDescriptor(pd, 4)[3] == list(pshape)
    return pd, pshape


BN_MODES = [ncudnn.CUDNN_BATCHNORM_SPATIAL, ncudnn.CUDNN_BATCHNORM_PER_ACTIVATION]


@pytest.mark.parametrize("mode", BN_MODES, ids=lambda m: m.name)
def test_batchnorm_inference(handle, rng, mode):
    pd, ps = bn_params(rng, mode)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    sc, bi, mu = (rng.standard_normal(ps).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2.0, ps).astype(np.float32)
    prior = rng.standard_normal(SHAPE).astype(np.float32)
    y = dev(prior)
    ret = L.cudnnBatchNormalizationForwardInference(handle, mode, 1.5, 0.5, tdesc(SHAPE), dev(x), tdesc(SHAPE), y, pd,
                                                    dev(sc), dev(bi), dev(mu), dev(var), 1e-3)
    per = mode == ncudnn.CUDNN_BATCHNORM_PER_ACTIVATION
    ref = 1.5 * R.batchnorm_inference(x, sc, bi, mu, var, 1e-3, per_activation=per) + 0.5 * prior
    check_or_skip(handle, ret, ["pointwise"], {"y": y}, {"y": ref},
                  {"x": x, "y": prior, "scale": sc, "bias": bi, "mean": mu, "var": var}, {"alpha": 1.5}, tol=1e-5)


@pytest.mark.parametrize("mode", BN_MODES, ids=lambda m: m.name)
def test_batchnorm_training(handle, rng, mode):
    pd, ps = bn_params(rng, mode)
    per = mode == ncudnn.CUDNN_BATCHNORM_PER_ACTIVATION
    x = rng.standard_normal(SHAPE).astype(np.float32)
    sc, bi = rng.standard_normal(ps).astype(np.float32), rng.standard_normal(ps).astype(np.float32)
    rm, rv = rng.standard_normal(ps).astype(np.float32), rng.uniform(0.5, 2, ps).astype(np.float32)
    y, sm, si = poisoned(SHAPE), poisoned(ps), poisoned(ps)
    drm, drv = dev(rm), dev(rv)
    ret = L.cudnnBatchNormalizationForwardTraining(handle, mode, 1.0, 0.0, tdesc(SHAPE), dev(x), tdesc(SHAPE), y, pd,
                                                   dev(sc), dev(bi), 0.25, drm, drv, 1e-4, sm, si)
    ry, rmean, rinv, nrm, nrv = R.batchnorm_forward_training(x, sc, bi, 1e-4, 0.25, rm, rv, per_activation=per)
    check_or_skip(handle, ret, ["norm_fwd"], {"y": y, "save_mean": sm, "save_inv_var": si, "running_mean": drm,
                                              "running_var": drv},
                  {"y": ry, "save_mean": rmean, "save_inv_var": rinv, "running_mean": nrm, "running_var": nrv},
                  {"x": x, "scale": sc, "bias": bi, "running_mean": rm, "running_var": rv},
                  {"factor": 0.25, "epsilon": 1e-4}, tol=1e-5, dev_tol=1e-4)  # float32 statistics of few samples


@pytest.mark.parametrize("alpha,beta", [(0.5, 0.0), (-1.0, 0.5), (2.0, 1.0)])
def test_batchnorm_training_blends_with_alpha_and_beta(handle, rng, alpha, beta):
    """y = alpha * BN(x) + beta * y_prior: the blend's alpha reached the kernel as a host float
    (INTERNAL_ERROR) before; the statistics are those of x whatever the blend."""
    mode = ncudnn.CUDNN_BATCHNORM_SPATIAL
    pd, ps = bn_params(rng, mode)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    sc, bi = rng.standard_normal(ps).astype(np.float32), rng.standard_normal(ps).astype(np.float32)
    prior = rng.standard_normal(SHAPE).astype(np.float32)
    y, sm, si = dev(prior), poisoned(ps), poisoned(ps)
    ret = L.cudnnBatchNormalizationForwardTraining(handle, mode, alpha, beta, tdesc(SHAPE), dev(x), tdesc(SHAPE), y,
                                                   pd, dev(sc), dev(bi), 0.25, None, None, 1e-4, sm, si)
    ry, rmean, rinv, _, _ = R.batchnorm_forward_training(x, sc, bi, 1e-4)
    check_or_skip(handle, ret, ["norm_fwd"], {"y": y, "save_mean": sm, "save_inv_var": si},
                  {"y": alpha * ry + beta * prior, "save_mean": rmean, "save_inv_var": rinv},
                  {"x": x, "y": prior, "scale": sc, "bias": bi}, {"alpha": alpha, "epsilon": 1e-4}, tol=1e-5)


@pytest.mark.parametrize("saved", [True, False], ids=["saved_stats", "recomputed_stats"])
def test_batchnorm_backward(handle, rng, saved):
    mode = ncudnn.CUDNN_BATCHNORM_SPATIAL
    pd, ps = bn_params(rng, mode)
    x, dy = rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)
    sc = rng.standard_normal(ps).astype(np.float32)
    _, mean, inv, _, _ = R.batchnorm_forward_training(x, sc, sc, 1e-5)
    mean, inv = mean.astype(np.float32), inv.astype(np.float32)
    dxp, dsp, dbp = (rng.standard_normal(s).astype(np.float32) for s in (SHAPE, ps, ps))
    dx, ds, db = dev(dxp), dev(dsp), dev(dbp)
    ret = L.cudnnBatchNormalizationBackward(handle, mode, 1.0, 0.5, 2.0, 1.0, tdesc(SHAPE), dev(x), tdesc(SHAPE),
                                            dev(dy), tdesc(SHAPE), dx, pd, dev(sc), ds, db, 1e-5,
                                            dev(mean) if saved else None, dev(inv) if saved else None)
    rdx, rds, rdb = R.batchnorm_backward(x, dy, sc, mean, inv)
    refs = {"dx": rdx + 0.5 * dxp, "dscale": 2.0 * rds + dsp, "dbias": 2.0 * rdb + dbp}
    host = {"x": x, "dy": dy, "scale": sc, "save_mean": mean, "save_inv_var": inv, "dx": dxp, "dscale": dsp,
            "dbias": dbp}
    check_or_skip(handle, ret, ["norm_bwd"] + ([] if saved else ["norm_fwd"]), {"dx": dx, "dscale": ds, "dbias": db},
                  refs, host, {"alpha:dx": 1.0, "alpha:dscale": 2.0, "alpha:dbias": 2.0, "epsilon": 1e-5}, tol=1e-4)


def test_batchnorm_bad_params(handle, rng):
    pd, ps = bn_params(rng, ncudnn.CUDNN_BATCHNORM_SPATIAL)
    bufs = [dev(np.ones(s, np.float32)) for s in (SHAPE, SHAPE, ps, ps, ps, ps)]
    args = lambda eps, pdesc=pd: (handle, 1, 1.0, 0.0, tdesc(SHAPE), bufs[0], tdesc(SHAPE), bufs[1], pdesc, *bufs[2:],
                                  eps)
    assert L.cudnnBatchNormalizationForwardInference(*args(-1.0)) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert L.cudnnBatchNormalizationForwardInference(*args(1e-5, tdesc((1, 1, 1, 1)))) == (S.CUDNN_STATUS_BAD_PARAM,)
    assert L.cudnnBatchNormalizationForwardInference(handle, 3, 1.0, 0.0, tdesc(SHAPE), bufs[0], tdesc(SHAPE), bufs[1],
                                                     pd, *bufs[2:], 1e-5) == (S.CUDNN_STATUS_BAD_PARAM,)


@pytest.mark.parametrize("op, out_shape", [
    (ncudnn.CUDNN_REDUCE_TENSOR_ADD, (1, SHAPE[1], 1, 1)),
    (ncudnn.CUDNN_REDUCE_TENSOR_AVG, (SHAPE[0], 1, 1, 1)),
    (ncudnn.CUDNN_REDUCE_TENSOR_NORM2, (1, 1, SHAPE[2], SHAPE[3])),
    (ncudnn.CUDNN_REDUCE_TENSOR_MAX, (SHAPE[0], 1, SHAPE[2], 1)),
    (ncudnn.CUDNN_REDUCE_TENSOR_AMAX, (1, 1, 1, 1)),
    (ncudnn.CUDNN_REDUCE_TENSOR_MIN, (SHAPE[0], SHAPE[1], 1, 1)),
], ids=["add", "avg", "norm2", "max_idx", "amax_idx", "min_idx"])
def test_reduce_tensor(handle, rng, op, out_shape):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    _, rd = L.cudnnCreateReduceTensorDescriptor()
    with_idx = op in (ncudnn.CUDNN_REDUCE_TENSOR_MAX, ncudnn.CUDNN_REDUCE_TENSOR_AMAX, ncudnn.CUDNN_REDUCE_TENSOR_MIN)
    assert L.cudnnSetReduceTensorDescriptor(rd, op, 0, 0, int(with_idx), 0) == (OK,)
    st, isize = L.cudnnGetReductionIndicesSize(handle, rd, tdesc(SHAPE), tdesc(out_shape))
    assert st == OK and isize == (4 * int(np.prod(out_shape)) if with_idx else 0)
    assert L.cudnnGetReductionWorkspaceSize(handle, rd, tdesc(SHAPE), tdesc(out_shape)) == (OK, 0)
    prior = rng.standard_normal(out_shape).astype(np.float32)
    c = dev(prior)
    idx = poisoned(out_shape, np.int32) if with_idx else None
    ret = L.cudnnReduceTensor(handle, rd, idx, isize, None, 0, 0.5, tdesc(SHAPE), dev(x), -1.0, tdesc(out_shape), c)
    refs = {"c": 0.5 * R.reduction(op, x, out_shape) - prior}
    outs = {"c": c}
    if with_idx:
        refs["indices"], outs["indices"] = R.reduction_indices(op, x, out_shape).astype(np.float64), idx
    check_or_skip(handle, ret, ["reduction"], outs, refs, {"a": x, "c": prior}, {"alpha": 0.5}, tol=1e-5)


def test_reduce_tensor_bad_params(handle):
    _, rd = L.cudnnCreateReduceTensorDescriptor()
    L.cudnnSetReduceTensorDescriptor(rd, ncudnn.CUDNN_REDUCE_TENSOR_MAX, 0, 0, 1, 0)
    x, c = dev(np.ones(SHAPE, np.float32)), dev(np.ones((1, 1, 1, 1), np.float32))
    assert L.cudnnReduceTensor(handle, rd, dev(np.zeros(1, np.int32)), 0, None, 0, 1.0, tdesc(SHAPE), x, 0.0,
                               tdesc((1, 1, 1, 1)), c) == (S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,)
    assert L.cudnnReduceTensor(handle, rd, None, 4, None, 0, 1.0, tdesc(SHAPE), x, 0.0, tdesc((1, 1, 1, 1)), c)[0] == \
        S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER
    wrong = tdesc((1, SHAPE[1] + 1, 1, 1))
    assert L.cudnnGetReductionIndicesSize(handle, rd, tdesc(SHAPE), wrong)[0] == S.CUDNN_STATUS_BAD_PARAM
    L.cudnnSetReduceTensorDescriptor(rd, ncudnn.CUDNN_REDUCE_TENSOR_MAX, 0, 0, 1, ncudnn.CUDNN_64BIT_INDICES)
    assert L.cudnnGetReductionIndicesSize(handle, rd, tdesc(SHAPE), tdesc((1, 1, 1, 1)))[0] == \
        S.CUDNN_STATUS_NOT_SUPPORTED


def test_dropout_forward_backward(handle, rng):
    p = 0.3
    _, d = L.cudnnCreateDropoutDescriptor()
    _, ss = L.cudnnDropoutGetStatesSize(handle)
    assert L.cudnnSetDropoutDescriptor(d, handle, p, dev(np.zeros(ss, np.uint8)), ss, 1234) == (OK,)
    _, rs = L.cudnnDropoutGetReserveSpaceSize(tdesc(SHAPE))
    reserve = dev(np.zeros(rs // 4, np.float32))
    x = rng.standard_normal(SHAPE).astype(np.float32)
    y = poisoned(SHAPE)
    ret = L.cudnnDropoutForward(handle, d, tdesc(SHAPE), dev(x), tdesc(SHAPE), y, reserve, rs)
    keep = R.rng_generate(SHAPE, "BERNOULLI", 1234, 0, bernoulli_probability=1 - p)
    try:
        check_or_skip(handle, ret, ["rng"], {"y": y}, {"y": R.dropout_forward(x, keep, p)},
                      {"x": x}, {"seed": 1234, "offset": 0, "scale": 1 / (1 - p)}, tol=1e-6)
        assert d.offset > 0  # the next call draws a fresh mask
    except pytest.skip.Exception:
        pass
    # backward from a reserve space holding a known mask
    mask = (rng.uniform(size=SHAPE) > p).astype(np.float32)
    dy = rng.standard_normal(SHAPE).astype(np.float32)
    dx = poisoned(SHAPE)
    ret = L.cudnnDropoutBackward(handle, d, tdesc(SHAPE), dev(dy), tdesc(SHAPE), dx, dev(mask), rs)
    check_or_skip(handle, ret, ["pointwise"], {"dx": dx}, {"dx": R.dropout_backward(dy, mask, p)},
                  {"dy": dy, "mask": mask}, {"scale": 1 / (1 - p)}, tol=1e-6)
    assert L.cudnnDropoutBackward(handle, d, tdesc(SHAPE), dev(dy), tdesc(SHAPE), dx, dev(mask), rs - 1)[0] == \
        S.CUDNN_STATUS_BAD_PARAM


@pytest.mark.parametrize("n", [1, 4, 5])
def test_lrn_cross_channel(handle, rng, n):
    shape = size((2, 6, 3, 2), (8, 64, 28, 28))
    _, d = L.cudnnCreateLRNDescriptor()
    assert L.cudnnSetLRNDescriptor(d, n, 1e-2, 0.75, 1.5) == (OK,)
    x = rng.standard_normal(shape).astype(np.float32)
    prior = rng.standard_normal(shape).astype(np.float32)
    y = dev(prior)
    assert L.cudnnLRNCrossChannelForward(handle, d, 1, 1.0, tdesc(shape), dev(x), 0.0, tdesc(shape), y)[0] == \
        S.CUDNN_STATUS_BAD_PARAM
    ret = L.cudnnLRNCrossChannelForward(handle, d, 0, 2.0, tdesc(shape), dev(x), 0.5, tdesc(shape), y)
    yref = R.lrn_forward(x, n, 1e-2, 0.75, 1.5)
    try:
        check_or_skip(handle, ret, ["conv_fprop"], {"y": y}, {"y": 2.0 * yref + 0.5 * prior}, {"x": x, "y": prior},
                      {"alpha": 2.0}, tol=1e-5)
    except pytest.skip.Exception:
        pass
    dy = rng.standard_normal(shape).astype(np.float32)
    dx = poisoned(shape)
    yv = yref.astype(np.float32)
    ret = L.cudnnLRNCrossChannelBackward(handle, d, 0, 1.0, tdesc(shape), dev(yv), tdesc(shape), dev(dy),
                                         tdesc(shape), dev(x), 0.0, tdesc(shape), dx)
    check_or_skip(handle, ret, ["conv_fprop"], {"dx": dx}, {"dx": R.lrn_backward(x, dy, n, 1e-2, 0.75, 1.5)},
                  {"x": x, "dy": dy}, tol=1e-5)


@pytest.mark.parametrize("ops", list(ncudnn.cudnnNormOps_t), ids=lambda o: o.name)
def test_normalization_inference_with_ops(handle, rng, ops):
    mode = ncudnn.CUDNN_NORM_PER_CHANNEL
    _, sb = L.cudnnCreateTensorDescriptor()
    _, mv = L.cudnnCreateTensorDescriptor()
    assert L.cudnnDeriveNormTensorDescriptor(sb, mv, tdesc(SHAPE), mode, 1) == (OK,)
    ps = (1, SHAPE[1], 1, 1)
    assert L.cudnnGetTensorNdDescriptor(mv, 4)[3] == list(ps)
    x, z = rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)
    sc, bi, mu = (rng.standard_normal(ps).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2.0, ps).astype(np.float32)
    _, ad = L.cudnnCreateActivationDescriptor()
    L.cudnnSetActivationDescriptor(ad, ncudnn.CUDNN_ACTIVATION_CLIPPED_RELU, 0, 0.8)
    y = poisoned(SHAPE)
    ret = L.cudnnNormalizationForwardInference(handle, mode, ops, 0, 1.0, 0.0, tdesc(SHAPE), dev(x), sb, dev(sc),
                                               dev(bi), mv, dev(mu), dev(var), tdesc(SHAPE), dev(z), ad, tdesc(SHAPE),
                                               y, 1e-4, 1)
    ref = R.batchnorm_inference(x, sc, bi, mu, var, 1e-4)
    if ops == ncudnn.CUDNN_NORM_OPS_NORM_ADD_ACTIVATION:
        ref = ref + z
    if ops != ncudnn.CUDNN_NORM_OPS_NORM:
        ref = R.activation_forward("CLIPPED_RELU", ref, coef=0.8)
    check_or_skip(handle, ret, ["pointwise"], {"y": y}, {"y": ref},
                  {"x": x, "z": z, "scale": sc, "bias": bi, "mean": mu, "var": var}, {"epsilon": 1e-4}, tol=1e-5)
    bad = L.cudnnNormalizationForwardInference(handle, mode, ops, 0, 1.0, 0.0, tdesc(SHAPE), dev(x), sb, dev(sc),
                                               dev(bi), mv, dev(mu), dev(var), tdesc(SHAPE), dev(z), ad, tdesc(SHAPE),
                                               y, 1e-4, 2)
    assert bad == (S.CUDNN_STATUS_NOT_SUPPORTED,) and "groupCnt" in ncudnn.cudnnGetLastErrorString()


def test_normalization_training_matches_batchnorm(handle, rng):
    mode = ncudnn.CUDNN_NORM_PER_CHANNEL
    ps = (1, SHAPE[1], 1, 1)
    pd = tdesc(ps)
    # channel means in [1, 3]: a mean near zero would make its relative error meaningless (GPU run: a
    # 1e-3 mean off by 2e-10 failed a 1e-5 relative bound)
    x = (rng.standard_normal(SHAPE) + rng.uniform(1, 3, ps)).astype(np.float32)
    sc, bi = rng.standard_normal(ps).astype(np.float32), rng.standard_normal(ps).astype(np.float32)
    y, sm, si = poisoned(SHAPE), poisoned(ps), poisoned(ps)
    ret = L.cudnnNormalizationForwardTraining(handle, mode, 0, 0, 1.0, 0.0, tdesc(SHAPE), dev(x), pd, dev(sc),
                                              dev(bi), 0.1, pd, None, None, 1e-5, sm, si, None, None, None,
                                              tdesc(SHAPE), y, None, 0, None, 0, 1)
    ry, mean, inv, _, _ = R.batchnorm_forward_training(x, sc, bi, 1e-5)
    check_or_skip(handle, ret, ["norm_fwd"], {"y": y, "save_mean": sm, "save_inv_var": si},
                  {"y": ry, "save_mean": mean, "save_inv_var": inv}, {"x": x, "scale": sc, "bias": bi},
                  {"epsilon": 1e-5}, tol=1e-5)


def test_batchnorm_training_ex_add_activation(handle, rng):
    mode = ncudnn.CUDNN_BATCHNORM_SPATIAL_PERSISTENT
    pd, ps = bn_params(rng, mode)
    x, z = rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)
    sc, bi = rng.standard_normal(ps).astype(np.float32), rng.standard_normal(ps).astype(np.float32)
    _, ad = L.cudnnCreateActivationDescriptor()
    L.cudnnSetActivationDescriptor(ad, ncudnn.CUDNN_ACTIVATION_RELU, 0, 0.0)
    y, sm, si = poisoned(SHAPE), poisoned(ps), poisoned(ps)
    for size_fn in (L.cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize,):
        assert size_fn(handle, mode, 2, tdesc(SHAPE), tdesc(SHAPE), tdesc(SHAPE), pd, ad) == (OK, 0)
    _, tanh = L.cudnnCreateActivationDescriptor()
    L.cudnnSetActivationDescriptor(tanh, ncudnn.CUDNN_ACTIVATION_TANH, 0, 0.0)
    bad = L.cudnnBatchNormalizationBackwardEx(
        handle, mode, ncudnn.CUDNN_BATCHNORM_OPS_BN_ACTIVATION, 1.0, 0.0, 1.0, 0.0, tdesc(SHAPE), dev(x),
        tdesc(SHAPE), y, tdesc(SHAPE), y, None, None, tdesc(SHAPE), y, pd, dev(sc), dev(bi), sm, si, 1e-5, None,
        None, tanh, None, 0, None, 0)
    assert bad == (S.CUDNN_STATUS_NOT_SUPPORTED,) and "RELU only" in ncudnn.cudnnGetLastErrorString()
    ret = L.cudnnBatchNormalizationForwardTrainingEx(
        handle, mode, ncudnn.CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, 1.0, 0.0, tdesc(SHAPE), dev(x), tdesc(SHAPE),
        dev(z), tdesc(SHAPE), y, pd, dev(sc), dev(bi), 0.1, None, None, 1e-5, sm, si, ad, None, 0, None, 0)
    ry, mean, inv, _, _ = R.batchnorm_forward_training(x, sc, bi, 1e-5)
    check_or_skip(handle, ret, ["norm_fwd"], {"y": y, "save_mean": sm, "save_inv_var": si},
                  {"y": np.maximum(ry + z, 0), "save_mean": mean, "save_inv_var": inv},
                  {"x": x, "z": z, "scale": sc, "bias": bi}, {"epsilon": 1e-5}, tol=1e-5)


def test_batchnorm_backward_ex_relu_add(handle, rng):
    mode = ncudnn.CUDNN_BATCHNORM_SPATIAL
    pd, ps = bn_params(rng, mode)
    x, dy = rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)
    sc, bi = rng.standard_normal(ps).astype(np.float32), rng.standard_normal(ps).astype(np.float32)
    z = rng.standard_normal(SHAPE).astype(np.float32)
    yb, mean, inv, _, _ = R.batchnorm_forward_training(x, sc, bi, 1e-5)
    y = np.maximum(yb + z, 0).astype(np.float32)
    mean, inv = mean.astype(np.float32), inv.astype(np.float32)
    _, ad = L.cudnnCreateActivationDescriptor()
    L.cudnnSetActivationDescriptor(ad, ncudnn.CUDNN_ACTIVATION_RELU, 0, 0.0)
    dx, dz, ds, db = poisoned(SHAPE), poisoned(SHAPE), poisoned(ps), poisoned(ps)
    T = tdesc(SHAPE)
    ret = L.cudnnBatchNormalizationBackwardEx(
        handle, mode, ncudnn.CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, 1.0, 0.0, 1.0, 0.0, T, dev(x), T, dev(y), T,
        dev(dy), T, dz, T, dx, pd, dev(sc), dev(bi), ds, db, 1e-5, dev(mean), dev(inv), ad, None, 0, None, 0)
    dyr = np.where(y > 0, dy, 0.0)
    rdx, rds, rdb = R.batchnorm_backward(x, dyr, sc, mean, inv)
    check_or_skip(handle, ret, ["norm_bwd"], {"dx": dx, "dz": dz, "dscale": ds, "dbias": db},
                  {"dx": rdx, "dz": dyr, "dscale": rds, "dbias": rdb},
                  {"x": x, "y": y, "dy": dy, "scale": sc, "save_mean": mean, "save_inv_var": inv}, tol=1e-4)


def test_unfused_fallback_when_no_engine_takes_the_fused_graph(handle, rng, monkeypatch):
    """A fused pattern no engine accepts (here: softmax_fused refusing) still runs, unfused (intermediate in a
    buffer; reductions and pointwise kernels)."""
    from ncudnn.engines import registry
    from ncudnn.legacy import lower

    eng = registry.get("softmax_fused")
    if eng is None or not engines_for("reduction"):
        pytest.skip("needs the softmax_fused and reduction engines")
    monkeypatch.setattr(type(eng), "check_support",
                        lambda self, sub, ctx: (S.CUDNN_STATUS_NOT_SUPPORTED, "refused for this test"))
    x = rng.uniform(-3, 3, SHAPE).astype(np.float32)
    y = poisoned(SHAPE)
    assert L.cudnnSoftmaxForward(handle, ncudnn.CUDNN_SOFTMAX_ACCURATE, ncudnn.CUDNN_SOFTMAX_MODE_CHANNEL, 1.0,
                                 tdesc(SHAPE), dev(x), 0.0, tdesc(SHAPE), y) == (OK,)
    assert_close(y.copy_to_host(), R.softmax(x, 1), 1e-5)
    low = last_lowered(handle)
    plan, used = lower.plan_of(low)
    # the engine layer's composite fallback or the legacy unfused variant: reductions and pointwise kernels only
    assert plan.engine_names and set(plan.engine_names) <= {"reduction", "pointwise_fused"}


# max-pooling backward without the extra forward: where the gather recomputes the winners from x, dx is bit-for-bit the index path's


def _backward(p, x, dy, ys, index_path, monkeypatch):
    """dx (host) of one cudnnPoolingBackward on a fresh handle, and whether its graph ran a forward;
    ``index_path``: as before recomputes_from_x (a forward writes the index first)."""
    if index_path:
        monkeypatch.setattr(pooling, "recomputes_from_x", lambda q: False)
    st, h = ncudnn.cudnnCreate()
    try:
        dx = poisoned(x.shape)
        ret = L.cudnnPoolingBackward(h, p, 1.0, tdesc(ys), dev(np.zeros(ys, np.float32)), tdesc(ys), dev(dy),
                                     tdesc(x.shape), dev(x), 0.0, tdesc(x.shape), dx)
        assert ret == (OK,), ncudnn.cudnnGetLastErrorString()
        ops = {n.OP for n in last_lowered(h).graph.nodes}
        return dx.copy_to_host(), "resample_fwd" in ops
    finally:
        ncudnn.cudnnDestroy(h)


@pytest.mark.parametrize("mode,nan", [(PM.CUDNN_POOLING_MAX, 0), (PM.CUDNN_POOLING_MAX_DETERMINISTIC, 1)],
                         ids=["max", "det_propagate"])
@pytest.mark.parametrize("geom", [((3, 2), (1, 0), (2, 2)), ((2, 2), (0, 0), (1, 1)), ((7, 6), (0, 0), (1, 1))],
                         ids=["3x2s2", "2x2s1", "7x6s1_index"])
def test_maxpool_backward_from_x_matches_index_path(rng, monkeypatch, mode, nan, geom):
    win, pad, stride = geom
    _, p = L.cudnnCreatePoolingDescriptor()
    assert L.cudnnSetPooling2dDescriptor(p, mode, nan, *win, *pad, *stride) == (OK,)
    shape = (2, 3, 7, 6)
    x = rng.integers(-2, 3, shape).astype(np.float32)          # many ties: the first maximum must win
    x.reshape(-1)[rng.choice(x.size, 2, replace=False)] = np.nan
    ys = tuple(L.cudnnGetPooling2dForwardOutputDim(p, tdesc(shape))[1:])
    dy = rng.uniform(-1, 1, ys).astype(np.float32)
    direct = pooling.recomputes_from_x(p)
    assert direct == (geom[0] != (7, 6))                      # 42 taps x 42 covering outputs: too large
    new, fwd_new = _backward(p, x, dy, ys, False, monkeypatch)
    old, fwd_old = _backward(p, x, dy, ys, True, monkeypatch)
    assert fwd_old and fwd_new == (not direct)
    assert np.array_equal(new, old, equal_nan=True)
    kw = dict(window=win, stride=stride, pre_pad=pad, post_pad=pad, padding_mode=ncudnn.CUDNN_NEG_INF_PAD,
              nan_propagation=ncudnn.cudnnNanPropagation_t(nan))
    assert_close(new, R.resample_backward(dy, "MAXPOOL", x_shape=shape, x=x, **kw), "float32")
