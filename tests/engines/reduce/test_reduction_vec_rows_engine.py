"""Engine "reduction" with the vector row kernel, through the engine API, against the float64 oracle:
hand-picked knob configs (warp / block per row, unroll, split grids), and the element-load fallback
when the input buffer is not 16-byte aligned."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as R
from ncudnn.engines import api
from ncudnn.engines.reduce import reduction as RE
from ncudnn.ir import OpGraph, Reduction, TensorDesc, packed_strides
from ncudnn.testing import assert_close
from ncudnn.types import cudnnDataType_t as DT, cudnnReduceTensorOp_t as RO

F32 = DT.CUDNN_DATA_FLOAT


def _graph(mode, xd, yd):
    x = TensorDesc(1, xd, packed_strides(xd), F32, name="x")
    y = TensorDesc(2, yd, packed_strides(yd), F32, name="y")
    return OpGraph([Reduction("red", {"X": x}, {"Y": y}, mode=mode)]).finalize()


def _execute(g, cfg, x_dev, n_out):
    plan = api.build_plan(g, cfg)
    out = cuda.to_device(np.full(n_out, np.nan, np.float32))
    ws = cuda.to_device(np.full(max(plan.workspace_size, 1), 0xA5, np.uint8)) if plan.workspace_size else None
    api.execute(plan, {1: x_dev, 2: out}, ws)
    return plan, out.copy_to_host()


def _cfg(g, knobs):
    """The automatic config (every knob 0) with ``knobs`` set."""
    cfg = api.get_heuristics(g)[0].config
    assert cfg.engine == "reduction"
    for k in (RE.KB, RE.KS, RE.KL, RE.KR, RE.KU, RE.KC):
        cfg = cfg.with_knob(k, 0)
    for k, v in knobs.items():
        cfg = cfg.with_knob(k, v)
    return cfg


ROW_KNOBS = [{}, {RE.KL: 1}, {RE.KB: 64, RE.KU: 4}, {RE.KR: 2, RE.KU: 2}, {RE.KR: 4, RE.KU: 8}]


@pytest.mark.parametrize("knobs", ROW_KNOBS, ids=["auto", "elem", "block64_u4", "warp2_u2", "warp4_u8"])
def test_krd_engine_rows(rng, knobs):
    xd, yd = (5, 264, 1, 1), (5, 1, 1, 1)
    a = rng.standard_normal(xd).astype(np.float32)
    g = _graph(RO.CUDNN_REDUCE_TENSOR_ADD, xd, yd)
    plan, out = _execute(g, _cfg(g, knobs), cuda.to_device(a.reshape(-1)), 5)
    assert plan.engine_names == ["reduction"]
    assert_close(out.reshape(yd), R.reduction(RO.CUDNN_REDUCE_TENSOR_ADD, a.astype(np.float64), yd), "float32")


@pytest.mark.parametrize("knobs", [{}, {RE.KB: 64, RE.KC: 2}, {RE.KB: 32, RE.KU: 8, RE.KC: 3}],
                         ids=["auto", "b64_ctas2", "b32_u8_ctas3"])
def test_krd_engine_amax_whole_tensor(rng, knobs):
    xd, yd = (6, 256, 1, 1), (1, 1, 1, 1)
    a = rng.standard_normal(xd).astype(np.float32)
    g = _graph(RO.CUDNN_REDUCE_TENSOR_AMAX, xd, yd)
    plan, out = _execute(g, _cfg(g, knobs), cuda.to_device(a.reshape(-1)), 1)
    assert plan.workspace_size > 0     # split grid: partials, then the block combine
    assert_close(out.reshape(yd), np.abs(a.astype(np.float64)).max().reshape(yd), "float32")


def test_krd_engine_misaligned_input_runs_the_element_twin(rng):
    xd, yd = (3, 128, 1, 1), (3, 1, 1, 1)
    a = rng.standard_normal(xd).astype(np.float32)
    buf = cuda.to_device(np.concatenate([np.full(1, np.nan, np.float32), a.reshape(-1)]))
    x_dev = buf[1:]                     # 4 bytes past a 16-byte boundary
    g = _graph(RO.CUDNN_REDUCE_TENSOR_MAX, xd, yd)
    plan, out = _execute(g, _cfg(g, {}), x_dev, 3)
    step = plan.parts[0].steps[0]
    assert step.align and step.fallback is not None
    assert_close(out.reshape(yd), a.astype(np.float64).max(axis=1).reshape(yd), "float32")


def test_krd_engine_keep_rejects_with_reason():
    g = _graph(RO.CUDNN_REDUCE_TENSOR_ADD, (4, 256, 1, 1), (4, 1, 1, 1))
    st, why = api.check_support(g, _cfg(g, {RE.KR: 4, RE.KB: 256}))
    assert int(st) != 0 and "TILE_ROWS" in why
