"""The float32 GELU (branch-free, no erf: pointwise_ops.gelu_f32) in a kernel, against the float64 oracle
over a wide range, the special values, and inside the fused pointwise kernel of bias + GELU."""
import math

import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.pointwise import fused as kpw
from ncudnn.kernels.pointwise import ops as po
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnPointwiseMode_t as PM

GELU = PM.CUDNN_POINTWISE_GELU_FWD


def _kernel():
    src = ("def kernel(x, out):\n"
           "    i = cuda.grid(1)\n"
           "    if i < out.size:\n"
           "        r = float32(x[i])\n"
           f"        out[i] = float32({po.expr(GELU, ['r'], None, 'float32')})\n")
    ns = dict(po.expr_globals(), cuda=cuda)
    exec(compile(src, "<gelu test>", "exec"), ns)
    return cuda.jit(ns["kernel"])


def _run(x):
    out = cuda.to_device(np.full(x.size, poison_value(np.float32), np.float32))
    _kernel()[(x.size + 63) // 64, 64](cuda.to_device(x), out)
    return out.copy_to_host()


def test_krd_gelu_f32_accuracy(rng):
    assert "gelu_f32" in po.expr(GELU, ["r"], None, "float32")
    assert "math.erf" in po.expr(GELU, ["r"], None, "float64")     # float64 keeps the erf form
    x = np.concatenate([rng.standard_normal(96) * 3, rng.uniform(-12, 12, 64),
                        np.array([0.0, -0.0, 1e-30, -1e-30, 6.0, -6.0, 5.9, -6.1])]).astype(np.float32)
    got = _run(x).astype(np.float64)
    want = ref.pointwise(GELU, x.astype(np.float64))
    assert_close(got, want, 1e-6)
    big = np.abs(want) > 1e-3
    assert np.max(np.abs(got - want)[big] / np.abs(want[big])) < 3e-6
    assert np.max(np.abs(got - want)) < 2e-6


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the simulator's numpy scalars warn on inf * 0
def test_krd_gelu_f32_special_values():
    x = np.array([np.inf, -np.inf, np.nan, -40.0, 40.0, -1e20, 1e20], np.float32)
    got = _run(x)
    assert got[0] == np.inf and math.isnan(got[2])
    assert math.isnan(got[1])                 # -inf * Phi(-inf) = -inf * 0, as the erf form gives
    assert got[3] == 0.0 and got[4] == 40.0 and got[5] == 0.0 and got[6] == np.float32(1e20)


def test_krd_fused_bias_gelu_vector_kernel(rng):
    shape = (6, 64)
    cs = kpw.contiguous_strides(shape)
    spec = kpw.PointwiseSpec(shape, (kpw.TensorSpec("float32", cs), kpw.TensorSpec("float32", (0, 1))),
                             (kpw.NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)), kpw.NodeSpec.make(GELU, (2,))),
                             (kpw.OutputSpec(3, "float32", cs),), block=32, unroll=2, vec=4, waves=0)
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    b = rng.standard_normal((1, 64)).astype(np.float32)
    out = cuda.to_device(np.full(x.size, np.nan, np.float32))
    kpw.run_pointwise(spec, cuda.to_device(x.reshape(-1)), cuda.to_device(b.reshape(-1)), out)
    want = ref.pointwise(GELU, x.astype(np.float64) + b.astype(np.float64))
    assert_close(out.copy_to_host().reshape(shape), want, 1e-6)
