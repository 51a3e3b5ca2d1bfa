"""The pointwise kernels peculiar to the legacy lowering (argument indices: compare / select /
generated indices; batch-norm inference with an activation; LRN's power) compiled for sm_90 in a
child process, without a GPU, with no spills (~10 s each: two of them run with NCUDNN_SLOW=1)."""
import os

import numpy as np
import pytest

import ncudnn
import ncudnn.legacy as L
from ncudnn.kernels.runtime import kcache

from .conftest import dev, last_lowered, poisoned, tdesc
from .legacy_kernels import pointwise_specs, spec_from_json

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = (2, 3, 5, 4)


def _reduce_indices(h):
    _, rd = L.cudnnCreateReduceTensorDescriptor()
    L.cudnnSetReduceTensorDescriptor(rd, ncudnn.CUDNN_REDUCE_TENSOR_AMAX, 0, 0, 1, 0)
    out = (2, 1, 5, 1)
    L.cudnnReduceTensor(h, rd, poisoned(out, np.int32), 40, None, 0, 0.5, tdesc(SHAPE), dev(np.ones(SHAPE, np.float32)),
                        1.0, tdesc(out), dev(np.ones(out, np.float32)))


def _bn_inference_relu(h):
    ps = (1, SHAPE[1], 1, 1)
    _, ad = L.cudnnCreateActivationDescriptor()
    L.cudnnSetActivationDescriptor(ad, ncudnn.CUDNN_ACTIVATION_CLIPPED_RELU, 0, 6.0)
    p = [dev(np.ones(ps, np.float32)) for _ in range(4)]
    L.cudnnNormalizationForwardInference(h, 1, 2, 0, 1.0, 0.0, tdesc(SHAPE), dev(np.ones(SHAPE, np.float32)),
                                         tdesc(ps), p[0], p[1], tdesc(ps), p[2], p[3], tdesc(SHAPE),
                                         dev(np.ones(SHAPE, np.float32)), ad, tdesc(SHAPE), poisoned(SHAPE), 1e-5, 1)


def _lrn_backward(h):
    _, d = L.cudnnCreateLRNDescriptor()
    x = dev(np.ones(SHAPE, np.float32))
    L.cudnnLRNCrossChannelBackward(h, d, 0, 1.0, tdesc(SHAPE), x, tdesc(SHAPE), x, tdesc(SHAPE), x, 0.5,
                                   tdesc(SHAPE), poisoned(SHAPE))


@pytest.mark.parametrize("call", [_reduce_indices, pytest.param(_bn_inference_relu, marks=pytest.mark.slow),
                                  pytest.param(_lrn_backward, marks=pytest.mark.slow)],
                         ids=["reduce_indices", "bn_inference_relu", "lrn_backward"])
def test_legacy_pointwise_kernels_compile_for_sm90(handle, monkeypatch, call):
    call(handle)
    specs = pointwise_specs(last_lowered(handle).graph)
    assert specs
    spec = max(specs, key=lambda s: len(s["nodes"]))
    assert spec_from_json(spec) is not None  # round trip
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = kcache.resource_usage_subprocess("legacy_kernels:build", "legacy_kernels:signature", args=[spec], cc=(9, 0))
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["local"] == 0, r
    assert r["registers"] <= 128, r
