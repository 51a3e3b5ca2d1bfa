"""norm_rows costs every config from one step build per subgraph: valid only because the steps' bytes and
count do not depend on the knobs. Check that against the steps of every candidate, forward (layer / RMS,
training / inference, vector and scalar paths, a fused epilogue) and backward writing dx only. A backward
writing dscale / dbias has two paths of different bytes (two-pass re-reads x and dy, fused does not): each
is costed from its own steps, checked in test_norm_rows_fused_bwd.py::test_backward_costed_per_path."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.engines.membound.common import steps_time
from ncudnn.ir import NormBwd, OpGraph
from ncudnn.ir.partition import partition
from ncudnn.types import cudnnBackendNormMode_t as NM

import membound_util as U
from test_norm_rows_engine import fwd_graph


def _bwd_graph(d, dparams):
    st = (d[0], 1)
    ins = {"X": U.t(1, d, name="x"), "DY": U.t(2, d, name="dy"), "SCALE": U.t(3, (1, d[1]), name="scale"),
           "MEAN": U.t(4, st, name="mean"), "INV_VARIANCE": U.t(5, st, name="inv")}
    outs = {"DX": U.t(10, d, name="dx")}
    if dparams:
        outs.update(DSCALE=U.t(11, (1, d[1]), name="dscale"), DBIAS=U.t(12, (1, d[1]), name="dbias"))
    return OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_LAYER_NORM)]).finalize()


GRAPHS = {
    "ln-train-1024": lambda: fwd_graph(NM.CUDNN_LAYER_NORM, dims=(64, 1024)),
    "rms-infer-4096": lambda: fwd_graph(NM.CUDNN_RMS_NORM, dims=(16, 4096), training=False, bias=False),
    "ln-scalar-odd": lambda: fwd_graph(NM.CUDNN_LAYER_NORM, dims=(9, 1022)),
    "ln-relu-epilogue": lambda: fwd_graph(NM.CUDNN_LAYER_NORM, dims=(32, 512), relu=True),
    "bwd": lambda: _bwd_graph((64, 1024), False),
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_one_step_build_costs_every_config_as_its_own_steps_would(name):
    g = GRAPHS[name]()
    eng, ctx = registry.by_name("norm_rows"), api.context()
    sub = partition(g)[0][0]
    assert eng.check_support(sub, ctx)[0] == 0
    cands = eng.candidates(sub, ctx)
    assert len(cands) >= 2
    base = steps_time(ctx.device, eng._steps(sub, cands[0])[0])
    for cfg in cands:
        own = steps_time(ctx.device, eng._steps(sub, cfg)[0])
        assert own == base, (cfg, own, base)
        want = own * (1.0 if cfg.knobs == eng.default_config(sub).knobs else 1.05)
        assert eng.cost(sub, cfg, ctx.device) == want
