"""TF32 is opt-in in pygraph: an FP32 matmul gets a tensor-core (TF32) plan only when the graph selects the
DOWN_CONVERT_INPUTS / TENSOR_CORE numerical note (before or after create_execution_plans), never under
NVIDIA_TF32_OVERRIDE=0; the TF32 plan's result matches the float64 oracle at the TF32 tolerance."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, poison_value, size

#: the engines that run FP32 operands as TF32 (wgmma on sm_90, mma.sync elsewhere)
TC_ENGINES = ("matmul_tc", "matmul_wgmma")


def _graph(m, n, k):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=[1, m, k], stride=[m * k, k, 1])
    B = g.tensor(name="B", dim=[1, k, n], stride=[k * n, 1, k])      # stored (n, k): k-contiguous
    C = g.matmul(A=A, B=B, compute_data_type=cudnn.data_type.FLOAT)
    C.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    return g, A, B, C


def _notes(g, i):
    return [str(n) for n in g.get_numerical_notes_for_plan_at_index(i)]


@pytest.mark.parametrize("when", ["before", "after"])
def test_select_note_opts_in_to_tf32(rng, when):
    m, n, k = size((24, 16, 32), (520, 392, 264))
    g, A, B, C = _graph(m, n, k)
    g.validate()
    g.build_operation_graph()
    if when == "before":
        g.select_numeric_notes([cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    g.create_execution_plans([cudnn.heur_mode.A])
    if when == "after":
        g.select_numeric_notes([cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    g.check_support()
    g.build_plans()
    i = g.get_selected_plan_index()
    name = g.get_plan_name_at_index(i)
    assert any(e in name for e in TC_ENGINES) and any("DOWN_CONVERT" in s for s in _notes(g, i)), name
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    out = cuda.to_device(np.full(m * n, poison_value(np.float32), np.float32))
    g.execute({A: cuda.to_device(a), B: cuda.to_device(np.ascontiguousarray(b.T)), C: out},
              cuda.device_array(max(g.get_workspace_size(), 1), np.uint8))
    expect = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(out.copy_to_host().reshape(m, n), expect, "tf32")


def test_without_opt_in_fp32_stays_fp32(monkeypatch):
    g, *_ = _graph(16, 16, 16)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    assert not any(e in g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count()) for e in TC_ENGINES)
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    g2, *_ = _graph(16, 16, 16)
    g2.validate()
    g2.build_operation_graph()
    g2.select_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    with pytest.raises(cudnn.cudnnGraphNotSupportedError):
        g2.create_execution_plans([cudnn.heur_mode.A])
        g2.check_support()
