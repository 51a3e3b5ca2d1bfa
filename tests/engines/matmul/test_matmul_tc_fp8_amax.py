"""FP8 matmul with an amax output through engine matmul_tc (cudnn-frontend's FP8 pattern): matmul(A, B)
* descale_a * descale_b = X; amax = REDUCTION AMAX(X); D = X * scale_d cast to FP8. The partition splits
it (X feeds two nodes); matmul_tc takes the composite problem whole and runs one kernel whose epilogue
computes max |X| (after a one-thread launch zeroing the amax tensor). Simulator at tiny shapes, real
shapes with NCUDNN_SHAPES=gpu; float64 oracle, poisoned outputs (amax poisoned with NaN)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.matmul.tc import TILES
from ncudnn.engines.plan import ExecutionPlan
from ncudnn.ir import Matmul, OpGraph, Pointwise, Reduction, TensorDesc
from ncudnn.testing import SIM, size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnDataType_t as DT
from ncudnn.types import cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO, cudnnStatus_t as S
from test_matmul_tc_fp8 import E4, E5, F32, NP, POISON, STORE, SIM_TILE, ctx, read, scalar, tensor, to_dev


def amax_graph(bsz, m, n, k, in_dt, out_dt, scales, device=(False, False, False), post_relu=False):
    """matmul(A, B stored (n, k)) * descale_a * descale_b -> X; amax(X); X * scale_d [-> relu] -> out.
    ``device[i]``: scale i is a one-element FP32 device tensor (uid 5 + i), else by value."""
    a = tensor(1, (bsz, m, k), in_dt)
    b = tensor(2, (bsz, k, n), in_dt, (n * k, 1, k))
    out = tensor(4, (bsz, m, n), out_dt)
    am = tensor(8, (1, 1, 1), F32)
    mm = Matmul("mm", {"A": a, "B": b}, {"C": TensorDesc(10, is_virtual=True)}, compute_dtype=F32)
    ts = {"A": a, "B": b, "out": out, "amax": am}
    sc = []
    for i in range(3):
        t = tensor(5 + i, (1, 1, 1), F32) if device[i] else scalar(5 + i, scales[i])
        if device[i]:
            ts[f"scale{i}"] = t
        sc.append(t)
    x1 = TensorDesc(11, is_virtual=True)
    x = TensorDesc(12, is_virtual=True)
    nodes = [mm, Pointwise("descale_a", {"X": mm.outputs["C"], "B": sc[0]}, {"Y": x1}, mode=PM.CUDNN_POINTWISE_MUL),
             Pointwise("descale_b", {"X": x1, "B": sc[1]}, {"Y": x}, mode=PM.CUDNN_POINTWISE_MUL),
             Reduction("amax", {"X": x}, {"Y": am}, mode=RO.CUDNN_REDUCE_TENSOR_AMAX)]
    if post_relu:
        y = TensorDesc(13, is_virtual=True)
        nodes += [Pointwise("scale_d", {"X": x, "B": sc[2]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_MUL),
                  Pointwise("relu", {"X": y}, {"Y": out}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]
    else:
        nodes.append(Pointwise("scale_d", {"X": x, "B": sc[2]}, {"Y": out}, mode=PM.CUDNN_POINTWISE_MUL))
    return OpGraph(nodes).finalize(), ts


def run(rng, g, ts, in_dt, scales, tile=None):
    eng = registry.by_name("matmul_tc")
    cx = ctx()
    sub = api.problem(g)
    assert sub.kind == "composite"
    assert eng.check_support(sub, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    # the engine's own ranking and build, in an ExecutionPlan (test_through_the_api: the same via api)
    cfg = eng.candidates(sub, cx)[0]
    tile = SIM_TILE if SIM and tile is None else tile
    if tile is not None:
        cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile).with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages)
    assert eng.keep(sub, cfg, cx)[0] == S.CUDNN_STATUS_SUCCESS and eng.workspace_size(sub, cfg) == 0
    plan = ExecutionPlan(g, [eng.build(sub, cfg, cx)], ())
    return check(rng, plan, ts, in_dt, scales)


def check(rng, plan, ts, in_dt, scales):
    """Run ``plan`` twice on fresh random FP8 operands; the amax and the FP8 output against the oracle."""
    assert plan.engine_names == ["matmul_tc"] and plan.workspace_size == 0
    a, b, out = ts["A"], ts["B"], ts["out"]
    av = (rng.standard_normal(a.dims) * 2).astype(NP[a.dtype])
    bv = (rng.standard_normal(b.dims) * 2).astype(NP[in_dt])
    bufs = {1: to_dev(av, a), 2: to_dev(bv, b),
            4: cuda.to_device(np.full(out.span_elements(), POISON[out.dtype], STORE[out.dtype])),
            8: cuda.to_device(np.full(1, np.nan, np.float32))}
    for i in range(3):
        if f"scale{i}" in ts:
            bufs[5 + i] = cuda.to_device(np.full(1, scales[i], np.float32))
    x = np.float64(scales[0]) * scales[1] * np.matmul(av.astype(np.float64), bv.astype(np.float64))
    for _ in range(2):      # twice: the amax restarts from zero on every execution
        plan.execute(bufs)
    got_amax = float(bufs[8].copy_to_host()[0])
    want = float(np.abs(x).max())
    assert abs(got_amax - want) <= 2.0 ** -20 * want, (got_amax, want)
    d = x * scales[2]
    got = read(bufs[4], out)
    ref = d.astype(NP[out.dtype]).astype(np.float64)
    # one output step: relative for normals, the subnormal spacing below the smallest normal (an FP32 sum in
    # another order may round a value near a midpoint the other way: 1 of 407,680 did at 2x520x392x1024)
    step, tiny = {E4: (2.0 ** -3, 2.0 ** -9), E5: (2.0 ** -2, 2.0 ** -16)}[out.dtype]
    bad = np.abs(got - ref) > np.maximum(step * np.abs(d), tiny) + 1e-6
    assert not bad.any(), f"{bad.sum()} of {bad.size} off"
    assert (got == ref).mean() > 0.97
    return plan


@pytest.mark.parametrize("in_dt,device", [(E4, (False, False, False)), (E5, (True, True, True))],
                         ids=["e4m3_by_value", "e5m2_device_scales"])
def test_fp8_amax_one_kernel(rng, in_dt, device):
    bsz, m, n, k = size((1, 24, 40, 64), (2, 520, 392, 1024))
    scales = (0.5, 0.25, 0.125)
    g, ts = amax_graph(bsz, m, n, k, in_dt, E4, scales, device)
    run(rng, g, ts, in_dt, scales)


def test_amax_pattern_refusals():
    eng = registry.by_name("matmul_tc")
    g, _ = amax_graph(1, 32, 32, 64, E4, E4, (1.0, 1.0, 1.0), post_relu=True)
    st, why = eng.check_support(api.problem(g), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN and "node 'relu'" in why, why
    g, _ = amax_graph(1, 32, 32, 64, DT.CUDNN_DATA_BFLOAT16, E4, (1.0, 1.0, 1.0))
    st, why = eng.check_support(api.problem(g), ctx())
    assert st != S.CUDNN_STATUS_SUCCESS and why


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [i for i in range(len(TILES) - 1) if i not in (0, 1, 2)],
                         ids=lambda i: TILES[i].label.replace(" ", "_"))
def test_gpu_amax_every_tile(rng, tile):
    scales = (0.5, 0.25, 0.125)
    g, ts = amax_graph(2, 520, 392, 1024, E4, E4, scales, (True, False, True))
    run(rng, g, ts, E4, scales, tile=tile)


def amax_kernel(tile):
    """(kernel dispatcher, argument types) of matmul_tc's amax plan for a 1024^3 e4m3 graph (descale_a and
    scale_d device tensors) at TILE_SIZE ``tile`` (for the sm_90 compile check)."""
    from ncudnn.engines.gemm import common as gc

    scales = (0.5, 0.25, 0.125)
    g, _ = amax_graph(1, 1024, 1024, 1024, E4, E4, scales, (True, False, True))
    eng = registry.by_name("matmul_tc")
    sub = api.problem(g)
    cfg = eng.default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile) \
        .with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages)
    kern, typing, _ = eng.kernel(sub, cfg)
    return kern.kernel, gc.argtypes(typing)


def sm90_amax_kernel(tile):
    return amax_kernel(tile)[0]


def sm90_amax_sig(_kernel):
    return amax_kernel(3)[1]


@pytest.mark.slow
def test_amax_kernel_compiles_for_sm90(monkeypatch):
    import os

    from ncudnn.kernels.runtime import kcache

    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = kcache.resource_usage_subprocess("test_matmul_tc_fp8_amax:sm90_amax_kernel", "test_matmul_tc_fp8_amax:sm90_amax_sig", args=(3,),
                                         cc=(9, 0), timeout=900)
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
    assert not r["local"] and not r["stack_frame"], r
    assert r["registers"] <= 255, r


def test_through_the_api(rng):
    # get_heuristics ranks engines taking the composite problem whole (matmul_tc) before the composite engine's
    # plan of parts (refused here: no engine reduces the FP8 intermediate); build_plan builds it as one part
    scales = (0.5, 0.25, 0.125)
    g, ts = amax_graph(*size((1, 24, 40, 64), (2, 520, 392, 1024)), E4, E4, scales, (True, False, False))
    cx = ctx()
    ranked = api.get_heuristics(g, ctx=cx)
    assert ranked and ranked[0].engine.name == "matmul_tc"
    assert "matmul_tc" in [e.name for e in api.supported_engines(g, cx)]
    cfg = ranked[0]
    if SIM:
        cfg = api.engine_config_from_json({"engine": "matmul_tc", "config": ranked[0].config.with_knob(
            K.CUDNN_KNOB_TYPE_TILE_SIZE, SIM_TILE).with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[SIM_TILE].stages)
            .to_json()}, g, cx)
    assert api.check_support(g, cfg, cx)[0] == S.CUDNN_STATUS_SUCCESS
    check(rng, api.build_plan(g, cfg, cx), ts, E4, scales)
    assert api.check_support(g, "conv_tc", cx)[0] != S.CUDNN_STATUS_SUCCESS
