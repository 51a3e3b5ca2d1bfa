"""A graph no engine runs: "0 engine configs" (and "no plan supports it") always come with a
cudnnGraphNotSupportedError whose text names the graph's ops and each engine's reason, and the same text
is the thread's last-error string (cudnn.get_last_error_string), as a failing cuDNN call leaves it."""
import pytest

import ncudnn as cudnn
from ncudnn.types import cudnnStatus_t as S

F = cudnn.data_type.FLOAT


def graph(io=F, vectorized=False):
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=F, compute_data_type=F, name="nothing_runs")
    X = g.tensor(name="X", dim=[2, 8], stride=[8, 1])
    if vectorized:
        X.set_vector_count_and_dimension(4, 1)
    Y = g.tanh(input=X, name="squash")
    Y.set_output(True)
    return g


@pytest.mark.parametrize("io,vectorized,status,why", [
    (cudnn.data_type.COMPLEX_FP32, False, S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, "COMPLEX_FP32"),
    (F, True, S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, "X: vectorized"),
])
@pytest.mark.parametrize("modes", [[cudnn.heur_mode.A], [cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK],
                                   [cudnn.heur_mode.OPENSOURCE]])
def test_zero_engine_configs_names_the_op_in_the_error_and_the_last_error(io, vectorized, status, why, modes):
    g = graph(io, vectorized)
    g.validate()
    g.build_operation_graph()
    cudnn.get_last_error_string()   # start clean
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.create_execution_plans(modes)
    msg = str(e.value)
    assert e.value.status == status
    assert "graph 'nothing_runs' (ops squash (pointwise)): 0 engine configs" in msg and why in msg
    assert "node 'squash'" in msg   # each engine's reason names the node too
    last = cudnn.get_last_error_string()
    assert last == f"{status.name}: {e.value.message}"
    assert cudnn.get_last_error_string() == ""   # reading clears it, as in cuDNN


def test_build_leaves_the_reason_as_last_error():
    g = graph(cudnn.data_type.COMPLEX_FP32)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError):
        g.build([cudnn.heur_mode.A])
    assert "squash (pointwise)" in cudnn.get_last_error_string()


def test_no_plan_left_after_filters_names_the_op():
    g = graph()
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    n = g.get_execution_plan_count()
    g.deselect_engines(sorted({g.get_plan_name_at_index(i).split("(")[0] for i in range(n)}))
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.check_support()
    assert f"(ops squash (pointwise)): no execution plan of {n} supports the graph" in str(e.value)
    assert "squash (pointwise)" in cudnn.get_last_error_string()
