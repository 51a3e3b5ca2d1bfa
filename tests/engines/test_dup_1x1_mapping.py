"""conv_gemm_1x1's fprop / dgrad and wgrad mappings share their checks (_checked_1x1, _checked_output) and
the pixel merge (_pixels): each refusal names the node and field in the same order for every kind, and
the mappings keep their GEMM shapes and strides (no kernels run)."""
import pytest

from ncudnn.engines import api
from ncudnn.engines.conv import gemm_1x1 as E
from ncudnn.engines.gemm import common as gc
from ncudnn.ir import ConvDgrad, ConvFprop, ConvWgrad, OpGraph, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnDataType_t as DT


def _t(uid, dims, nhwc=False, dt=DT.CUDNN_DATA_FLOAT):
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), dt, name=f"t{uid}")


def _sub(kind, x, w, y, stride=1, pad=0):
    a = dict(spatial_dims=2, stride=(stride,) * 2, pre_padding=(pad,) * 2, post_padding=(pad,) * 2,
             dilation=(1, 1), mode=CM.CUDNN_CROSS_CORRELATION)
    node = {"fprop": lambda: ConvFprop("cv", {"X": x, "W": w}, {"Y": y}, **a),
            "dgrad": lambda: ConvDgrad("cv", {"DY": y, "W": w}, {"DX": x}, **a),
            "wgrad": lambda: ConvWgrad("cv", {"X": x, "DY": y}, {"DW": w}, **a)}[kind]()
    return api.problem(OpGraph([node]).finalize())


def _map(sub):
    return (E.wgrad1x1_mapping if sub.kind == "conv_wgrad" else E.conv1x1_mapping)(sub)


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_dup_1x1_refusals_name_the_field(kind):
    filt = "DW" if kind == "wgrad" else "W"
    cases = [((2, 4, 6, 6), (8, 4, 3, 3), (2, 8, 4, 4), 1, 0, f"{filt}: filter (3, 3) is not 1x1"),
             ((2, 4, 6, 6), (8, 4, 1, 1), (2, 8, 8, 8), 1, 1, "padding (1, 1) / (1, 1) is not 0"),
             ((2, 4, 6, 6), (8, 2, 1, 1), (2, 8, 6, 6), 1, 0, "2 groups (one GEMM needs groups = 1)")]
    for xd, wd, yd, stride, pad, why in cases:
        with pytest.raises(gc.Reject, match=r"node 'cv': " + why.replace("(", r"\(").replace(")", r"\)")):
            _map(_sub(kind, _t(1, xd), _t(2, wd), _t(3, yd), stride, pad))
    strided = _sub(kind, _t(1, (2, 4, 6, 6)), _t(2, (8, 4, 1, 1)), _t(3, (2, 8, 3, 3)), stride=2)
    if kind == "wgrad":                     # fp32, channels % 4: copied pixels-last, one GEMM over N*P*Q
        p = _map(strided)
        assert (p.M, p.N, p.K, p.pixels_last[:3]) == (8, 4, 18, (2, 9, 3))
        half = _sub(kind, _t(1, (2, 4, 6, 6), dt=DT.CUDNN_DATA_HALF), _t(2, (8, 4, 1, 1), dt=DT.CUDNN_DATA_HALF),
                    _t(3, (2, 8, 3, 3), dt=DT.CUDNN_DATA_HALF), stride=2)
        with pytest.raises(gc.Reject, match="stride .* needs a 2-D fp32 conv"):
            _map(half)
    else:
        with pytest.raises(gc.Reject, match=r"stride \(2, 2\) is not 1"):
            _map(strided)


def test_dup_1x1_mappings_keep_their_gemms():
    # fprop NCHW: per-image GEMMs, rows = pixels (contiguous), k = channels
    p = _map(_sub("fprop", _t(1, (3, 4, 5, 5)), _t(2, (8, 4, 1, 1)), _t(3, (3, 8, 5, 5))))
    assert (p.M, p.N, p.K, p.batch) == (25, 8, 4, (1, 3))
    assert p.a_strides == (0, 100, 1, 25) and p.b_strides == (0, 0, 1, 4) and p.c_strides == (0, 200, 1, 25)
    # dgrad NHWC: one GEMM over every pixel, the filter read transposed
    p = _map(_sub("dgrad", _t(1, (3, 4, 5, 5), True), _t(2, (8, 4, 1, 1), True), _t(3, (3, 8, 5, 5), True)))
    assert (p.M, p.N, p.K, p.batch) == (75, 4, 8, (1, 1))
    assert p.a_strides == (0, 0, 8, 1) and p.b_strides == (0, 0, 4, 1) and p.c_strides == (0, 0, 4, 1)
    # wgrad NHWC: one GEMM over N*H*W; NCHW with H*W % 8 == 0: per-image GEMMs summed (sum_batch)
    p = _map(_sub("wgrad", _t(1, (3, 4, 5, 5), True), _t(2, (8, 4, 1, 1), True), _t(3, (3, 8, 5, 5), True)))
    assert (p.M, p.N, p.K, p.sum_batch, p.pixels_last) == (8, 4, 75, False, None)
    assert p.a_strides == (0, 0, 1, 8) and p.b_strides == (0, 0, 4, 1)
    p = _map(_sub("wgrad", _t(1, (3, 4, 4, 4)), _t(2, (8, 4, 1, 1)), _t(3, (3, 8, 4, 4))))
    assert (p.M, p.N, p.K, p.batch, p.sum_batch) == (8, 4, 16, (3, 1), True)
    assert p.a_strides == (128, 0, 16, 1) and p.b_strides == (64, 0, 1, 16)
