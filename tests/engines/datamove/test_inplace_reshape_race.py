"""The data_movement in-place race: a VIEW_ONLY reshape whose Y is X's own buffer with a layout that is
not a true view. Copied in place, blocks read elements other blocks already overwrote (shown here on
the bare kernel, for the tiled and the strided path); through the engine it stages through the
workspace and equals NumPy. Other overlapping copies are refused with BAD_PARAM before any launch."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import memory
from ncudnn.engines import api, registry
from ncudnn.errors import CudnnError
from ncudnn.ir import Concat, OpGraph, Reshape
from ncudnn.ir.partition import Subgraph
from ncudnn.kernels.datamove import strided_copy as kdm
from ncudnn.types import cudnnBackendReshapeMode_t as RM, cudnnDataType_t as DT, cudnnStatus_t as S

import membound_util as U

F32, F16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF
# (X dims, Y strides): Y has X's dims, transposed in memory; tiled path (2 tiles) and strided (3 blocks)
RACY = {"tiled": ((70, 20), (1, 70)), "strided": ((2, 1100), (1, 2))}


def _strided(host, dims, strides):
    return np.lib.stride_tricks.as_strided(host, dims, [s * host.itemsize for s in strides])


@pytest.mark.sim_only
@pytest.mark.parametrize("name", list(RACY))
def test_bare_in_place_copy_races(rng, name):
    """The hazard is real: the unstaged copy onto its own source gives wrong values. The simulator runs
    threads in an order that always shows it; on a GPU the outcome depends on scheduling (it may come out
    right by luck), so the demonstration is simulator-only -- the staged path below runs in both places."""
    xd, ys = RACY[name]
    a = rng.uniform(-1, 1, xd).astype(np.float32)
    buf = cuda.to_device(a.ravel().copy())
    kdm.copy_strided(buf, buf, kdm.CopySpec(xd, (xd[1], 1), ys))
    assert not np.array_equal(_strided(buf.copy_to_host(), xd, ys), a)


def view_only(xd, ys, dtype=F32, y_dtype=None):
    x = U.t(1, xd, dtype, name="x")
    y = U.t(2, xd, y_dtype or dtype, ys, name="y")
    return OpGraph([Reshape("rs", {"X": x}, {"Y": y}, mode=RM.CUDNN_RESHAPE_VIEW_ONLY)]).finalize(), x, y


@pytest.mark.parametrize("name", list(RACY))
def test_view_only_reshape_in_place_stages_through_workspace(rng, name):
    xd, ys = RACY[name]
    g, x, y = view_only(xd, ys)
    a = rng.uniform(-1, 1, xd)
    buf = U.upload(a, x)
    plan = U.run(g, {x.uid: buf, y.uid: buf})   # U.run hands a poisoned (0xA5) workspace
    assert plan.parts[0].workspace_size == xd[0] * xd[1] * 4 <= plan.workspace_size   # exact; the plan aligns
    np.testing.assert_array_equal(U.download(buf, y), U.cast(a, F32))


def test_view_only_reshape_in_place_with_cast(rng):
    """fp16 X, fp32 Y over the same bytes (Y's range covers X's): staged, then cast."""
    xd, ys = (8, 12), (1, 8)
    g, x, y = view_only(xd, ys, F16, F32)
    a = rng.uniform(-2, 2, xd)
    host = np.full(96, np.nan, np.float32)
    host.view(np.float16)[:96] = a.astype(np.float16).ravel()
    buf = cuda.to_device(host)
    # the same bytes for both tensors, as one untyped byte buffer (a typed buffer must match its tensor's type)
    raw = buf.view(np.uint8)
    plan = U.run(g, {x.uid: raw, y.uid: raw})
    assert plan.parts[0].workspace_size == 96 * 2
    np.testing.assert_array_equal(U.download(buf, y), U.cast(a, F16))


def _launch_count(g, views, scratch=None):
    eng = registry.by_name("data_movement")
    sub = Subgraph(kind=g.nodes[0].OP, nodes=list(g.nodes))
    plan = eng.build(sub, eng.default_config(sub), api.context())
    return len(plan.launches(views, scratch))


def test_staging_only_when_aliased():
    g, x, y = view_only((70, 20), (1, 70))
    b = cuda.device_array(1400, np.float32)
    ws = memory.as_view(cuda.device_array(1400 * 4, np.uint8))
    assert _launch_count(g, {x.uid: memory.as_view(b), y.uid: memory.as_view(b)}, ws) == 2
    other = memory.as_view(cuda.device_array(1400, np.float32))
    assert _launch_count(g, {x.uid: memory.as_view(b), y.uid: other}, ws) == 1


def _refused(g, pack, port):
    with pytest.raises(CudnnError) as e:
        U.run(g, pack)
    msg = str(e.value)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "overlap" in msg and f"{port} (uid" in msg, msg


def test_logical_reshape_in_place_is_refused(rng):
    x = U.t(1, (6, 10), F32, name="x")
    y = U.t(2, (6, 10), F32, (1, 6), name="y")
    g = OpGraph([Reshape("rs", {"X": x}, {"Y": y}, mode=RM.CUDNN_RESHAPE_LOGICAL)]).finalize()
    assert api.build_plan(g, api.get_heuristics(g)[0]).workspace_size == 0
    buf = U.upload(rng.uniform(-1, 1, (6, 10)), x)
    _refused(g, {x.uid: buf, y.uid: buf}, "X")


def test_true_view_at_a_shifted_address_is_refused(rng):
    g, x, y = view_only((4, 6), (6, 1))
    host = cuda.to_device(np.zeros(30, np.float32))
    _refused(g, {x.uid: host[:24], y.uid: host[4:28]}, "X")


def test_concat_input_overlapping_outside_its_slab_is_refused(rng):
    x0, x1 = U.t(1, (3, 4), F32, name="x0"), U.t(2, (5, 4), F32, name="x1")
    y = U.t(3, (8, 4), F32, name="y")
    g = OpGraph([Concat("cat", {"X0": x0, "X1": x1}, {"Y": y}, axis=0, in_place_index=1)]).finalize()
    out = cuda.to_device(np.zeros(32, np.float32))
    x0b = U.upload(rng.uniform(-1, 1, (3, 4)), x0)
    _refused(g, {x0.uid: x0b, x1.uid: out[8:28], y.uid: out}, "X1")   # slab is at 12, not 8
