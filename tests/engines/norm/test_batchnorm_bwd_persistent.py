"""The one-kernel packed-NHWC batch-norm backward (:mod:`ncudnn.kernels.norm.bn_persist`): the kernel launched
directly at small thread counts (register rows, shared-memory rows and streamed rows all in use, ragged
channel tile, a thread with no rows) against the float64 oracle with poisoned outputs, and the engine's
KERNEL_CFG persist variants end to end (one step; misaligned buffers take the three-launch default)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import memory
from ncudnn.engines.norm.batch import DEFAULT_COLS_VARIANT_BWD
from ncudnn.engines.norm.bn_steps import COLS_LABELS, COLS_VARIANTS, var_persist
from ncudnn.kernels.norm import bn_persist as kp
from ncudnn.reference.ops import run_node
from ncudnn.testing import assert_close, poison_value, size

import membound_util as U
from test_batchnorm_nhwc_colsv import H, W, _bwd, _cfg
from test_norm_batch_engine import _execute

PERSIST = [i for i, v in enumerate(COLS_VARIANTS) if var_persist(v) is not None]


def _oracle(x, dy, mean, inv, scale):
    """dx, dscale, dbias of batch norm over the rows of (rows, C) float64 arrays."""
    n = x.shape[0]
    xh = (x - mean) * inv
    dbias = dy.sum(0)
    dscale = (dy * xh).sum(0)
    dx = scale * inv * (dy - dbias / n - xh * dscale / n)
    return dx, dscale, dbias


@pytest.mark.parametrize("acache, pf", [(False, 0), (True, 0), (True, 2)], ids=["sts", "cpasync", "prefetch2"])
@pytest.mark.parametrize("rows, C, txv, ty, nr, ns, unroll", [
    (101, 16, 4, 8, 1, 2, 2),      # 13 rows a thread: 1 register, 2 shared, 10 streamed (odd tail)
    (37, 12, 4, 4, 2, 3, 3),       # C = 12: lane 3 of each row group idle; 10 rows a thread, the last 9
    (3, 8, 2, 4, 1, 1, 2),         # fewer rows than row groups: threads with no rows at all
])
def test_bnp_kernel_direct(rng, rows, C, txv, ty, nr, ns, unroll, acache, pf):
    _direct(rng, rows, C, txv, ty, nr, ns, unroll, acache, pf, False)


@pytest.mark.parametrize("acache", [False, True], ids=["sts", "cpasync"])
def test_bnp_kernel_direct_gbar(rng, acache):
    """The inline grid barrier (grid_sync) instead of this_grid().sync(): the counter comes back with bits 0-30
    zero after the kernel's two barriers."""
    bar = _direct(rng, 101, 16, 4, 8, 1, 2, 2, acache, 0, True)
    assert int(bar.copy_to_host()[0]) & 0x7FFFFFFF == 0


def _direct(rng, rows, C, txv, ty, nr, ns, unroll, acache, pf, gbar):
    x, dy = rng.uniform(-1, 1, (rows, C)), rng.uniform(-1, 1, (rows, C))
    mean, inv, scale = rng.uniform(-0.5, 0.5, C), rng.uniform(0.5, 2, C), rng.uniform(-1, 1, C)
    f = lambda a: cuda.to_device(np.ascontiguousarray(a, np.float32).ravel())  # noqa: E731
    pois = lambda n: cuda.to_device(np.full(n, poison_value("float32"), np.float32))  # noqa: E731
    dense = (("float32", 0, 1),) * len(kp.CHANNEL_ARRAYS)
    cpb, _ = kp.phase2_geometry(C, 1, txv * ty)
    kern, _ = kp.persist_bwd_kernel(C, dense, txv, ty, 1, nr, ns, unroll, cpb, True, acache, 0, True, pf, gbar)
    dx, dscale, dbias = pois(rows * C), pois(C), pois(C)
    bar = cuda.to_device(np.zeros(1, np.uint32))
    args = [f(x), f(dy), dx, pois(C), pois(C), pois(3 * C), f(mean), f(inv), f(scale), dscale, dbias,
            rows, rows, 1, float(rows)] + ([bar] if gbar else [])
    kern[(1, 1), (txv, ty), 0, kp.shared_bytes(txv * ty, ns, pf)](*args)
    q = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    want = _oracle(q(x), q(dy), q(mean), q(inv), q(scale))
    assert_close(dx.copy_to_host().reshape(rows, C), want[0], "float32", name="dx")
    assert_close(dscale.copy_to_host(), want[1], "float32", name="dscale")
    assert_close(dbias.copy_to_host(), want[2], "float32", name="dbias")
    return bar


def test_bnp_config_and_phase2():
    g = kp.persist_config(100352, 256, 132, 512)
    assert (g.txv, g.ty, g.tiles, g.chunks) == (64, 8, 1, 132) and g.chunks * g.chunk_rows >= 100352
    assert kp.persist_config(1000, 2048, 4, 512) is None          # 8 tiles on 4 blocks
    assert kp.persist_config(1000, 6, 4, 512) is None             # C % 4
    assert tuple(kp.persist_config(70, 16, 132, 512, fill=True)) == (4, 128, 1, 132, 1)   # 62 empty chunks
    assert kp.persist_config(70, 16, 132, 512).chunks == 70
    assert kp.persist_config(100000, 1280, 132, 512, fill=True).tiles * 26 == 130     # 5 tiles: not full
    assert kp.phase2_geometry(256, 132, 512) == (2, 256)
    assert kp.phase2_geometry(64, 264, 512) == (1, 512)
    assert kp.phase2_geometry(4096, 16, 512) == (256, 2)
    assert kp.shared_bytes(512, 13) + kp.static_bytes(512) <= kp.SMEM_LIMIT


@pytest.mark.parametrize("variant", [PERSIST[0], PERSIST[1], PERSIST[5]], ids=lambda v: COLS_LABELS[v])
def test_bnp_engine_variant(rng, variant):
    """N = 2, 5 x 7, C = 16 through the engine API: one step, every written tensor against the oracle (on a GPU most
    chunks empty)."""
    g = _bwd(2, 16)
    plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=_cfg(g, variant, unroll=4))
    steps = plan.parts[0].steps
    assert len(steps) == 1 and steps[0].name == "norm_bn_persist_bwd"
    threads, _, ns, _, _, pf = var_persist(COLS_VARIANTS[variant])
    from ncudnn.platform import simulator_enabled
    # a full grid (the inline barrier on the device counter, shared memory padded to one block an SM): one block in
    # the simulator, on a GPU one chunk an SM (70 of 1 row, the rest empty)
    from ncudnn.kernels.primitives import warp as kprim
    assert steps[0].grid == (1, 1 if simulator_enabled() else kprim.sm_count())
    assert steps[0].shared == max(kp.shared_bytes(threads, ns, pf), kp.ONE_BLOCK_SHARED) and steps[0].cooperative
    assert [a.kind for a in steps[0].args].count("device") == 1
    assert steps[0].block[0] * steps[0].block[1] == threads


def test_bnp_forward_and_knobs_rejected():
    from test_batchnorm_nhwc_colsv import _fwd
    from ncudnn.engines import api
    g = _fwd(2, 16)
    st, why = api.check_support(g, _cfg(g, PERSIST[0], unroll=4))
    assert int(st) != 0 and "backward only" in why
    gb = _bwd(2, 16)
    st, why = api.check_support(gb, _cfg(gb, PERSIST[0], occ=2, unroll=4))
    assert int(st) != 0 and "OCCUPANCY" in why
    from ncudnn.platform import simulator_enabled
    wide = _bwd(1, 512)          # 2 channel tiles: the simulator's one-block grid cannot hold them (a GPU's can)
    st, why = api.check_support(wide, _cfg(wide, PERSIST[0], unroll=4))
    assert (int(st) != 0 and "co-resident" in why) if simulator_enabled() else int(st) == 0
    from ncudnn.kernels.primitives import warp as kprim
    five = _bwd(1, 1280)         # 5 channel tiles: a grid of 5 x (SMs // 5) blocks leaves SMs idle (132 SMs: 2)
    st, why = api.check_support(five, _cfg(five, PERSIST[0], unroll=4))
    if simulator_enabled():
        assert int(st) != 0 and "co-resident" in why
    elif kprim.sm_count() % 5:
        assert int(st) != 0 and "must fill" in why
    from ncudnn.engines.norm.batch import DEFAULT_COLS_VARIANT, _default_cols
    from ncudnn.ir.partition import partition
    assert _default_cols(partition(five)[0][0]) == DEFAULT_COLS_VARIANT      # the three-launch default there


def test_bnp_misaligned_takes_the_default(rng):
    """x, dy and dx 4 bytes off a 16-byte boundary: the three-launch default runs instead (its VEC 1 twins)."""
    C, n = 16, 2
    g = _bwd(n, C)
    node = g.nodes[0]
    span = n * C * H * W
    vals, pack = {}, {}
    for p in ("X", "DY"):
        t = node.inputs[p]
        v = rng.uniform(-1, 1, t.dims)
        host = np.full(span + 1, poison_value("float32"), np.float32)
        np.lib.stride_tricks.as_strided(host[1:], t.dims, [s * 4 for s in t.strides])[...] = v
        vals[p], pack[t.uid] = U.cast(v, t.dtype), cuda.to_device(host)[1:]
    dxd = node.outputs["DX"]
    pack[dxd.uid] = cuda.to_device(np.full(span + 1, poison_value("float32"), np.float32))[1:]
    for p in ("SCALE", "MEAN", "INV_VARIANCE"):
        t = node.inputs[p]
        a = rng.uniform(0.5, 2.0, t.dims) if p == "INV_VARIANCE" else rng.uniform(-1, 1, t.dims)
        vals[p], pack[t.uid] = U.cast(a, t.dtype), U.upload(a, t)
    for p in ("DSCALE", "DBIAS"):
        pack[node.outputs[p].uid] = U.poisoned(node.outputs[p])
    assert memory.as_view(pack[dxd.uid]).ptr % 16 == 4
    plan = U.run_ec(g, pack, _cfg(g, PERSIST[0], unroll=4))
    step = plan.parts[0].steps[0]
    assert isinstance(step.fallback, list) and len(step.fallback) == 3
    assert DEFAULT_COLS_VARIANT_BWD == PERSIST[0]
    ref = run_node(node, vals)
    dx = np.lib.stride_tricks.as_strided(pack[dxd.uid].copy_to_host(), dxd.dims, [s * 4 for s in dxd.strides])
    assert_close(dx.astype(np.float64), ref["DX"], "float32", name="dx")
    for p in ("DSCALE", "DBIAS"):
        t = node.outputs[p]
        assert_close(U.download(pack[t.uid], t), ref[p], "float32", name=p)


@pytest.mark.gpu
def test_bnp_gpu_resnet_shape(rng):
    """71680 rows of 256 channels (GPU: 132 chunks) through every persist variant."""
    n, c = size((2, 16), (2048, 256))
    if n == 2:
        pytest.skip("GPU shape")
    g = _bwd(n, c)
    for v in PERSIST:
        plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=_cfg(g, v, unroll=4))
        step = plan.parts[0].steps[0]
        assert [a.kind for a in step.args].count("device") == 1      # a full grid: the inline barrier
    from ncudnn.kernels.primitives.grid_sync import device_counter
    assert int(device_counter().copy_to_host()[0]) & 0x7FFFFFFF == 0


@pytest.mark.gpu
def test_bnp_gpu_full_grid_inline_barrier(rng):
    """N = SMs x 5 x 7 rows of 16 channels: one chunk of 35 rows a block, every SM (the inline barrier on the device
    counter), run three times in a row through two variants (the counter needs no reset between launches);
    small enough for compute-sanitizer."""
    from ncudnn.kernels.primitives import warp as kprim
    from ncudnn.kernels.primitives.grid_sync import device_counter
    from ncudnn.platform import simulator_enabled
    if simulator_enabled():
        pytest.skip("the simulator runs one-block grids only")
    g = _bwd(kprim.sm_count(), 16)
    for v in (PERSIST[0], PERSIST[0], PERSIST[1]):
        plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=_cfg(g, v, unroll=4))
        step = plan.parts[0].steps[0]
        assert step.grid == (1, kprim.sm_count()) and step.cooperative
        assert [a.kind for a in step.args].count("device") == 1
        assert int(device_counter().copy_to_host()[0]) & 0x7FFFFFFF == 0
