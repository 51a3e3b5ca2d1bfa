"""Layer / RMS / batch / instance norm kernels against the float64 oracle."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.norm import bn_generic as norm
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.kernels.pointwise.fused import contiguous_strides as cs
from ncudnn.testing import assert_close


def _host_type(dtype):
    return getattr(ml_dtypes, dtype, None) or np.dtype(dtype)


def _dev(a, dtype="float32"):
    return cuda.to_device(to_storage(np.asarray(a).astype(_host_type(dtype))))


def _poisoned(n, dtype="float32"):
    return _dev(np.full(n, np.nan, np.float32), dtype)


def _host(d, dtype="float32"):
    return from_storage(d.copy_to_host(), dtype)


def _perm_strides(shape, order):
    strides, acc = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def _to_buffer(x, strides):
    """Scatter dense x into a flat buffer laid out with ``strides``."""
    buf = np.empty(x.size, x.dtype)
    idx = np.zeros(x.shape, np.int64)
    for d, s in enumerate(strides):
        sh = [1] * x.ndim
        sh[d] = x.shape[d]
        idx = idx + np.arange(x.shape[d]).reshape(sh) * s
    buf[idx.reshape(-1)] = x.reshape(-1)
    return buf, idx


ROW_CASES = [(40, 32, "warp-registers"), (530, 32, "warp-looped"), (100, 64, "block-registers"),
             (1100, 64, "block-looped")]


@pytest.mark.parametrize("n,block,path", ROW_CASES, ids=[c[2] for c in ROW_CASES])
@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
def test_row_norm_forward_backward(rng, n, block, path, rms):
    rows = 3
    x = (rng.standard_normal((rows, n)) * 2 + 0.7).astype(np.float32)
    dy = rng.standard_normal((rows, n)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    eps = 1e-5
    vm = 8 if path.endswith("looped") else norm.VPT_MAX   # small rows reach the looped path
    assert (norm.row_config(n, block, vpt_max=vm)[2] == 0) == path.endswith("looped")
    y, mean, inv = _poisoned(rows * n), _poisoned(rows), _poisoned(rows)
    norm.row_norm_forward(_dev(x), _dev(scale), _dev(bias), y, None if rms else mean, inv, rows,
                          n, eps, rms=rms, block=block, vpt_max=vm)
    if rms:
        ey, einv = ref.rmsnorm_forward(x, scale, eps, norm_axes=1, bias=bias)
    else:
        ey, emean, einv = ref.layernorm_forward(x, scale, bias, eps, norm_axes=1)
        assert_close(_host(mean).reshape(rows, 1), emean, "float32", name="mean")
    assert_close(_host(y).reshape(rows, n), ey, "float32", name="y")
    assert_close(_host(inv).reshape(rows, 1), einv, "float32", name="inv_std")
    dx, ds, db = _poisoned(rows * n), _poisoned(n), _poisoned(n)
    norm.row_norm_backward(_dev(x), _dev(dy), _dev(scale), None if rms else mean, inv, dx, ds, db,
                           rows, n, rms=rms, block=block, vpt_max=vm)
    if rms:
        edx, eds, edb = ref.rmsnorm_backward(x, dy, scale, einv, norm_axes=1, has_bias=True)
    else:
        edx, eds, edb = ref.layernorm_backward(x, dy, scale, emean, einv, norm_axes=1)
    assert_close(_host(dx).reshape(rows, n), edx, "float32", name="dx")
    assert_close(_host(ds), eds, "float32", name="dscale")
    assert_close(_host(db), edb, "float32", name="dbias")


def test_layer_norm_bf16_io(rng):
    rows, n = 2, 96
    x = rng.standard_normal((rows, n)).astype(ml_dtypes.bfloat16)
    scale = rng.uniform(0.5, 1.5, n).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    y = _poisoned(rows * n, "bfloat16")
    norm.row_norm_forward(_dev(x, "bfloat16"), _dev(scale, "bfloat16"), _dev(bias, "bfloat16"), y,
                          None, None, rows, n, 1e-5, x_dtype="bfloat16", param_dtype="bfloat16",
                          y_dtype="bfloat16", block=32)
    ey, _, _ = ref.layernorm_forward(x, scale, bias, 1e-5, norm_axes=1)
    assert_close(_host(y, "bfloat16").reshape(rows, n), ey, "bfloat16")


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_batchnorm_training_and_backward(rng, layout):
    shape = (3, 4, 3, 5)
    st = cs(shape) if layout == "nchw" else _perm_strides(shape, (0, 2, 3, 1))
    x = (rng.standard_normal(shape) + 0.5).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    C = shape[1]
    scale, bias = rng.uniform(0.5, 1.5, C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    rm, rv = rng.standard_normal(C).astype(np.float32), rng.uniform(0.5, 2, C).astype(np.float32)
    xbuf, idx = _to_buffer(x, st)
    dybuf, _ = _to_buffer(dy, st)
    y, sm, si = _poisoned(x.size), _poisoned(C), _poisoned(C)
    drm, drv = _dev(rm), _dev(rv)
    # a caller-provided (poisoned) workspace of exactly the advertised size
    ws = _poisoned(norm.norm_workspace_elems("batchnorm_forward", shape, st))
    norm.batchnorm_forward_training(_dev(xbuf), _dev(scale), _dev(bias), y, sm, si, drm, drv,
                                    shape, st, 1e-5, 0.1, workspace=ws)
    ey, emean, einv, erm, erv = ref.batchnorm_forward_training(x, scale, bias, 1e-5, 0.1, rm, rv)
    assert_close(_host(y)[idx], ey, "float32", name="y")
    assert_close(_host(sm).reshape(emean.shape), emean, "float32", name="mean")
    assert_close(_host(si).reshape(einv.shape), einv, "float32", name="inv_std")
    assert_close(_host(drm).reshape(erm.shape), erm, "float32", name="running_mean")
    assert_close(_host(drv).reshape(erv.shape), erv, "float32", name="running_var")
    dx, ds, db = _poisoned(x.size), _poisoned(C), _poisoned(C)
    ws = _poisoned(norm.norm_workspace_elems("batchnorm_backward", shape, st))
    norm.batchnorm_backward(_dev(xbuf), _dev(dybuf), _dev(scale), sm, si, dx, ds, db, shape, st,
                            workspace=ws)
    edx, eds, edb = ref.batchnorm_backward(x, dy, scale, emean, einv)
    assert_close(_host(dx)[idx], edx, "float32", name="dx")
    assert_close(_host(ds).reshape(eds.shape), eds, "float32", name="dscale")
    assert_close(_host(db).reshape(edb.shape), edb, "float32", name="dbias")


def test_batchnorm_inference_fp16(rng):
    shape = (2, 3, 4, 4)
    x = rng.standard_normal(shape).astype(np.float16)
    C = 3
    scale, bias = rng.uniform(0.5, 1.5, C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    mean, var = rng.standard_normal(C).astype(np.float32), rng.uniform(0.5, 2, C).astype(np.float32)
    y = _poisoned(x.size, "float16")
    norm.batchnorm_inference(_dev(x, "float16"), _dev(scale), _dev(bias), _dev(mean), _dev(var), y,
                             shape, cs(shape), 1e-5, x_dtype="float16")
    ey = ref.batchnorm_inference(x, scale, bias, mean, var, 1e-5)
    assert_close(_host(y, "float16").reshape(shape), ey, "float16")


def test_instance_norm_forward_backward(rng):
    shape = (2, 3, 4, 5)
    x = (rng.standard_normal(shape) + 0.3).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    C = 3
    scale, bias = rng.uniform(0.5, 1.5, C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    y, m, iv = _poisoned(x.size), _poisoned(6), _poisoned(6)
    norm.instancenorm_forward(_dev(x), _dev(scale), _dev(bias), y, m, iv, shape, cs(shape), 1e-5)
    ey, em, ei = ref.instancenorm_forward(x, scale, bias, 1e-5)
    assert_close(_host(y).reshape(shape), ey, "float32", name="y")
    assert_close(_host(m).reshape(em.shape), em, "float32", name="mean")
    assert_close(_host(iv).reshape(ei.shape), ei, "float32", name="inv_std")
    dx, ds, db = _poisoned(x.size), _poisoned(C), _poisoned(C)
    norm.instancenorm_backward(_dev(x), _dev(dy), _dev(scale), m, iv, dx, ds, db, shape, cs(shape))
    edx, eds, edb = ref.instancenorm_backward(x, dy, scale, em, ei)
    assert_close(_host(dx).reshape(shape), edx, "float32", name="dx")
    assert_close(_host(ds).reshape(eds.shape), eds, "float32", name="dscale")
    assert_close(_host(db).reshape(edb.shape), edb, "float32", name="dbias")


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_group_norm_forward_backward(rng, layout):
    shape, G = (2, 6, 3, 4), 3
    st = cs(shape) if layout == "nchw" else _perm_strides(shape, (0, 2, 3, 1))
    x = (rng.standard_normal(shape) + 0.4).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    C = shape[1]
    scale, bias = rng.uniform(0.5, 1.5, C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    xbuf, idx = _to_buffer(x, st)
    dybuf, _ = _to_buffer(dy, st)
    y, m, iv = _poisoned(x.size), _poisoned(2 * G), _poisoned(2 * G)
    ws = _poisoned(norm.norm_workspace_elems("groupnorm_forward", shape, st, groups=G))
    norm.groupnorm_forward(_dev(xbuf), _dev(scale), _dev(bias), y, m, iv, shape, st, 1e-5, G,
                           workspace=ws)
    ey, em, ei = ref.groupnorm_forward(x, scale, bias, 1e-5, G)
    assert_close(_host(y)[idx], ey, "float32", name="y")
    assert_close(_host(m).reshape(em.shape), em, "float32", name="mean")
    assert_close(_host(iv).reshape(ei.shape), ei, "float32", name="inv_std")
    dx, ds, db = _poisoned(x.size), _poisoned(C), _poisoned(C)
    norm.groupnorm_backward(_dev(xbuf), _dev(dybuf), _dev(scale), m, iv, dx, ds, db, shape, st, G)
    edx, eds, edb = ref.groupnorm_backward(x, dy, scale, em, ei, G)
    assert_close(_host(dx)[idx], edx, "float32", name="dx")
    assert_close(_host(ds).reshape(eds.shape), eds, "float32", name="dscale")
    assert_close(_host(db).reshape(edb.shape), edb, "float32", name="dbias")
