"""The full pipeline on a pointwise-only graph in the simulator (numba device arrays), against a float64
NumPy oracle: variant packs by tensor / uid / name, by-value scalars, several plans, filters, autotune,
serialize / deserialize, and the numbered build-step log."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.reference import pointwise as ref_pointwise
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.types import cudnnPointwiseMode_t as M, cudnnStatus_t as S

from fe_oracle import has_engine

SHAPE = size([2, 3, 4, 5], [8, 64, 56, 56])
NHWC = [SHAPE[1] * SHAPE[2] * SHAPE[3], 1, SHAPE[3] * SHAPE[1], SHAPE[1]]
SLOPE = 0.1


def strided_device(a, strides):
    """A device buffer holding ``a`` at element ``strides`` (channels-last here)."""
    order = sorted(range(a.ndim), key=lambda i: -strides[i])
    return cuda.to_device(np.ascontiguousarray(a.transpose(order)).reshape(-1))


def read_strided(buf, shape, strides):
    host = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(host, shape, [s * host.itemsize for s in strides]).copy()


def poisoned(shape, strides, dtype=np.float32):
    n = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    return cuda.to_device(np.full(n, poison_value(dtype), dtype))


def bias_scale_relu_graph():
    g = cudnn.pygraph(name="bias_scale_relu", io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=SHAPE, stride=NHWC)
    B = g.tensor(name="B", dim=[1, SHAPE[1], 1, 1], stride=[SHAPE[1], 1, SHAPE[1], SHAPE[1]])
    s = g.tensor(name="s", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                 data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=g.scale(input=g.bias(input=X, bias=B), scale=s), negative_slope=SLOPE)
    Y.set_output(True)
    return g, X, B, s, Y


def oracle(x, b, scale):
    z = (x.astype(np.float64) + b) * scale
    return ref_pointwise(M.CUDNN_POINTWISE_RELU_FWD, z, relu_lower_clip_slope=SLOPE)


@pytest.fixture
def data(rng):
    x = random(rng, SHAPE)
    b = random(rng, [1, SHAPE[1], 1, 1])
    return x, b, float(rng.uniform(0.5, 2.0))


def run(g, pack_keys, x, b, scale, **kw):
    g_, X, B, s, Y = pack_keys
    yd = poisoned(Y.get_dim(), Y.get_stride())
    pack = {X: strided_device(x, X.get_stride()), B: cuda.to_device(b), s: scale, Y: yd}
    g.execute(pack, None, **kw)
    return read_strided(yd, Y.get_dim(), Y.get_stride())


def test_pipeline_executes_pointwise_graph(data):
    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    assert g.get_execution_plan_count() >= 1
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    assert g.get_workspace_size() == 0
    assert Y.get_stride() == NHWC
    y = run(g, (g, X, B, s, Y), x, b, scale)
    assert_close(y, oracle(x, b, scale), "float32")


def test_graph_oracle_matches_numpy(data):
    from fe_oracle import graph_oracle

    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.validate()
    vals = graph_oracle(g, {X.get_uid(): x, B.get_uid(): b, s.get_uid(): scale})
    assert_close(vals[Y.get_uid()], oracle(x, b, scale), "float64")


def test_variant_pack_by_uid_and_name_and_numpy_scalar(data):
    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.build([cudnn.heur_mode.A])
    yd = poisoned(Y.get_dim(), Y.get_stride())
    from ncudnn.memory import device_pointer

    xd = strided_device(x, NHWC)
    pack = {X.get_uid(): device_pointer(xd), "B": cuda.to_device(b), s.get_uid(): np.array([scale]),
            "relu.0::OUT_0": yd}  # a raw device pointer, a uid, names, a host array for the scalar
    g.execute(pack, None)
    assert_close(read_strided(yd, SHAPE, NHWC), oracle(x, b, scale), "float32")
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.execute({X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale}, None)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and str(Y.get_uid()) in str(e.value)


def test_build_all_and_execute_each_plan(data):
    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    n = g.get_execution_plan_count()
    names = {g.get_plan_name_at_index(i) for i in range(n)}
    assert len(names) == n
    ref = oracle(x, b, scale)
    for i in sorted({0, n - 1}):
        yd = poisoned(SHAPE, NHWC)
        g.execute_plan_at_index({X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale, Y: yd}, None, i)
        assert_close(read_strided(yd, SHAPE, NHWC), ref, "float32", name=g.get_plan_name_at_index(i))
    engine, knobs = g.get_engine_and_knobs_at_index(n - 1)
    assert isinstance(engine, int) and all(isinstance(k, cudnn.knob_type) for k in knobs)
    offered = {k.type: k for k in g.get_knobs_for_engine(engine)}
    assert set(knobs) <= set(offered) and all(v in offered[k].values() for k, v in knobs.items())
    g.create_execution_plan(engine, knobs)  # the same config again, hand-picked: plan n
    assert g.get_plan_name_at_index(n) == g.get_plan_name_at_index(n - 1)
    yd = poisoned(SHAPE, NHWC)
    g.execute_plan_at_index({X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale, Y: yd}, None, n)
    assert_close(read_strided(yd, SHAPE, NHWC), ref, "float32")


def test_filters_leave_no_plan_and_check_support_says_why():
    g, *_ = bias_scale_relu_graph()
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    g.deselect_engines(["pointwise"])
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.check_support()
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED and "deselect_engines" in str(e.value)
    g2, *_ = bias_scale_relu_graph()
    g2.validate()
    g2.create_execution_plans([cudnn.heur_mode.A])
    g2.select_numeric_notes([cudnn.numerical_note.FFT])
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="numeric note filter"):
        g2.check_support()


def test_unsupported_graph_names_node_and_reason():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[2, 16], stride=[16, 1], reordering_type=cudnn.tensor_reordering.F16x16)
    g.exp(X, name="e").set_output(True)
    g.validate()
    g.build_operation_graph()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    assert "node 'e'" in str(e.value) and "reordered" in str(e.value)
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT

def test_exp_then_row_sum_runs_or_names_the_missing_engine(rng):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[4, 8], stride=[8, 1])
    Y = g.reduction(g.exp(X), cudnn.reduction_mode.ADD, out_dims=[4, 1], name="rowsum")
    Y.set_output(True)
    if not has_engine("reduction"):
        with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
            g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        assert "rowsum" in str(e.value) and e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN
        return
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    x = random(rng, [4, 8])
    y = cuda.to_device(np.full((4, 1), poison_value(np.float32), np.float32))
    ws = cuda.device_array(max(1, g.get_workspace_size()), np.uint8)
    g.execute({X: cuda.to_device(x), Y: y}, ws)
    assert_close(y.copy_to_host(), np.exp(x.astype(np.float64)).sum(axis=1, keepdims=True), "float32")


def test_serialize_round_trip_executes(data):
    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    Y.set_uid(77)
    g.build([cudnn.heur_mode.A])
    blob = g.serialize()
    assert isinstance(blob, list) and all(0 <= v < 256 for v in blob[:16])
    h = cudnn.create_handle()
    g2 = cudnn.pygraph()
    g2.deserialize(h, blob)
    assert g2.key() == g.key()
    assert g2.get_plan_name_at_index(0) == g.get_plan_name_at_index(g.get_selected_plan_index())
    X2, Y2 = g2.find_tensor("X"), g2.query_tensor_attributes_of_uid(77)
    assert Y2.get_name() == "relu.0::OUT_0" and X2.get_uid() == X.get_uid()
    yd = poisoned(SHAPE, NHWC)
    g2.execute({X2: strided_device(x, NHWC), "B": cuda.to_device(b), "s": scale, 77: yd}, None, handle=h)
    assert_close(read_strided(yd, SHAPE, NHWC), oracle(x, b, scale), "float32")
    bad = bytes(g.serialize(as_bytes=True)).replace(b'"version": 1', b'"version": 99')
    with pytest.raises(cudnn.CudnnError) as e:
        cudnn.pygraph().deserialize(bad)
    assert e.value.status == S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH
    cudnn.destroy_handle(h)


def test_autotune_times_plans_and_selects_the_fastest(data, tmp_path, monkeypatch):
    monkeypatch.setenv("NCUDNN_CACHE_DIR", str(tmp_path))
    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.validate()
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    yd = poisoned(SHAPE, NHWC)
    pack = {X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale, Y: yd}
    res = g.autotune(pack, None, runs=1, warmup=0, store=False, indices=[0, g.get_execution_plan_count() - 1])
    assert len(res) == 2 and all(ms > 0 for _, _, ms in res)
    assert [ms for *_, ms in res] == sorted(ms for *_, ms in res)
    assert g.get_selected_plan_index() == res[0][0]
    yd2 = poisoned(SHAPE, NHWC)
    g.execute(dict(pack) | {Y: yd2}, None)
    assert_close(read_strided(yd2, SHAPE, NHWC), oracle(x, b, scale), "float32")


def test_shape_override_without_the_flag_says_how(data):
    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.build([cudnn.heur_mode.A])
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="is_override_shape_enabled"):
        g.execute({X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale, Y: poisoned(SHAPE, NHWC)}, None,
                  override_uids=[X.get_uid()], override_shapes=[[1] + SHAPE[1:]], override_strides=[NHWC])


def test_shape_overrides_run_other_shapes_with_the_same_plan(rng):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT,
                      is_override_shape_enabled=True)
    X = g.tensor(name="X", dim=SHAPE, stride=NHWC)
    B = g.tensor(name="B", dim=[1, SHAPE[1], 1, 1], stride=[SHAPE[1], 1, SHAPE[1], SHAPE[1]])
    Y = g.mul(a=X, b=B)
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    name = g.get_plan_name_at_index(g.get_selected_plan_index())
    for n, hw in ((1, SHAPE[2] + 1), (SHAPE[0] + 1, 2)):
        shape = [n, SHAPE[1], hw, SHAPE[3]]
        st = [SHAPE[1] * hw * SHAPE[3], 1, SHAPE[3] * SHAPE[1], SHAPE[1]]
        x = random(rng, shape)
        b = random(rng, [1, SHAPE[1], 1, 1])
        y = poisoned(shape, st)
        over = dict(override_uids=[X.get_uid(), Y.get_uid()], override_shapes=[shape, shape], override_strides=[st, st])
        assert g.get_workspace_size(**over) == 0
        g.execute({X: strided_device(x, st), B: cuda.to_device(b), Y: y}, None, **over)
        assert_close(read_strided(y, shape, st), x.astype(np.float64) * b, "float32")
    assert g.get_plan_name_at_index(g.get_selected_plan_index()) == name and Y.get_dim() == SHAPE
    assert len(g._override_plans) == 2


def test_build_steps_go_to_the_frontend_log_file(tmp_path, monkeypatch):
    path = tmp_path / "fe.log"
    monkeypatch.setenv("CUDNN_FRONTEND_LOG_INFO", "1")
    monkeypatch.setenv("CUDNN_FRONTEND_LOG_FILE", str(path))
    g, *_ = bias_scale_relu_graph()
    g.build([cudnn.heur_mode.A])
    text = path.read_text()
    assert "[cudnn_frontend] INFO: pygraph 'bias_scale_relu' 1/5 VALIDATE" in text and "5/5 BUILD_PLANS" in text


def test_build_steps_are_logged_numbered():
    msgs = []
    status, old_mask, old_udata, old_fptr = cudnn.cudnnGetCallback()
    cudnn.cudnnSetCallback(cudnn.log.CUDNN_SEV_INFO_EN, None, lambda sev, udata, dbg, msg: msgs.append(msg))
    try:
        g, *_ = bias_scale_relu_graph()
        g.build([cudnn.heur_mode.A])
    finally:
        cudnn.cudnnSetCallback(old_mask, old_udata, old_fptr)
    steps = [m for m in msgs if "pygraph 'bias_scale_relu'" in m]
    for n, what in enumerate(["VALIDATE", "BUILD_OPERATION_GRAPH", "CREATE_EXECUTION_PLANS", "CHECK_SUPPORT",
                              "BUILD_PLANS"], 1):
        assert any(f"{n}/5 {what}" in m for m in steps), (what, steps)


def test_array_given_in_place_of_a_tensor_is_bound(data):
    x, b, scale = data
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    xd = cuda.to_device(x)
    Y = g.mul(a=xd, b=scale)  # the array becomes a tensor like it; the number a by-value scalar
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    assert Y.get_dim() == list(x.shape)
    yd = cuda.to_device(np.full(x.shape, np.nan, np.float32))
    g.execute({Y: yd}, None)
    assert_close(yd.copy_to_host(), x.astype(np.float64) * np.float32(scale), "float32")


@pytest.mark.sim_only
def test_cuda_graphs_are_refused_in_the_simulator(data):
    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.build([cudnn.heur_mode.A])
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="simulator"):
        g.populate_cuda_graph(None, {X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale,
                                     Y: poisoned(SHAPE, NHWC)}, None, 1)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:  # never populated
        g.update_cuda_graph(None, {X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale,
                                   Y: poisoned(SHAPE, NHWC)}, None, 1)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH


@pytest.mark.gpu
def test_populate_and_update_cuda_graph(data, rng):
    from cuda.bindings import driver

    x, b, scale = data
    g, X, B, s, Y = bias_scale_relu_graph()
    g.build([cudnn.heur_mode.A])
    y = poisoned(SHAPE, NHWC)
    pack = {X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale, Y: y}
    err, cg = driver.cuGraphCreate(0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    g.populate_cuda_graph(None, pack, None, cg)
    assert np.isnan(read_strided(y, SHAPE, NHWC)).all(), "recording must not run the kernels"
    err, _, n = driver.cuGraphGetNodes(cg, 0)
    assert err == driver.CUresult.CUDA_SUCCESS and n >= 1, (err, n)
    err, exe = driver.cuGraphInstantiate(cg, 0)
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphInstantiate: {err}"
    err = driver.cuGraphLaunch(exe, 0)[0]
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphLaunch: {err}"
    cuda.synchronize()
    assert_close(read_strided(y, SHAPE, NHWC), oracle(x, b, scale), "float32")
    x2 = random(rng, SHAPE)
    y2 = poisoned(SHAPE, NHWC)
    # the caller owns the buffers a graph points at (as with cuDNN): keep x2's device copy alive until
    # the graph has run, or numba may free it first and the launch reads freed memory
    x2d = strided_device(x2, NHWC)
    g.update_cuda_graph(None, dict(pack) | {X: x2d, Y: y2}, None, cg)
    err, exe2 = driver.cuGraphInstantiate(cg, 0)
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphInstantiate after update: {err}"
    err = driver.cuGraphLaunch(exe2, 0)[0]
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphLaunch after update: {err}"
    cuda.synchronize()
    assert_close(read_strided(y2, SHAPE, NHWC), oracle(x2, b, scale), "float32")
    del x2d


def test_half_io_with_float_scalar_and_bfloat16(rng):
    import ml_dtypes

    g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=SHAPE[:3], stride=None)
    eps = g.tensor(name="eps", dim=[1, 1, 1], stride=[1, 1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT)
    Y = g.gelu(g.add(X, eps))
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    x = random(rng, SHAPE[:3], np.float16)
    y = cuda.to_device(np.full(SHAPE[:3], np.nan, np.float16))
    g.execute({X: cuda.to_device(x), eps: np.full(1, 0.25, np.float32), Y: y}, None)
    assert_close(y.copy_to_host(), ref_pointwise(M.CUDNN_POINTWISE_GELU_FWD, x.astype(np.float64) + 0.25), "float16")
    g = cudnn.pygraph(io_data_type="torch.bfloat16", compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[16], stride=[1])
    Y = g.neg(X)
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    xb = random(rng, [16], ml_dtypes.bfloat16)
    yb = cuda.to_device(np.full(16, 0x7FC0, np.uint16))  # bf16 NaN bits: numba has no bf16 arrays
    g.execute({X: cuda.to_device(xb.view(np.uint16)), Y: yb}, None)
    assert_close(yb.copy_to_host().view(ml_dtypes.bfloat16), -xb.astype(np.float64), "bfloat16")


def test_slice_and_transpose_of_inputs(rng):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[4, 6, 5], stride=[30, 5, 1])
    T = g.transpose(X, permutation=[2, 0, 1], name="tr")
    T.set_output(True)
    Sl = g.slice(X, slices=[slice(1, 3), slice(0, 6, 2), slice(None)], name="sl")
    Sl.set_output(True)
    g.build([cudnn.heur_mode.A])
    assert T.get_dim() == [5, 4, 6] and T.get_stride() == [24, 6, 1] and Sl.get_dim() == [2, 3, 5]
    x = random(rng, [4, 6, 5])
    t = cuda.to_device(np.full([5, 4, 6], np.nan, np.float32))
    s = cuda.to_device(np.full([2, 3, 5], np.nan, np.float32))
    g.execute({X: cuda.to_device(x), T: t, Sl: s}, None)
    assert_close(t.copy_to_host(), x.transpose(2, 0, 1), "float32")
    assert_close(s.copy_to_host(), x[1:3, 0:6:2, :], "float32")
    g2 = cudnn.pygraph()
    g2.deserialize(g.serialize())
    s2 = cuda.to_device(np.full([2, 3, 5], np.nan, np.float32))
    g2.execute({"X": cuda.to_device(x), "tr::OUT_0": cuda.to_device(np.empty([5, 4, 6], np.float32)),
                "sl::OUT_0": s2}, None)
    assert_close(s2.copy_to_host(), x[1:3, 0:6:2, :], "float32")
    g3 = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT)
    X = g3.tensor(name="X", dim=[2, 3], stride=[3, 1])
    g3.relu(g3.transpose(g3.exp(X), permutation=[1, 0], name="tr")).set_output(True)   # between intermediates
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="node .tr. \\(transpose\\).*intermediate"):
        g3.validate()


def test_autotune_store_makes_mode_b_rank_the_winner_first(data, tmp_path, monkeypatch):
    from ncudnn.engines import autotune as engine_autotune, heuristics

    monkeypatch.setenv("NCUDNN_CACHE_DIR", str(tmp_path))
    engine_autotune.forget_stores()
    heuristics.forget_tables()
    try:
        x, b, scale = data
        g, X, B, s, Y = bias_scale_relu_graph()
        g.validate()
        g.create_execution_plans([cudnn.heur_mode.A])
        g.check_support()
        last = g.get_execution_plan_count() - 1
        pack = {X: strided_device(x, NHWC), B: cuda.to_device(b), s: scale, Y: poisoned(SHAPE, NHWC)}
        (winner, name, ms), = g.autotune(pack, None, runs=1, warmup=0, indices=[last])  # stored
        assert winner == last
        g2, *_ = bias_scale_relu_graph()
        g2.validate()
        g2.create_execution_plans([cudnn.heur_mode.B])
        assert g2.get_plan_name_at_index(0) == name
    finally:
        engine_autotune.forget_stores()
        heuristics.forget_tables()
