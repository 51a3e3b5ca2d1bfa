"""The cold ranking of the implicit-GEMM conv engines stays cheap: Python calls (cProfile's count,
a figure a loaded host does not disturb) per engine on a new conv subgraph, the shared ConvProblem
already made: support, candidates, their costs and EngineConfigs. Before the per-config constants
(commit 01828d4) an engine took ~130-150 calls per config of its space here (1500-1800 on a 3x3
fprop of 10 configs, ~9900 on a wgrad of 78); now ~20-35. The bound leaves room for growth, not
for a return to per-config helper calls."""
import cProfile
import pstats

import pytest

from conv_rank_graphs import conv_graph
from ncudnn.engines import api, registry
from ncudnn.engines.conv.common import conv_problem
from ncudnn.engines.ranking import engine_config

#: calls allowed: a fixed part plus this many per config of the engine's space
FIXED_CALLS, PER_CONFIG = 250, 40


@pytest.mark.parametrize("name", ["conv_implicit_gemm", "conv_implicit_precomp"])
@pytest.mark.parametrize("prob", [("fprop", 33, 128, 28, 128, 3, 1, True, "f32", True),
                                  ("fprop", 35, 256, 56, 128, 3, 2, True, "f32", True),
                                  ("wgrad", 31, 64, 56, 64, 3, 1, True, "f32", False)],
                         ids=["c128r3s1", "c256r3s2", "wgrad"])
def test_engine_ranking_calls(name, prob):
    eng, ctx = registry.by_name(name), api.context()
    warm = api.problem(conv_graph(*prob))          # first-ever call: module-level state
    conv_problem(warm)
    eng.candidates(warm, ctx)
    sub = api.problem(conv_graph(prob[0], prob[1] + 1, *prob[2:]))   # a new shape
    conv_problem(sub)
    pr = cProfile.Profile()
    pr.enable()
    eng.check_support(sub, ctx)
    cands = eng.candidates(sub, ctx)
    ecs = [engine_config(eng, sub, c, ctx, eng.cost(sub, c, ctx.device)) for c in cands]
    pr.disable()
    calls = pstats.Stats(pr).total_calls
    assert ecs and all(e.predicted_time > 0 for e in ecs)
    n = len(eng.tiled.space(sub))
    assert calls < FIXED_CALLS + PER_CONFIG * n, f"{name} {prob}: {calls} calls for {n} configs, {len(cands)} candidates"
