"""Batch-norm forward training statistics that survive hard data, against the float64 oracle (two-pass mean
and variance): one huge value (1e20) in one channel (float32 (x - K)^2 overflows; E[x^2] - E[x]^2 became
inf - inf and the variance collapsed to 0), a large mean offset (x = 1e4 + N(0, 1)) and plain N(0, 1),
on every config the norm_batch engine offers for packed NHWC and NCHW (cols, colsv, fused-combine,
tree-combine variants, occupancy / unroll knobs, planes) and for padded rows (the generic reduce path,
float64 sums as well), every config the heuristics return, and the legacy
cudnnBatchNormalizationForwardTraining. Every output (y, saved mean / inverse std, running mean / variance)
within 1e-6 relative of the oracle in FP32, the huge value's channel on its own as well; outputs poisoned."""
import dataclasses

import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
from ncudnn import reference as R
from ncudnn.engines import api, registry
from ncudnn.ir import NormFwd, OpGraph
from ncudnn.ir.partition import partition
from ncudnn.reference.ops import run_node
from ncudnn.testing import assert_close, rel_err, size
from ncudnn.types import (cudnnBackendHeurMode_t as HM, cudnnBackendNormFwdPhase_t as PH,
                          cudnnBackendNormMode_t as NM, cudnnStatus_t as S)

import membound_util as U

TOL = 1e-6
# M = N*H*W samples a channel: the variance of one 1e20 among them (1e40 / M) must fit in float32
SIM_DIMS = (4, 8, 4, 4)
GPU_DIMS = (32, 256, 56, 56)
KINDS = ["huge", "offset", "normal"]


def bn_graph(dims, layout):
    n, c, h, w = dims
    # "padded": NCHW rows of w + 3 elements, which the dedicated kernels refuse (the generic reduce path)
    xs = {"nhwc": (h * w * c, 1, w * c, c), "padded": (c * h * (w + 3), h * (w + 3), w + 3, 1)}.get(layout)
    ch = (1, c, 1, 1)
    ins = {"X": U.t(1, dims, strides=xs, name="x"), "SCALE": U.t(2, ch, name="scale"), "BIAS": U.t(3, ch, name="bias"),
           "EPSILON": U.scalar(4, 1e-5, "eps"), "INPUT_RUNNING_MEAN": U.t(5, ch, name="rm"),
           "INPUT_RUNNING_VAR": U.t(6, ch, name="rv"), "EXP_AVG_FACTOR": U.scalar(7, 0.2, "mom")}
    outs = {"Y": U.t(10, dims, strides=xs, name="y"), "MEAN": U.t(11, ch, name="mean"),
            "INV_VARIANCE": U.t(12, ch, name="inv"), "OUTPUT_RUNNING_MEAN": U.t(13, ch, name="rm_out"),
            "OUTPUT_RUNNING_VAR": U.t(14, ch, name="rv_out")}
    return OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()


def make_x(rng, dims, kind):
    """float32-representable x of ``kind`` and the channel holding the huge value (or None)."""
    x = rng.standard_normal(dims)
    chan = None
    if kind == "huge":
        chan = int(rng.integers(dims[1]))
        x[rng.integers(dims[0]), chan, rng.integers(dims[2]), rng.integers(dims[3])] = 1e20
    elif kind == "offset":
        x = x + 1e4
    return U.cast(x, U.F32), chan


def _inputs(rng, node, x):
    vals, pack = {}, {}
    for p, t in node.inputs.items():
        if t.is_by_value:
            vals[p] = np.float64(t.value)
            continue
        a = x if p == "X" else rng.uniform(0.5, 2.0, t.dims)
        vals[p] = U.cast(a, t.dtype)
        pack[t.uid] = U.upload(a, t)
    return vals, pack


def check_outputs(node, outs, ref, chan, what, tol=TOL):
    for p, buf in outs.items():
        got = U.download(buf, node.outputs[p])
        assert_close(got, ref[p], tol if p == "Y" else TOL, name=f"{p} ({what})")
        if chan is not None and p == "Y":
            assert rel_err(got[:, chan], ref[p][:, chan]) <= TOL, f"Y channel {chan} ({what})"


#: the generic path's apply pass computes x * eq_scale + eq_bias in float32 (no per-channel shift): with
#: x = 1e4 + N(0, 1), y is off by about ulp(1e4) / std, the precision x itself has in float32
GENERIC_OFFSET_TOL = 2e-3


def prepare(g, rng, kind):
    """Inputs of ``kind`` (uploaded once) and their float64 oracle, shared by every config a test runs: the
    oracle over 25.7 M elements is the slow part at GPU sizes."""
    node = g.nodes[0]
    x, chan = make_x(rng, node.inputs["X"].dims, kind)
    vals, pack = _inputs(rng, node, x)
    return pack, run_node(node, vals), chan


def run_config(g, case, ec, tol=TOL):
    """Run ``ec`` on the prepared inputs into freshly poisoned outputs and check them."""
    node, (pack_in, ref, chan) = g.nodes[0], case
    outs = {p: U.poisoned(t) for p, t in node.outputs.items()}
    pack = dict(pack_in)
    pack.update({t.uid: outs[p] for p, t in node.outputs.items()})
    U.run_ec(g, pack, ec)
    check_outputs(node, outs, ref, chan, str(ec), tol)


def _as_ec(base, cfg):
    """The heuristics' first engine config with ``cfg`` (workspace and plan come from the build)."""
    return dataclasses.replace(base, config=cfg)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["nhwc", "nchw", "padded"])
def test_every_engine_config(rng, layout, kind):
    g = bn_graph(SIM_DIMS, layout)
    eng, sub = registry.by_name("norm_batch"), partition(g)[0][0]
    base = api.get_heuristics(g)[0]
    assert base.config.engine == "norm_batch"
    cands = eng.candidates(sub, api.context())
    assert len(cands) > (10 if layout == "nhwc" else 0)
    tol = GENERIC_OFFSET_TOL if (layout, kind) == ("padded", "offset") else TOL
    case = prepare(g, rng, kind)
    for cfg in cands:
        run_config(g, case, _as_ec(base, cfg), tol)


@pytest.mark.parametrize("layout", ["nhwc", "nchw", "padded"])
def test_every_heuristics_config(rng, layout):
    g = bn_graph(SIM_DIMS, layout)
    seen, case = set(), prepare(g, rng, "huge")
    for mode in (HM.CUDNN_HEUR_MODE_A, HM.CUDNN_HEUR_MODE_FALLBACK):
        for ec in api.get_heuristics(g, mode):
            if ec.ident() not in seen:
                seen.add(ec.ident())
                run_config(g, case, ec)
    assert seen


def test_huge_value_in_the_first_row():
    """The shift K of the partial sums is x[row 0, c]: the huge value there."""
    rng = np.random.default_rng(7)
    for layout in ("nhwc", "nchw"):
        g = bn_graph(SIM_DIMS, layout)
        node = g.nodes[0]
        x, _ = make_x(rng, SIM_DIMS, "normal")
        x[0, 3, 0, 0] = 1e20
        vals, pack = _inputs(rng, node, x)
        outs = {p: U.poisoned(t) for p, t in node.outputs.items()}
        pack.update({t.uid: outs[p] for p, t in node.outputs.items()})
        U.run(g, pack)
        check_outputs(node, outs, run_node(node, vals), 3, layout)


@pytest.fixture
def handle():
    st, h = ncudnn.cudnnCreate()
    assert st == S.CUDNN_STATUS_SUCCESS
    yield h
    ncudnn.cudnnDestroy(h)


def _tdesc(dims):
    st, d = L.cudnnCreateTensorDescriptor()
    assert st == 0 and L.cudnnSetTensor4dDescriptor(d, 0, ncudnn.CUDNN_DATA_FLOAT, *dims)[0] == 0
    return d


@pytest.mark.parametrize("kind", ["huge", "offset"])
def test_legacy_forward_training(handle, rng, kind):
    dims = size(SIM_DIMS, GPU_DIMS)
    ps = (1, dims[1], 1, 1)
    x, chan = make_x(rng, dims, kind)
    x = x.astype(np.float32)
    sc, bi = rng.uniform(0.5, 2, ps).astype(np.float32), rng.standard_normal(ps).astype(np.float32)
    rm, rv = rng.standard_normal(ps).astype(np.float32), rng.uniform(0.5, 2, ps).astype(np.float32)
    pd = _tdesc(ps)
    y, sm, si = (cuda.to_device(np.full(s, np.nan, np.float32)) for s in (dims, ps, ps))
    drm, drv = cuda.to_device(rm), cuda.to_device(rv)
    ret = L.cudnnBatchNormalizationForwardTraining(handle, ncudnn.CUDNN_BATCHNORM_SPATIAL, 1.0, 0.0, _tdesc(dims),
                                                   cuda.to_device(x), _tdesc(dims), y, pd, cuda.to_device(sc),
                                                   cuda.to_device(bi), 0.25, drm, drv, 1e-5, sm, si)
    assert ret == (S.CUDNN_STATUS_SUCCESS,), ncudnn.cudnnGetLastErrorString()
    ry, rmean, rinv, nrm, nrv = R.batchnorm_forward_training(x, sc, bi, 1e-5, 0.25, rm, rv)
    for name, got, ref in (("y", y, ry), ("save_mean", sm, rmean), ("save_inv_var", si, rinv),
                           ("running_mean", drm, nrm), ("running_var", drv, nrv)):
        assert_close(got.copy_to_host(), ref, TOL, name=name)
    if chan is not None:
        assert rel_err(y.copy_to_host()[:, chan], ry[:, chan]) <= TOL


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_gpu_n32_c256_56x56_every_engine_config(rng, layout, kind):
    g = bn_graph(GPU_DIMS, layout)
    eng, sub = registry.by_name("norm_batch"), partition(g)[0][0]
    base, case = api.get_heuristics(g)[0], prepare(g, rng, kind)
    for cfg in eng.candidates(sub, api.context()):
        run_config(g, case, _as_ec(base, cfg))
