"""The seed tutorial's flow through `import ncudnn as cudnn`: fused conv -> bias -> relu on channels-last
half tensors, five-step build, workspace, execute and compare with the float64 oracle; every plan of
build_plans(ALL) timed and the fastest selected; serialize / deserialize and run again.
Runs once an engine for conv_fprop subgraphs is registered (skipped before, saying so)."""
import numpy as np
import pytest

import ncudnn as cudnn
from ncudnn.memory import allocate
from ncudnn.testing import assert_close, random, size

from fe_oracle import graph_oracle, has_engine, poisoned, read_strided, to_device_strided

N, C, H, W, K, R = size((2, 8, 6, 6), (8, 64, 28, 28)) + size((16, 3), (128, 3))
PAD = 1

pytestmark = pytest.mark.skipif(not has_engine("conv_fprop"), reason="no conv_fprop engine registered yet")


def channels_last(n, c, h, w):
    return [c * h * w, 1, w * c, c]


def build_seed(handle, policy=None):
    g = cudnn.pygraph(handle=handle, name="conv_bias_relu", io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[N, C, H, W], stride=channels_last(N, C, H, W), data_type=cudnn.data_type.HALF)
    Wt = g.tensor(name="W", dim=[K, C, R, R], stride=channels_last(K, C, R, R), data_type=cudnn.data_type.HALF)
    B = g.tensor(name="bias", dim=[1, K, 1, 1], stride=[K, 1, K, K], data_type=cudnn.data_type.HALF)
    conv = g.conv_fprop(image=X, weight=Wt, padding=[PAD, PAD], stride=[1, 1], dilation=[1, 1],
                        compute_data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=g.bias(input=conv, bias=B))
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    Y.set_dim([N, K, H, W]).set_stride(channels_last(N, K, H, W))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(policy) if policy is not None else g.build_plans()
    return g, X, Wt, B, Y


@pytest.fixture
def seed_data(rng):
    return (random(rng, (N, C, H, W)).astype(np.float16), random(rng, (K, C, R, R)).astype(np.float16),
            random(rng, (1, K, 1, 1)).astype(np.float16))


def run(g, X, Wt, B, Y, x, w, b, index=None):
    ws = allocate(max(g.get_workspace_size(), 1))
    y = poisoned(Y.get_dim(), Y.get_stride(), np.float16)
    pack = {X: to_device_strided(x, X.get_stride(), np.float16), Wt: to_device_strided(w, Wt.get_stride(), np.float16),
            B: to_device_strided(b, B.get_stride(), np.float16), Y: y}
    if index is None:
        g.execute(pack, ws)
    else:
        g.execute_plan_at_index(pack, allocate(max(g.get_workspace_size_plan_at_index(index), 1)), index)
    return read_strided(y, Y.get_dim(), Y.get_stride())


def test_seed_conv_bias_relu(seed_data):
    x, w, b = seed_data
    h = cudnn.create_handle()
    g, X, Wt, B, Y = build_seed(h)
    ref = graph_oracle(g, {X.get_uid(): x, Wt.get_uid(): w, B.get_uid(): b})[Y.get_uid()]
    assert_close(run(g, X, Wt, B, Y, x, w, b), ref, "float16")
    blob = g.serialize()
    g2 = cudnn.pygraph()
    g2.deserialize(h, blob)
    t = {n: g2.find_tensor(n) for n in ("X", "W", "bias")}
    assert_close(run(g2, t["X"], t["W"], t["bias"], g2.query_tensor_attributes_of_uid(Y.get_uid()), x, w, b), ref,
                 "float16")
    cudnn.destroy_handle(h)


def test_seed_every_plan_and_autotune(seed_data):
    x, w, b = seed_data
    g, X, Wt, B, Y = build_seed(None, cudnn.build_plan_policy.ALL)
    ref = graph_oracle(g, {X.get_uid(): x, Wt.get_uid(): w, B.get_uid(): b})[Y.get_uid()]
    n = g.get_execution_plan_count()
    for i in sorted({0, n - 1}):
        assert_close(run(g, X, Wt, B, Y, x, w, b, index=i), ref, "float16", name=g.get_plan_name_at_index(i))
    pack = {X: to_device_strided(x, X.get_stride(), np.float16), Wt: to_device_strided(w, Wt.get_stride(), np.float16),
            B: to_device_strided(b, B.get_stride(), np.float16), Y: poisoned(Y.get_dim(), Y.get_stride(), np.float16)}
    res = g.autotune(pack, allocate(max(max(g.get_workspace_size_plan_at_index(i) for i in range(n)), 1)),
                     runs=1, warmup=0, store=False, indices=sorted({0, n - 1}))
    assert res and g.get_selected_plan_index() == res[0][0]
