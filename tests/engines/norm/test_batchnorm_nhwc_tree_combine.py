"""Packed-NHWC batch norm, the many-block tree combine (KERNEL_CFG ..._fin8 / _fin4: the fused chunk combine
+ coefficients on ceil(C / cpb) blocks) and the aligned chunks with the threads' last rows loaded at once
(..._al): through the engine API forward and backward against the float64 oracle with poisoned outputs
(ragged last chunks, odd chunk counts), and the tree combine kernel launched directly (odd chunk
counts, a ragged channel block, several passes over the chunks)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api
from ncudnn.engines.norm.batch import DEFAULT_COLS_VARIANT, NormBatchEngine
from ncudnn.engines.norm.bn_steps import COLS_LABELS, COLS_VARIANTS, var_align, var_cpb
from ncudnn.kernels.norm import bn_colsv as kv
from ncudnn.kernels.norm import bn_fin as kfin
from ncudnn.kernels.norm.bn_finalize import BWD_ARRAYS
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendKnobType_t as K

from test_batchnorm_nhwc_colsv import _bwd, _cfg, _fwd
from test_norm_batch_engine import _execute

NEW = [COLS_LABELS.index(n) for n in ("colsv4_rev_hint_fin8", "colsv4_rev_hint_fin4", "colsv4_rev_hint_fin_al",
                                      "colsv4_rev_hint_fin8_al", "colsv4_rev_hint_fin4_al")]


def _steps(plan):
    steps = plan.parts[0].steps
    assert [s.name.split(":")[0] for s in steps] == ["norm_bn_colsv_partial", steps[1].name.split(":")[0],
                                                     "norm_bn_colsv_apply"]
    assert steps[1].name.startswith("norm_bn_fin") and steps[0].grid == steps[2].grid
    return steps


@pytest.mark.parametrize("variant", NEW)
def test_bng_backward_variants(rng, variant):
    """N = 3, 5 x 7, C = 64 (TXV 16 x TY 16), unroll 4: 105 rows in 2 chunks; aligned: 64 + 41 rows
    (threads with 3 and 2 rows left: the loaded-at-once tail)."""
    g = _bwd(3, 64)
    plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=_cfg(g, variant, unroll=4))
    steps = _steps(plan)
    var = COLS_VARIANTS[variant]
    if var_cpb(var) != 32:
        assert steps[1].block[0] == var_cpb(var) and steps[1].grid == 64 // var_cpb(var)
    chunk_rows = steps[0].args[-1].value
    assert (chunk_rows % 64 == 0) == var_align(var)


@pytest.mark.parametrize("variant", [NEW[1], NEW[3]])
def test_bng_forward_variants(rng, variant):
    g = _fwd(3, 64)
    plan = _execute(g, rng, positive=("INPUT_RUNNING_VAR",), ec=_cfg(g, variant, unroll=4))
    _steps(plan)


def test_bng_backward_aligned_unroll2_three_chunks(rng):
    """Unroll 2: 3 chunks of 32 rows + a ragged last one (odd chunk count) on the fin4 tree."""
    g = _bwd(4, 64)
    plan = _execute(g, rng, positive=("INV_VARIANCE",), ec=_cfg(g, NEW[4], unroll=2))
    steps = _steps(plan)
    assert steps[0].grid[1] % 2 == 1 and steps[0].args[-1].value == 32


def _tree_bwd(rng, chunks, C, cpb, lanes, nper):
    p0, p1 = rng.standard_normal((chunks, C)), rng.standard_normal((chunks, C))
    mean, inv = rng.uniform(-1, 1, C), rng.uniform(0.5, 2, C)
    scale = rng.uniform(-1, 1, C)
    f32 = lambda a: a.astype(np.float32)  # noqa: E731
    dev = lambda a: cuda.to_device(f32(a).ravel())  # noqa: E731
    outs = {n: cuda.to_device(np.full(C, poison_value("float32"), np.float32))
            for n in ("dscale", "dbias", "eq_dy", "eq_x", "eq_b")}
    ins = {"dy_sum": dev(np.zeros(C)), "dyx_sum": dev(np.zeros(C)), "mean": dev(mean), "inv": dev(inv),
           "scale": dev(scale)}
    arrays = tuple(("float32", 0, 1) for _ in BWD_ARRAYS)
    kern, src = kfin.bwd_kernel(arrays, lanes, 4, cpb, nper)
    count = 123.0
    args = [dev(p0), dev(p1)] + [outs[n] if n in outs else ins[n] for n, _ in BWD_ARRAYS] + [chunks, C, count]
    kern[(-(-C // cpb),), (cpb, lanes)](*args)
    a = f32(p0).astype(np.float64).sum(0)
    b = f32(p1).astype(np.float64).sum(0)
    mu, iv, sc = (f32(v).astype(np.float64) for v in (mean, inv, scale))
    ds = iv * b
    want = {"dscale": ds, "dbias": a, "eq_dy": sc * iv, "eq_x": -sc * iv * iv * ds / count,
            "eq_b": sc * iv * (iv * mu * ds - a) / count}
    got = {n: o.copy_to_host() for n, o in outs.items()}
    for n, w in want.items():
        assert_close(got[n].astype(np.float64), w, "float32", name=n)
    return got


@pytest.mark.parametrize("chunks,C,cpb,lanes,nper", [(37, 10, 4, 16, 3), (37, 10, 8, 32, 2), (5, 12, 4, 8, 1)])
def test_bng_tree_combine_direct(rng, chunks, C, cpb, lanes, nper):
    """Odd chunk counts over (cpb, lanes) blocks; (37, 4 x 16 x 3): a second pass over the chunks;
    C = 10: the last block's channels past C write nothing (poison stays, checked by the size)."""
    got = _tree_bwd(rng, chunks, C, cpb, lanes, nper)
    assert all(v.shape == (C,) for v in got.values())


def test_bng_tree_geometry_and_default():
    assert kfin.tree_geometry(264, 8) == (32, 9) and kfin.tree_geometry(264, 4) == (64, 5)
    assert kfin.tree_geometry(3, 4) == (4, 1)
    g = kv.colsv_config(100352, 256, 132, vec=4, blocks_per_sm=4, unroll=4, align=True)
    assert g.chunk_rows % (g.ty * 4) == 0 and g.chunks * g.tiles <= 132 * 4 and g.chunks * g.chunk_rows >= 100352
    gb = _bwd(32, 256)
    first = api.get_heuristics(gb)[0].config
    from ncudnn.engines.norm import batch as nb
    assert first.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) == nb.DEFAULT_COLS_VARIANT_BWD    # the others rank after it
    eng = NormBatchEngine()
    from ncudnn.engines import api as A
    sub = A.problem(gb)
    steps = eng._steps(sub, first.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, NEW[1]))[0]
    assert steps[1].grid >= 32 and steps[1].block[0] == 4


def test_bng_backward_default_knob(monkeypatch):
    """DEFAULT_COLS_VARIANT_BWD picks the backward's default alone (the forward keeps DEFAULT_COLS_VARIANT)
    and the heuristics rank it first."""
    from ncudnn.engines import heuristics
    from ncudnn.engines.norm import batch as nb
    with monkeypatch.context() as m:
        m.setattr(nb, "DEFAULT_COLS_VARIANT_BWD", NEW[4])
        heuristics.bump()            # rankings cached before are keyed by the older generation
        gb, gf = _bwd(32, 256), _fwd(32, 256)
        assert api.get_heuristics(gb)[0].config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) == NEW[4]
        assert api.get_heuristics(gf)[0].config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) == DEFAULT_COLS_VARIANT
    heuristics.bump()
    assert api.get_heuristics(_bwd(32, 256))[0].config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) == nb.DEFAULT_COLS_VARIANT_BWD


@pytest.mark.slow
def test_bng_kernels_compile_for_sm90():
    """The tree combine (fwd / bwd) and the loaded-at-once tails compile for sm_90: no spills, in budget."""
    from ncudnn.kernels.runtime import compile_check
    names = ["bn_fin_bwd_tree8", "bn_fin_bwd_tree4", "bn_fin_fwd_tree4", "bn_colsv_partial_bwd_gtail",
             "bn_colsv_apply_bwd_gtail", "bn_colsv_apply_fwd_gtail"]
    assert set(names) <= set(compile_check.registered_cases())
    results = compile_check.run_compile_check(names, timeout=1200, jobs=2)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed and len(results) == len(names), "\n".join(failed)
