"""conv_tc with SPLIT_K end to end (simulator at tiny shapes; the ResNet c5 / c4 layers with
NCUDNN_SHAPES=gpu): the k tiles over grid y, fp32 partials in the plan's workspace (after the stem's
padded copies), the ordered reduce with bias + relu; vs the float64 oracle with poisoned outputs and a
poisoned workspace. The ranking at the nominal H200 splits the small-spatial layers and not the others."""
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.engines import api, registry
from ncudnn.engines.conv.tc import TILES
from ncudnn.engines.device import H200
from ncudnn.ir import ConvFprop, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.testing import assert_close, rel_err, size
from ncudnn.types import cudnnBackendKnobType_t as K
from ncudnn.types import cudnnDataType_t as DT
from ncudnn.types import cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S

BF16 = DT.CUDNN_DATA_BFLOAT16


def _ctx(dev=None):
    c = replace(api.context(), allow_tensor_cores=True)
    return replace(c, device=dev) if dev is not None else c


def _t(uid, dims):
    return TensorDesc(uid, tuple(dims), packed_strides(dims, nhwc_order(4)), BF16, name=f"t{uid}")


def _graph(dims, wdims, stride=(1, 1), pad=(1, 1)):
    ydims = ref.conv_output_shape(dims, wdims, stride=stride, pre_pad=pad, post_pad=pad, dilation=(1, 1))
    x, w, b, y = _t(1, dims), _t(2, wdims), _t(3, (1, wdims[0], 1, 1)), _t(4, ydims)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": TensorDesc(10, is_virtual=True, name="v10")}, spatial_dims=2,
                     stride=stride, pre_padding=pad, post_padding=pad, dilation=(1, 1))
    add = Pointwise("bias", {"X": conv.outputs["Y"], "B": b}, {"Y": TensorDesc(11, is_virtual=True, name="v11")},
                    mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([conv, add, relu]).finalize(), (x, w, b, y)


def _dev(a, t):
    buf = np.full(t.span_elements(), 0x7FC0, np.uint16)     # NaN bf16 wherever the tensor does not write
    view = np.lib.stride_tricks.as_strided(buf.view(ml_dtypes.bfloat16), a.shape, [s * 2 for s in t.strides])
    view[...] = a
    return cuda.to_device(buf)


def _read(buf, t):
    h = buf.copy_to_host().view(ml_dtypes.bfloat16)
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * 2 for s in t.strides]).astype(np.float64)


def _run(rng, dims, wdims, split, tile, stride=(1, 1), pad=(1, 1)):
    g, (x, w, b, y) = _graph(dims, wdims, stride, pad)
    cx = _ctx()
    eng = registry.by_name("conv_tc")
    cfg = eng.default_config(api.problem(g)).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile) \
        .with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, split)
    assert api.check_support(g, cfg, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, cfg, cx)
    xv = rng.uniform(-1, 1, x.dims).astype(ml_dtypes.bfloat16)
    wv = (rng.uniform(-1, 1, w.dims) / np.sqrt(np.prod(w.dims[1:]))).astype(ml_dtypes.bfloat16)
    bv = rng.uniform(-1, 1, b.dims).astype(ml_dtypes.bfloat16)
    out = _dev(np.full(y.dims, np.nan, ml_dtypes.bfloat16), y)
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8))    # NaN partials unless overwritten
    api.execute(plan, {1: _dev(xv, x), 2: _dev(wv, w), 3: _dev(bv, b), 4: out}, ws)
    f = lambda a: a.astype(np.float64)  # noqa: E731
    expect = np.maximum(ref.conv_fprop(f(xv), f(wv), stride=stride, pre_pad=pad, post_pad=pad, dilation=(1, 1))
                        + f(bv), 0)
    got = _read(out, y)
    assert rel_err(got, expect) < 1e-2
    assert_close(got, expect, "bfloat16")
    return plan


def test_tsk_engine_split3_c32(rng):
    """v4 gather, 9 k tiles in 3 slices; the workspace holds exactly the partials."""
    plan = _run(rng, (1, 32, 4, 4), (32, 32, 3, 3), 3, len(TILES) - 1)
    assert plan.workspace_size == 3 * 16 * 32 * 4 and plan.parts[0].vec


def test_tsk_engine_stem_padded_split(rng):
    """C = 3 zero-padded to 8 in the workspace, then split 4 (K = 7*7*8 = 392: 13 k tiles, the last slice
    short): the partials sit after the padded copies."""
    _run(rng, (1, 3, 7, 7), (16, 3, 7, 7), 4, len(TILES) - 1, stride=(2, 2), pad=(3, 3))


def test_tsk_engine_generic_reduce_k18(rng):
    """18 output channels (N % 4 != 0): the generic one-thread-an-output reduce; 5 k tiles in 2 slices."""
    plan = _run(rng, (1, 16, 4, 3), (18, 16, 3, 3), 2, len(TILES) - 1)
    assert not plan.parts[0].vec and plan.parts[0].reduce is not None


def test_tsk_keep_and_knob():
    eng = registry.by_name("conv_tc")
    g, _ = _graph((1, 32, 4, 4), (32, 32, 3, 3))
    sub = api.problem(g)
    assert any(k.type == K.CUDNN_KNOB_TYPE_SPLIT_K for k in eng.knobs(sub))
    d = eng.default_config(sub)
    assert d.get(K.CUDNN_KNOB_TYPE_SPLIT_K) == 1 and eng.workspace_size(sub, d) == 0
    st, why = eng.keep(sub, d.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, 6), _ctx())    # 9 k tiles of 32 at 288
    assert st == S.CUDNN_STATUS_SUCCESS, why
    g, _ = _graph((1, 8, 4, 4), (32, 8, 3, 3))                                     # K = 72: 3 k tiles
    sub = api.problem(g)
    st, why = eng.keep(sub, eng.default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, 4), _ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "k tiles" in why


#: (name, N, C, H, K, R, stride, pad) of the bench's BF16 conv set at N = 32
LAYERS = (("c2_3x3_64", 64, 56, 64, 3, 1, 1), ("c3_3x3_128", 128, 28, 128, 3, 1, 1),
          ("c4_3x3_256", 256, 14, 256, 3, 1, 1), ("c5_3x3_512", 512, 7, 512, 3, 1, 1),
          ("seed_3x3_128_256", 128, 56, 256, 3, 1, 1), ("c2_1x1_256_64", 256, 56, 64, 1, 1, 0),
          ("c2_1x1_64_256", 64, 56, 256, 1, 1, 0), ("stem_7x7_s2", 3, 224, 64, 7, 2, 3))


def first_picks(N=32):
    """conv_tc's first candidate (tile label, SPLIT_K, CTAs) per layer at the nominal H200."""
    eng = registry.by_name("conv_tc")
    out = {}
    for name, C, H, Kc, R, st, pad in LAYERS:
        g, _ = _graph((N, C, H, H), (Kc, C, R, R), (st, st), (pad, pad))
        sub = api.problem(g)
        c = eng.candidates(sub, _ctx(H200))[0]
        t = TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)]
        P = (H + 2 * pad - R) // st + 1
        ctas = -(-N * P * P // t.cfg.BLOCK_M) * -(-Kc // t.cfg.BLOCK_N) * c.get(K.CUDNN_KNOB_TYPE_SPLIT_K)
        out[name] = (t.label, c.get(K.CUDNN_KNOB_TYPE_SPLIT_K), ctas)
    return out


def test_tsk_h200_ranking_small_spatial():
    """The picks the H200 probe measured best (experiments/probe_tc_splitk.py, 2026-11-30): c5 split 5 ways on
    128x256 tiles with the vector reduce (0.0529 ms against 0.0594 for 64x64 unsplit), small tiles filling
    the SMs for c4 / c3 (a split reduce cost more than it saved there); the large layers keep theirs."""
    picks = first_picks()
    assert picks["c5_3x3_512"] == ("128x256x32 w2x4", 5, 130), picks
    assert picks["c4_3x3_256"] == ("64x64x32 w2x2", 1, 392), picks
    assert picks["c3_3x3_128"][:2] == ("64x128x32 w2x2", 1), picks
    before = {"c2_3x3_64": "128x64x32 w2x2", "seed_3x3_128_256": "128x128x32 w2x4", "c2_1x1_256_64": "128x64x32 w2x2",
              "c2_1x1_64_256": "128x128x32 w2x4", "stem_7x7_s2": "128x64x32 w2x2"}
    for big, label in before.items():
        assert picks[big][:2] == (label, 1), (big, picks)


def test_tsk_h200_ranking_splits_batch1():
    """At N = 1 the 7x7 / 14x14 layers have a few CTAs: the ranking splits K."""
    picks = first_picks(N=1)
    for name in ("c5_3x3_512", "c4_3x3_256"):
        label, split, ctas = picks[name]
        assert split > 1 and ctas > split, picks


@pytest.mark.gpu
@pytest.mark.parametrize("layer,split", [("c5", 2), ("c5", 5), ("c5", 6), ("c4", 3)])
def test_gpu_tsk_resnet_split(rng, layer, split):
    """The ResNet layer at N = 8 (tiny under the simulator; the float64 oracle takes ~3 s a layer at N = 8) with
    the 128x128 tile and this split."""
    C, H = {"c5": (512, 7), "c4": (256, 14)}[layer]
    dims, wdims = size(((1, 32, 4, 4), (32, 32, 3, 3)), ((8, C, H, H), (C, C, 3, 3)))
    _run(rng, dims, wdims, split, 0 if dims[0] > 1 else len(TILES) - 1)
