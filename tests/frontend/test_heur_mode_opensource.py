"""``heur_mode.OPENSOURCE``: cudnn-frontend's mode for its open-source engines. Every ncudnn engine is open
source, so it ranks exactly as mode A; it is accepted wherever pygraph takes heuristic modes
(create_execution_plans, build, jit, the Graph wrapper), and the plans it gives run (float64 oracle)."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, random
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnStatus_t as S

F = cudnn.data_type.FLOAT
SHAPE = [4, 6]
HEUR = cudnn.heur_mode


def graph():
    g = cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F)
    X = g.tensor(name="X", dim=SHAPE, stride=[SHAPE[1], 1])
    Y = g.sigmoid(input=X)
    Y.set_output(True)
    return g, X, Y


def plan_names(modes):
    g, _, _ = graph()
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans(modes)
    return [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]


def test_the_member():
    assert "OPENSOURCE" in HEUR.__members__ and str(HEUR.OPENSOURCE) == "heur_mode.OPENSOURCE"
    # no backend mode has its value (the backend's are 0..3): it aliases none of A, B, FALLBACK
    assert int(HEUR.OPENSOURCE) not in {int(m) for m in HM if m != HM.CUDNN_HEUR_MODES_COUNT}
    assert len({int(m) for m in HEUR}) == len(HEUR)


def test_ranks_as_mode_a():
    a = plan_names([HEUR.A])
    assert a and plan_names([HEUR.OPENSOURCE]) == a
    assert plan_names([HEUR.A, HEUR.OPENSOURCE]) == a and plan_names([HEUR.OPENSOURCE, HEUR.A]) == a
    assert plan_names(HEUR.OPENSOURCE) == a and plan_names(["OPENSOURCE"]) == a
    assert plan_names([HEUR.OPENSOURCE, HEUR.FALLBACK]) == plan_names([HEUR.A, HEUR.FALLBACK])


def expected(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


@pytest.mark.parametrize("how", ["build", "jit", "Graph"])
def test_plans_from_it_run(rng, how):
    x = random(rng, SHAPE)
    yd = cuda.device_array(SHAPE, np.float32)
    if how == "build":
        g, X, Y = graph()
        g.build([HEUR.OPENSOURCE])
        g.execute({X: cuda.to_device(x), Y: yd}, None)
    elif how == "jit":
        @cudnn.jit(heur_modes=HEUR.OPENSOURCE)
        def make():
            g, X, Y = graph()
            return g, [X, Y]
        g, (x_uid, y_uid) = make()
        g.execute({x_uid: cuda.to_device(x), y_uid: yd}, None)
    else:
        xd = cuda.to_device(x)
        with cudnn.Graph(io_data_type=F, intermediate_data_type=F, compute_data_type=F,
                         heuristics=[HEUR.OPENSOURCE]) as g:
            y = g.sigmoid(input=xd)
            y.set_output(True)
        g.set_io_tuples([y.get_name().rsplit("::", 1)[0] + "::input"], [y])
        yd = g(xd)
    assert_close(yd.copy_to_host(), expected(x), "float32")


def test_backend_members_and_bad_modes():
    g, _, _ = graph()
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([HM.CUDNN_HEUR_MODE_INSTANT])   # INSTANT is A, as cuDNN documents
    assert g.get_execution_plan_count() == len(plan_names([HEUR.A]))
    for bad in (HM.CUDNN_HEUR_MODES_COUNT, "C", 17):
        with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
            g.create_execution_plans([bad])
        assert e.value.status == S.CUDNN_STATUS_BAD_PARAM
