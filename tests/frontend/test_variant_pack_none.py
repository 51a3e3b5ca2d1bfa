"""``None`` in a variant pack, as cudnn-frontend code writes it for optional tensors: a ``None`` key (the
optional tensor was never made) is skipped whatever its value, as cudnn-frontend's ``execute`` skips it;
a ``None`` value for a tensor the graph does not use is skipped; a ``None`` value for a tensor the graph
reads or writes is BAD_PARAM_NULL_POINTER naming the tensor. For every pack form pygraph takes (tensor
objects, uids, names), through ``execute`` and ``execute_plan_at_index``."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, random
from ncudnn.types import cudnnStatus_t as S

F = cudnn.data_type.FLOAT
SHAPE = [3, 5]


def built(has_bias=False):
    """Y = relu(X [+ B]); U is a tensor of the graph no op uses (an optional input left out)."""
    g = cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F)
    X = g.tensor(name="X", dim=SHAPE, stride=[SHAPE[1], 1])
    U = g.tensor(name="U", dim=SHAPE, stride=[SHAPE[1], 1])
    B = g.tensor(name="B", dim=[1, SHAPE[1]], stride=[SHAPE[1], 1]) if has_bias else None
    Y = g.relu(input=g.add(a=X, b=B) if B is not None else X, name="act")
    Y.set_output(True).set_name("Y")
    g.build([cudnn.heur_mode.A])
    return g, X, U, B, Y


def key(t, form):
    return {"tensor": t, "uid": t.get_uid(), "name": t.get_name()}[form]


def run(g, pack_of, execute):
    """Y computed through ``execute`` ("execute" or "at_index") with the pack ``pack_of(yd)``."""
    yd = cuda.device_array(SHAPE, np.float32)
    pack = pack_of(yd)
    if execute == "execute":
        g.execute(pack, None)
    else:
        g.execute_plan_at_index(pack, None, index=0)
    return yd.copy_to_host()


@pytest.mark.parametrize("execute", ["execute", "at_index"])
def test_none_key_is_skipped(rng, execute):
    g, X, U, B, Y = built(has_bias=False)
    x = random(rng, SHAPE)
    bias = None  # as frontend code writes {bias: bias_gpu} when the graph was built without a bias
    for value in (None, cuda.to_device(x)):
        y = run(g, lambda yd: {X: cuda.to_device(x), Y: yd, bias: value}, execute)
        assert_close(y, np.maximum(x.astype(np.float64), 0.0), "float32")


@pytest.mark.parametrize("form", ["tensor", "uid", "name"])
@pytest.mark.parametrize("execute", ["execute", "at_index"])
def test_none_value_of_an_unused_tensor_is_skipped(rng, form, execute):
    g, X, U, B, Y = built(has_bias=False)
    x = random(rng, SHAPE)
    y = run(g, lambda yd: {key(X, form): cuda.to_device(x), key(Y, form): yd, key(U, form): None}, execute)
    assert_close(y, np.maximum(x.astype(np.float64), 0.0), "float32")


@pytest.mark.parametrize("form", ["tensor", "uid", "name"])
@pytest.mark.parametrize("execute", ["execute", "at_index"])
@pytest.mark.parametrize("which", ["X", "B", "Y"])
def test_none_value_of_a_used_tensor_is_an_error_naming_it(rng, form, execute, which):
    g, X, U, B, Y = built(has_bias=True)
    bufs = {"X": cuda.to_device(random(rng, SHAPE)), "B": cuda.to_device(random(rng, [1, SHAPE[1]]))}
    ts = {"X": X, "B": B, "Y": Y}

    def pack(yd):
        p = {key(t, form): (bufs.get(n, yd)) for n, t in ts.items()}
        p[key(ts[which], form)] = None
        return p

    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        run(g, pack, execute)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER
    verb = "writes" if which == "Y" else "reads"
    assert f"tensor '{which}'" in str(e.value) and f"is None, but the graph {verb} it" in str(e.value)
    assert f"tensor '{which}'" in cudnn.get_last_error_string()


def test_bias_graph_runs_with_every_optional_left_out_as_none(rng):
    """The case the frontend idiom produces: the graph has the bias, the pack also names a tensor the
    graph left unused and an optional that was never made."""
    g, X, U, B, Y = built(has_bias=True)
    x, b = random(rng, SHAPE), random(rng, [1, SHAPE[1]])
    never_made = None
    y = run(g, lambda yd: {X: cuda.to_device(x), B: cuda.to_device(b), Y: yd, U: None, never_made: None},
            "execute")
    assert_close(y, np.maximum(x.astype(np.float64) + b, 0.0), "float32")
