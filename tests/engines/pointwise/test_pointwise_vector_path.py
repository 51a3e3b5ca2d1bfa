"""pointwise_fused on the vector path through the engine API: NHWC and NCHW per-channel bias DAGs
pick 16-byte vectors, and a misaligned buffer runs the vec = 1 twin; float64 oracle."""
import numpy as np

from ncudnn import memory
from ncudnn.engines import api
from ncudnn.reference.pointwise import pointwise as ref_pw
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnPointwiseMode_t as PM

import engine_graphs as G

DIMS = (2, 8, 2, 2)
NHWC = (32, 1, 16, 8)


def _graph(nhwc):
    g = G.bias_relu_mul(DIMS, finalize=False)
    if nhwc:
        for n in g.nodes:
            for t in list(n.inputs.values()) + list(n.outputs.values()):
                if t.dims is not None and tuple(t.dims) == DIMS:
                    t.strides = NHWC
    return g.finalize()


def _plan(g):
    for ec in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A):
        if ec.engine.name == "pointwise_fused":
            return api.build_plan(g, ec)
    raise AssertionError("pointwise_fused offered no config")


def _inputs(rng, nhwc):
    """Host buffers in storage order and their logical NCHW views."""
    n, c, h, w = DIMS
    shape = (n, h, w, c) if nhwc else DIMS
    x, y = (rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(2))
    b = rng.uniform(-1, 1, (1, c, 1, 1)).astype(np.float32)
    view = (lambda a: a.transpose(0, 3, 1, 2)) if nhwc else (lambda a: a)
    return x, b, y, view


def _expected(x, b, y):
    return ref_pw(PM.CUDNN_POINTWISE_MUL, ref_pw(PM.CUDNN_POINTWISE_ADD, x, b),
                  ref_pw(PM.CUDNN_POINTWISE_RELU_FWD, y))


def test_nhwc_and_nchw_bias_dags_use_vectors(rng):
    for nhwc in (True, False):
        plan = _plan(_graph(nhwc))
        (part,) = plan.parts
        assert part.meta.spec.vec == 4
        x, b, y, view = _inputs(rng, nhwc)
        out = G.poisoned(x.size)
        api.execute(plan, {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out})
        got = view(out.copy_to_host().reshape(x.shape))
        assert_close(got, _expected(view(x), b, view(y)), "float32")


def test_misaligned_buffer_runs_the_scalar_twin(rng):
    plan = _plan(_graph(True))
    (part,) = plan.parts
    x, b, y, view = _inputs(rng, True)
    xbuf = G.device(np.concatenate([np.float32([7.0]), x.reshape(-1)]))   # x starts 4 bytes in
    out = G.poisoned(x.size)
    api.execute(plan, {1: memory.device_pointer(xbuf) + 4, 2: G.device(b), 3: G.device(y), 4: out})
    assert part._scalar is not None and part._scalar[0].spec.vec == 1
    got = view(out.copy_to_host().reshape(x.shape))
    assert_close(got, _expected(view(x), b, view(y)), "float32")
