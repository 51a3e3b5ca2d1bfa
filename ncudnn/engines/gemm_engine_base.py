"""What every engine over the SIMT GEMM mainloop shares (plain matmul, 1x1 conv, implicit-GEMM conv):
knob caching, the keep prune, numerical notes, the memoized candidate space and ranking, the exact
workspace and the cost. A subclass supplies ``problem(sub)``, ``gemm_shape(p) -> (M, N, K, batch)``,
``_knob_specs()``, ``_make_space(sub)`` and, if its loaders cost more, ``efficiency(p)``."""
import math

from ..types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from . import gemm_common as gc
from .base import OK, Engine

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t


class TiledGemmEngine(Engine):
    TILES = gc.BIG_TILES
    numerical_notes = ()

    def gemm_shape(self, p):
        raise NotImplementedError

    def efficiency(self, p):
        """Engine-specific factor on the tile's measured efficiency."""
        return 1.0

    def knobs(self, sub):
        ks = self.__dict__.get("_knobs")
        if ks is None:
            ks = self.__dict__["_knobs"] = self._knob_specs()
        return ks

    def gemm_config(self, cfg):
        """The kernel GemmConfig of ``cfg`` (remembered per knob values: hashing the tile table per
        call cost more than the rest of a config's cost)."""
        d = self.__dict__.get("_gcfgs")
        if d is None:
            d = self.__dict__["_gcfgs"] = {}
        hit = d.get(cfg.knobs)
        if hit is None:
            hit = d[cfg.knobs] = gc.gemm_config(self.TILES, cfg)
        return hit

    def _memo(self, sub, what):
        """This engine's per-subgraph table ``what`` (keep results, costs per device), keyed by knobs."""
        d = sub.__dict__.get("_tiled_memo")
        if d is None:
            d = sub.__dict__["_tiled_memo"] = {}
        key = (self.name, what)
        t = d.get(key)
        if t is None:
            t = d[key] = {}
        return t

    def keep(self, sub, cfg, ctx):
        memo = self._memo(sub, "keep")
        hit = memo.get(cfg.knobs)
        if hit is None:
            hit = memo[cfg.knobs] = self._keep(sub, cfg, ctx)
        return hit

    def _knobs_ok(self, sub, cfg, ctx):
        """(status, reason) of the knob values alone (ranges, powers of 2): the same for every subgraph,
        remembered per knob values."""
        d = self.__dict__.get("_knobs_memo")
        if d is None:
            d = self.__dict__["_knobs_memo"] = {}
        hit = d.get(cfg.knobs)
        if hit is None:
            hit = super().keep(sub, cfg, ctx)
            if hit[0] == S.CUDNN_STATUS_SUCCESS:
                for k in (K.CUDNN_KNOB_TYPE_SPLIT_K, K.CUDNN_KNOB_TYPE_SWIZZLE):
                    if not gc.is_pow2(cfg.get(k)):
                        hit = (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {k.name} = {cfg.get(k)} is not a power of 2")
                        break
            d[cfg.knobs] = hit
        return hit

    def _keep(self, sub, cfg, ctx):
        st, why = self._knobs_ok(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            p = self.problem(sub)
        except gc.Reject as e:
            return e.status, e.reason
        M, N, K_, B = self.gemm_shape(p)
        ok, why = gc.keep_config(self.name, self.gemm_config(cfg), p.fp64, M, N, K_, B, p.epi.linear,
                                 p.epi.spec.out_dtype)
        return OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, why)

    def config_notes(self, sub, cfg):
        atomic = cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1) > 1 and cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1) == 0
        memo = self._memo(sub, "notes")
        hit = memo.get(atomic)
        if hit is None:
            notes = self.numerical_notes
            if atomic:
                notes += (NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC,)
            try:
                out = self.problem(sub).epi.out
                hit = tuple(dict.fromkeys(notes + gc.tail_notes(sub, out)))
            except gc.Reject:
                hit = notes
            memo[atomic] = hit
        return hit

    def _space(self, sub):
        return gc.memo(sub, ("space", self.name), lambda: self._make_space(sub))

    def candidates(self, sub, ctx):
        """The curated space, valid configs only, cheapest predicted first (<= 64)."""
        dev = ctx.device if ctx is not None else None
        return gc.memo(sub, ("candidates", self.name, dev), lambda: self._candidates(sub, ctx))

    def _candidates(self, sub, ctx):
        good = [c for c in self._space(sub) if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
        dev = ctx.device if ctx is not None else None
        if dev is None or len(good) <= 1:
            return tuple(good[:64])
        return gc.rank_candidates(good, lambda c: self.cost(sub, c, dev))

    def workspace_size(self, sub, cfg):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return 0
        M, N, _, B = self.gemm_shape(p)
        return max(gc.split_workspace(self.gemm_config(cfg), M, N, B, p.fp64), gc.tail_workspace(sub, p.epi.out))

    def cost(self, sub, cfg, device):
        memo = self._memo(sub, device)
        hit = memo.get(cfg.knobs)
        if hit is None:
            hit = memo[cfg.knobs] = self._cost(sub, cfg, device)
        return hit

    def _shape(self, sub):
        """What the cost of every config of ``sub`` shares: (M, N, K, batch, input / output bytes,
        epilogue bytes, fp64, the engine's efficiency, the tail's time); None for a rejected subgraph."""
        memo = self._memo(sub, "shape")
        hit = memo.get(None, memo)
        if hit is memo:
            try:
                p = self.problem(sub)
                hit = (*self.gemm_shape(p), p.in_bytes, p.out_bytes, p.extra_bytes, p.fp64, self.efficiency(p),
                       gc.tail_time(sub, p.epi.out))
            except gc.Reject:
                hit = None
            memo[None] = hit
        return hit

    def _cost(self, sub, cfg, device):
        shape = self._shape(sub)
        if shape is None:
            return math.inf
        M, N, K_, B, in_b, out_b, extra, fp64, eff, tail = shape
        tile = self.TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
        return gc.cost(device, tile, self.gemm_config(cfg), M, N, K_, B, in_b, out_b, extra, fp64, eff) + tail
