"""Packed-NHWC batch norm on the colsv kernels (one geometry for the statistics and apply passes, VEC 4
or 1 channels per thread, reverse / streaming-hint apply): every KERNEL_CFG variant through the engine
API, forward training (saved mean / inv-var, running statistics) and backward (dx, dscale, dbias),
against the float64 oracle with poisoned outputs; several chunks with a ragged last one."""
import pytest

from ncudnn.engines import api
from ncudnn.engines.norm.batch import cols_info
from ncudnn.engines.norm.bn_steps import COLS_LABELS, COLS_VARIANTS
from ncudnn.ir import NormBwd, NormFwd, OpGraph
from ncudnn.kernels.norm import bn_colsv as kv
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnBackendNormFwdPhase_t as PH
from ncudnn.types import cudnnBackendNormMode_t as NM

import membound_util as U
from test_norm_batch_engine import _execute

H, W = 5, 7


def _nhwc(n, c):
    return (H * W * c, 1, W * c, c)


def _fwd(n, c, dtype=U.F32):
    xs = _nhwc(n, c)
    v = lambda uid, name: U.t(uid, (1, c, 1, 1), name=name)  # noqa: E731
    ins = {"X": U.t(1, (n, c, H, W), dtype, xs, "x"), "SCALE": v(2, "scale"), "BIAS": v(3, "bias"),
           "INPUT_RUNNING_MEAN": v(4, "rm"), "INPUT_RUNNING_VAR": v(5, "rv"),
           "EPSILON": U.scalar(8, 1e-3), "EXP_AVG_FACTOR": U.scalar(9, 0.3)}
    outs = {"Y": U.t(10, (n, c, H, W), dtype, xs, "y"), "MEAN": v(11, "mean"), "INV_VARIANCE": v(12, "inv"),
            "OUTPUT_RUNNING_MEAN": v(13, "rm_out"), "OUTPUT_RUNNING_VAR": v(14, "rv_out")}
    return OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()


def _bwd(n, c, dtype=U.F32):
    xs = _nhwc(n, c)
    v = lambda uid, name: U.t(uid, (1, c, 1, 1), name=name)  # noqa: E731
    ins = {"X": U.t(1, (n, c, H, W), dtype, xs, "x"), "DY": U.t(2, (n, c, H, W), dtype, xs, "dy"),
           "SCALE": v(3, "scale"), "MEAN": v(4, "mean"), "INV_VARIANCE": v(5, "inv")}
    outs = {"DX": U.t(10, (n, c, H, W), dtype, xs, "dx"), "DSCALE": v(11, "dscale"), "DBIAS": v(12, "dbias")}
    return OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_BATCH_NORM)]).finalize()


def _cfg(g, variant, occ=0, unroll=2):
    first = api.get_heuristics(g)[0].config
    assert first.engine == "norm_batch"
    cfg = first.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, variant).with_knob(K.CUDNN_KNOB_TYPE_OCCUPANCY, occ)
    return cfg.with_knob(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, unroll)


def _check_steps(plan, chunks_min=2):
    steps = plan.parts[0].steps
    assert steps[0].name == "norm_bn_colsv_partial" and steps[-1].name == "norm_bn_colsv_apply"
    fin = COLS_VARIANTS[plan.parts[0].config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG)][3]
    assert len(steps) == (3 if fin else 4) and (steps[1].name.startswith("norm_bn_fin") == fin)
    assert steps[0].grid == steps[-1].grid and steps[0].grid[1] >= chunks_min   # one geometry, several chunks


@pytest.mark.parametrize("variant", [1, 2, 3, 5, 6, 7])
def test_bnf_colsv_forward_vec4(rng, variant):
    g = _fwd(2, 64)          # rows 70: TXV 16 x TY 16, unroll 2 -> 3 chunks of 24 rows (last one 22)
    plan = _execute(g, rng, positive=("INPUT_RUNNING_VAR",), ec=_cfg(g, variant))
    _check_steps(plan)


@pytest.mark.parametrize("variant", [1, 3, 6])
def test_bnf_colsv_backward_vec4(rng, variant):
    g = _bwd(2, 64)
    plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=_cfg(g, variant))
    _check_steps(plan)


def test_bnf_colsv_vec1_odd_channels(rng):
    """C = 7: VEC 1 (the 16-byte variants are refused), reverse apply, forward and backward."""
    g = _fwd(2, 7)
    assert cols_info(api.problem(g)) is not None and not cols_info(api.problem(g))[1]
    plan = _execute(g, rng, positive=("INPUT_RUNNING_VAR",), ec=_cfg(g, 4))
    _check_steps(plan)
    gb = _bwd(2, 7)
    plan = _execute(gb, rng, positive=("INV_VARIANCE",), ec=_cfg(gb, 4))
    _check_steps(plan)
    plan = _execute(gb, rng, positive=("INV_VARIANCE",), ec=_cfg(gb, 8))     # fused combine + weights
    _check_steps(plan)
    st, why = api.check_support(g, _cfg(g, 1))
    assert int(st) != 0 and "16-byte" in why


def test_bnf_colsv_default_and_candidates():
    g = _fwd(32, 256)
    first = api.get_heuristics(g)[0].config
    assert COLS_VARIANTS[first.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG)][:2] == (4, True), COLS_LABELS
    cands = [c.config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) for c in api.get_heuristics(g)]
    one_kernel = {i for i, v in enumerate(COLS_VARIANTS) if v is not None and len(v) > 6}   # backward only
    assert one_kernel and set(range(len(COLS_VARIANTS))) - one_kernel <= set(cands) and not one_kernel & set(cands)
    g7 = _fwd(2, 7)    # C % 4 != 0: no 16-byte variant is offered
    assert {c.config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) for c in api.get_heuristics(g7)} == {0, 4, 8}
    assert api.get_heuristics(g7)[0].config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) == 0


def test_bnf_colsv_geometry():
    g = kv.colsv_config(100352, 256, 132, vec=4, blocks_per_sm=5, unroll=4)
    assert (g.txv, g.ty, g.tiles) == (32, 8, 2)
    assert g.chunks * g.tiles <= 132 * 5 and g.chunks * g.chunk_rows >= 100352
    g = kv.colsv_config(70, 7, 132, vec=1, blocks_per_sm=4, unroll=2)
    assert (g.txv, g.ty, g.tiles) == (8, 32, 1) and g.chunks == 2


@pytest.mark.parametrize("phase", ["fwd", "bwd"])
def test_bnf_planes_reverse_order(rng, monkeypatch, phase):
    """NCHW, KERNEL_CFG planes_rev: the apply blocks take the planes in the reverse of the statistics
    pass's order; 1 SM modelled: 2 chunks of 3 samples over N = 5 (one empty slot)."""
    from ncudnn.kernels.primitives import warp as kprim
    monkeypatch.setattr(kprim, "sm_count", lambda *a, **k: 1)
    n, c = 5, 3
    xs = (c * H * W, H * W, W, 1)
    v = lambda uid, name: U.t(uid, (1, c, 1, 1), name=name)  # noqa: E731
    img = lambda uid, name: U.t(uid, (n, c, H, W), U.F32, xs, name)  # noqa: E731
    if phase == "fwd":
        ins = {"X": img(1, "x"), "SCALE": v(2, "scale"), "BIAS": v(3, "bias"), "INPUT_RUNNING_MEAN": v(4, "rm"),
               "INPUT_RUNNING_VAR": v(5, "rv"), "EPSILON": U.scalar(8, 1e-3), "EXP_AVG_FACTOR": U.scalar(9, 0.3)}
        outs = {"Y": img(10, "y"), "MEAN": v(11, "mean"), "INV_VARIANCE": v(12, "inv"),
                "OUTPUT_RUNNING_MEAN": v(13, "rm_out"), "OUTPUT_RUNNING_VAR": v(14, "rv_out")}
        g = OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
        pos = ("INPUT_RUNNING_VAR",)
    else:
        ins = {"X": img(1, "x"), "DY": img(2, "dy"), "SCALE": v(3, "scale"), "MEAN": v(4, "mean"),
               "INV_VARIANCE": v(5, "inv")}
        outs = {"DX": img(10, "dx"), "DSCALE": v(11, "dscale"), "DBIAS": v(12, "dbias")}
        g = OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_BATCH_NORM)]).finalize()
        pos = ("INV_VARIANCE",)
    first = api.get_heuristics(g)[0].config
    assert first.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) == 0          # the measured order stays the default
    plan = _execute(g, rng, positive=pos, ec=first.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 1))
    steps = plan.parts[0].steps
    assert steps[0].name == "norm_bn_planes_partial" and steps[0].grid == (c, 2)
    assert steps[-1].name == "norm_bn_planes_apply" and steps[-1].grid[0] == 2 * 3 * c


def test_bnf_colsv_combine_many_chunks(rng):
    """The unrolled chunk combine: 37 chunks over 4 thread rows (unrolled loop and tail), 40 channels."""
    import numpy as np
    from numba import cuda
    from ncudnn.testing import assert_close, poison_value
    chunks, C = 37, 40
    p0, p1 = rng.standard_normal((chunks, C)), rng.standard_normal((chunks, C))
    d0, d1 = cuda.to_device(p0.astype(np.float32).ravel()), cuda.to_device(p1.astype(np.float32).ravel())
    o0 = cuda.to_device(np.full(C, poison_value("float32"), np.float32))
    o1 = cuda.to_device(np.full(C, poison_value("float32"), np.float32))
    kern = kv.combine_kernel("float32", 4)[0]
    kern[(2,), (32, 4)](d0, d1, o0, o1, chunks, C)
    assert_close(o0.copy_to_host(), p0.astype(np.float32).astype(np.float64).sum(0), "float32", name="out0")
    assert_close(o1.copy_to_host(), p1.astype(np.float32).astype(np.float64).sum(0), "float32", name="out1")


def test_bnf_colsv_misaligned_buffers_take_the_twin(rng):
    """x and y 4 bytes off a 16-byte boundary: the VEC 4 steps run their VEC 1 twins (same chunks)."""
    import numpy as np
    from numba import cuda
    from ncudnn.reference.ops import run_node
    from ncudnn.testing import assert_close, poison_value
    g = _fwd(2, 64)
    node = g.nodes[0]
    xd, yd = node.inputs["X"], node.outputs["Y"]
    span = 2 * 64 * H * W
    xv = rng.uniform(-1, 1, (2, 64, H, W))
    host = np.full(span + 1, poison_value("float32"), np.float32)
    np.lib.stride_tricks.as_strided(host[1:], xd.dims, [s * 4 for s in xd.strides])[...] = xv
    xbuf = cuda.to_device(host)[1:]
    ybuf = cuda.to_device(np.full(span + 1, poison_value("float32"), np.float32))[1:]
    vals = {"X": U.cast(xv, xd.dtype), "EPSILON": np.float64(1e-3), "EXP_AVG_FACTOR": np.float64(0.3)}
    pack = {xd.uid: xbuf, yd.uid: ybuf}
    for p in ("SCALE", "BIAS", "INPUT_RUNNING_MEAN", "INPUT_RUNNING_VAR"):
        t = node.inputs[p]
        a = rng.uniform(0.5, 2.0, t.dims) if p == "INPUT_RUNNING_VAR" else rng.uniform(-1, 1, t.dims)
        vals[p], pack[t.uid] = U.cast(a, t.dtype), U.upload(a, t)
    for p, t in node.outputs.items():
        if p != "Y":
            pack[t.uid] = U.poisoned(t)
    from ncudnn import memory
    assert memory.as_view(xbuf).ptr % 16 == 4 and memory.as_view(ybuf).ptr % 16 == 4
    plan = U.run_ec(g, pack, _cfg(g, 1))
    steps = plan.parts[0].steps
    assert steps[0].align and steps[0].fallback.key != steps[0].key and steps[-1].fallback is not None
    ref = run_node(node, vals)
    y = np.lib.stride_tricks.as_strided(ybuf.copy_to_host(), yd.dims, [s * 4 for s in yd.strides])
    assert_close(y.astype(np.float64), ref["Y"], "float32", name="y")
    for p in ("MEAN", "INV_VARIANCE", "OUTPUT_RUNNING_MEAN", "OUTPUT_RUNNING_VAR"):
        t = node.outputs[p]
        assert_close(U.download(pack[t.uid], t), ref[p], "float32", name=p)


def test_bnf_colsv_fin_device_scalars(rng):
    """EPSILON and EXP_AVG_FACTOR as one-element device tensors, read inside the fused kernel."""
    g0 = _fwd(2, 64)
    node = g0.nodes[0]
    ins = dict(node.inputs, EPSILON=U.t(8, (1, 1, 1, 1), name="eps"), EXP_AVG_FACTOR=U.t(9, (1, 1, 1, 1), name="mom"))
    g = OpGraph([NormFwd("bn", ins, dict(node.outputs), mode=NM.CUDNN_BATCH_NORM,
                         phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    plan = _execute(g, rng, positive=("INPUT_RUNNING_VAR", "EPSILON", "EXP_AVG_FACTOR"), ec=_cfg(g, 6))
    _check_steps(plan)


@pytest.mark.parametrize("variant", [6, 8])
def test_bnf_colsv_fin_in_place(rng, variant):
    """y in x's buffer: the fused kernels read K from the coefficient scratch, so a chunk whose apply
    block has already rewritten row 0 cannot change another block's K (the simulator runs blocks in order)."""
    import numpy as np
    from ncudnn.reference.ops import run_node
    from ncudnn.testing import assert_close
    c = 64 if variant == 6 else 7
    g = _fwd(2, c)
    node = g.nodes[0]
    xd, yd = node.inputs["X"], node.outputs["Y"]
    vals = {"EPSILON": np.float64(1e-3), "EXP_AVG_FACTOR": np.float64(0.3)}
    pack = {}
    for p in ("X", "SCALE", "BIAS", "INPUT_RUNNING_MEAN", "INPUT_RUNNING_VAR"):
        t = node.inputs[p]
        a = rng.uniform(0.5, 2.0, t.dims) if p == "INPUT_RUNNING_VAR" else rng.uniform(-1, 1, t.dims) + (3 if p == "X" else 0)
        vals[p], pack[t.uid] = U.cast(a, t.dtype), U.upload(a, t)
    pack[yd.uid] = pack[xd.uid]
    for p, t in node.outputs.items():
        if p != "Y":
            pack[t.uid] = U.poisoned(t)
    plan = U.run_ec(g, pack, _cfg(g, variant))
    _check_steps(plan)
    ref = run_node(node, vals)
    assert_close(U.download(pack[yd.uid], yd), ref["Y"], "float32", name="y")
    assert_close(U.download(pack[node.outputs["MEAN"].uid], node.outputs["MEAN"]), ref["MEAN"], "float32", name="mean")
