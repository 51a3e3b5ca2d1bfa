"""ConvProblem and WinoProblem of one subgraph share one Epilogue (``epilogue_of(..., rule=)``
remembered on the subgraph), the one a fresh translation gives."""
import pytest

from conv_rank_graphs import conv_graph
from ncudnn.engines import api
from ncudnn.engines.gemm import common as gc, epilogue as gemm_epilogue
from ncudnn.engines.conv.common import ConvProblem
from ncudnn.engines.winograd.common import WinoProblem


@pytest.mark.parametrize("prob", [("fprop", 3, 32, 14, 16, 3, 1, True, "f32", True),
                                  ("fprop", 2, 16, 7, 32, 3, 1, False, "f16", True),
                                  ("dgrad", 2, 16, 7, 8, 3, 1, True, "f32", False)])
def test_shared_epilogue(prob):
    sub = api.problem(conv_graph(*prob))
    a, b = ConvProblem(sub), WinoProblem(sub)
    assert a.epi is b.epi
    out = next(iter(sub.anchor.outputs.values()))
    fresh = gemm_epilogue._epilogue_of(sub, out.dims, lambda t: "col" if len(t.dims) == len(out.dims)
                                       and t.dims[1] == out.dims[1]
                                       and all(d == 1 for i, d in enumerate(t.dims) if i != 1) else None, True, True)
    assert fresh == a.epi
    assert (a.epi.bias is not None) == (prob[0] == "fprop" and prob[-1])
    assert len(a.epi.spec.steps) == (2 if prob[-1] else 0)


def test_rule_none_is_not_remembered():
    sub = api.problem(conv_graph("fprop", 3, 32, 14, 16, 3, 1, True, "f32", True))
    out = next(iter(sub.anchor.outputs.values()))
    e1 = gc.epilogue_of(sub, out.dims, lambda t: "col")
    e2 = gc.epilogue_of(sub, out.dims, lambda t: "col")
    assert e1 == e2 and e1 is not e2
