"""The Winograd problems (fprop / dgrad: WinoProblem; wgrad: WgradProblem) refuse through one shared check
(conv_winograd_common.check_3x3_s1): the same reasons, naming the node and the filter's port."""
import pytest

from ncudnn.engines import api
from ncudnn.engines.gemm import common as gc
from ncudnn.engines.winograd.common import WgradProblem, WinoProblem
from ncudnn.ir import ConvDgrad, ConvFprop, ConvWgrad, OpGraph, TensorDesc, packed_strides
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnDataType_t as DT


def _t(uid, dims):
    return TensorDesc(uid, tuple(dims), packed_strides(dims), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")


def _sub(kind, fs=3, stride=1, dil=1):
    x, w = _t(1, (1, 4, 9, 9)), _t(2, (8, 4, fs, fs))
    o = (9 + 2 - dil * (fs - 1) - 1) // stride + 1
    y = _t(3, (1, 8, o, o))
    a = dict(spatial_dims=2, stride=(stride,) * 2, pre_padding=(1, 1), post_padding=(1, 1), dilation=(dil,) * 2,
             mode=CM.CUDNN_CROSS_CORRELATION)
    node = {"fprop": lambda: ConvFprop("cv", {"X": x, "W": w}, {"Y": y}, **a),
            "dgrad": lambda: ConvDgrad("cv", {"DY": y, "W": w}, {"DX": x}, **a),
            "wgrad": lambda: ConvWgrad("cv", {"X": x, "DY": y}, {"DW": w}, **a)}[kind]()
    return api.problem(OpGraph([node]).finalize())


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_dup_wino_checks_shared(kind):
    make = WgradProblem if kind == "wgrad" else WinoProblem
    port = "DW" if kind == "wgrad" else "W"
    for kw, why in ((dict(fs=5), rf"{port}: filter \(5, 5\) is not 3x3"), (dict(stride=2), r"stride \(2, 2\) is not 1"),
                    (dict(dil=2), r"dilation \(2, 2\) is not 1")):
        with pytest.raises(gc.Reject, match=r"node 'cv': " + why):
            make(_sub(kind, **kw))
    p = make(_sub(kind))
    assert (p.C, p.K, p.pad, p.cfast) == ((8, 4) if kind == "dgrad" else (4, 8)) + ((1, 1), False)
