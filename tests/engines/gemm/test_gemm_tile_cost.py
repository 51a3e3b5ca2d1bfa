"""The implicit-GEMM / GEMM engines' per-config cost (gemm.tiled.tile_cost over a tile_static
tuple) and gemm_common.cost are exactly the straightforward model: heuristics.gemm_time with the
tile's measured efficiency over its occupancy, the fast-mainloop, single-stage and swizzle factors
(written out below, every quantity recomputed per call): every tile of every table, split-K,
swizzle, one or two stages, fp64 / fp32 / half inputs, on the nominal H200 and on variants (8 SMs,
a small L2), over problem sizes drawn fresh each run."""
from dataclasses import replace

from ncudnn.engines import device as dev_mod
from ncudnn.engines.gemm import common as gc
from ncudnn.engines import heuristics as H
from ncudnn.engines.gemm.tiled import tile_cost, tile_static


def reference_cost(device, tile, c, m, n, k, batch, in_bytes, out_bytes, extra_bytes, fp64, factor):
    """The GEMM cost model, from scratch."""
    threads, smem = c.num_threads, c.smem_bytes(8 if fp64 else 4)
    eff = tile.eff * factor / H.occupancy_factor(max(H._blocks_per_sm(device, threads, tile.regs, smem), 1),
                                                 threads)
    if c.MAINLOOP == "fast" and (fp64 or in_bytes != 4):
        eff *= gc.GENERIC_BK8_TFLOPS / (tile.tflops or tile.estimate)
    if c.STAGES == 1:
        eff *= gc.SINGLE_STAGE_EFF
    if c.SWIZZLE > 1 and -(-m // c.BLOCK_M) > c.SWIZZLE:
        eff *= gc.SWIZZLE_GAIN
    return H.gemm_time(device, m, n, k, batch=batch, tile=(c.BLOCK_M, c.BLOCK_N), threads=threads, regs=tile.regs,
                       smem=smem, in_bytes=in_bytes, out_bytes=out_bytes, peak="fp64" if fp64 else "fp32",
                       split_k=c.SPLIT_K, extra_bytes=extra_bytes, compute_eff=min(eff, 1.0),
                       per_sm=H._blocks_per_sm(device, threads, tile.regs, smem))


def _devices():
    h = dev_mod.H200
    return (h, replace(h, sm_count=8), replace(h, l2_bytes=1 << 20, smem_per_sm=64 * 1024), dev_mod.current())


def test_tile_cost_equals_gemm_common_cost(rng):
    tiles = {t.label + str(t.cfg.MAINLOOP): t for t in gc.CONV_TILES + gc.MATMUL_TILES + gc.SMALL_TILES}
    n_cmp = 0
    for dev in _devices():
        for tile in tiles.values():
            for split, mode, stages, sw in ((1, "workspace", 2, 1), (4, "workspace", 2, 8), (16, "atomic", 1, 8),
                                            (256, "workspace", 1, 1), (2, "atomic", 2, 2)):
                gcfg = tile.cfg.replace(SPLIT_K=split, SPLIT_MODE=mode, STAGES=stages, SWIZZLE=sw)
                for fp64, in_b, out_b in ((False, 4, 4), (False, 2, 2), (True, 8, 8), (False, 2, 4)):
                    st = tile_static(tile, gcfg, dev, fp64)
                    for _ in range(6):
                        m = int(rng.choice([1, 7, 64, 1000, 100_352, 1 << 21])) + int(rng.integers(0, 3))
                        n = int(rng.choice([1, 3, 64, 512, 4096])) + int(rng.integers(0, 3))
                        k = int(rng.choice([1, 27, 576, 4608, 1 << 17]))
                        b = int(rng.choice([1, 1, 3, 36]))
                        extra = int(rng.choice([0, 256, 1 << 24]))
                        factor = float(rng.choice([1.0, 0.85, 0.95, 2.5]))
                        want = reference_cost(dev, tile, gcfg, m, n, k, b, in_b, out_b, extra, fp64, factor)
                        got = tile_cost(st, dev, m, n, k, b, in_b, out_b, extra, fp64, factor)
                        assert got == want, (tile.label, gcfg, dev.sm_count, m, n, k, b, in_b, fp64, factor)
                        assert gc.cost(dev, tile, gcfg, m, n, k, b, in_b, out_b, extra, fp64, factor) == want
                        assert gc.cost_plain(dev, tile, gcfg, m, n, k, b, in_b, out_b, extra, fp64, factor) == want
                        n_cmp += 1
    assert n_cmp > 3000


def test_tile_cost_is_infinite_when_a_block_cannot_fit():
    dev = replace(dev_mod.H200, regs_per_sm=1024)
    tile = gc.CONV_TILES[0]
    st = tile_static(tile, tile.cfg, dev, False)
    assert gc.cost(dev, tile, tile.cfg, 4096, 4096, 4096) == float("inf")
    assert tile_cost(st, dev, 4096, 4096, 4096, 1, 4, 4, 0, False, 1.0) == float("inf")
