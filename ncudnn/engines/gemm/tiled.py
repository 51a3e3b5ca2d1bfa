"""The machinery every engine over the SIMT GEMM mainloop shares (plain matmul, 1x1 conv, implicit-GEMM
conv), as one helper object its family base holds (``self.tiled = TiledGemm(self)``): knob caching, the
keep prune, numerical notes, the memoized candidate space and ranking, the exact workspace and the cost.

The family base answers ``knobs`` / ``default_config`` / ``keep`` / ``config_notes`` / ``candidates`` /
``cost`` / ``candidate_costs`` / ``workspace_size`` through it, and gives it these hooks:

* ``name``, ``TILES``, ``numerical_notes``;
* ``problem(sub)`` (raises gc.Reject), ``gemm_shape(p) -> (M, N, K, batch)``, ``efficiency(p)`` (a factor
  on the tile's measured efficiency);
* ``knob_specs()``, ``make_space(sub)`` (the configs worth ranking);
* ``keep_extra``: None, or ``(sub, cfg, p) -> (status, reason)``, engine-specific refusals after the GEMM
  checks, asked where ``needs_extra(cfg)``;
* ``adjust_cost``: None, or ``(sub, cfg, seconds, device) -> seconds`` on every config's tile cost;
* ``rank_configs(sub, configs, costs)``: the candidates of the valid ``configs`` (:meth:`TiledGemm.rank`
  is the default rule).
"""
import math

from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from . import common as gc
from ...kernels.gemm.config import check
from ..base import OK, Engine

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
_SPACE = object()   # keep-memo key: the whole space was checked

#: the per-config cost model (gemm/cost.py: gc.cost uses it too)
tile_static, tile_cost = gc.tile_static, gc.tile_cost


class TiledGemm:
    """One engine's tables (per knob values: kernel configs, knob checks, Config objects, the cost's
    per-device constants) and its per-subgraph memos (on the subgraph, under ``_tiled_<engine name>``)."""

    def __init__(self, engine):
        self.engine = engine
        self.memo_attr = "_tiled_" + engine.name
        #: the class's own ``cost`` (candidate_costs answers only while it is the one in use)
        self.own_cost = type(engine).cost
        self._knobs = self._default = None
        self._gcfgs, self.kstatic, self._knobs_memo, self._statics_memo = {}, {}, {}, {}
        #: (base knobs, TILE_SIZE, SPLIT_K, SPLIT_K_BUF, SWIZZLE, SPLIT_RS) -> the Config :meth:`config` made
        self.made = {}
        self._last_memo = self._last_cost = None

    def knobs(self):
        ks = self._knobs
        if ks is None:
            ks = self._knobs = self.engine.knob_specs()
        return ks

    def gemm_config(self, cfg):
        """The kernel GemmConfig of ``cfg`` (remembered per knob values: hashing the tile table per
        call cost more than the rest of a config's cost)."""
        d = self._gcfgs
        hit = d.get(cfg.knobs)
        if hit is None:
            hit = d[cfg.knobs] = gc.gemm_config(self.engine.TILES, cfg)
        return hit

    def memo(self, sub, what):
        """The engine's per-subgraph table ``what`` (keep results, costs per device, workspace, notes,
        candidates per device, the cost's shape), keyed by knob values."""
        last = self._last_memo              # the heuristics ask about one subgraph many times in a row
        if last is not None and last[0] is sub:
            d = last[1]
        else:
            attr = self.memo_attr
            d = sub.__dict__.get(attr)
            if d is None:
                d = sub.__dict__[attr] = {}
            self._last_memo = (sub, d)
        t = d.get(what)
        if t is None:
            t = d[what] = {}
        return t

    # ---- keep: the knob values alone (per engine), then the GEMM checks (per subgraph)

    def keep(self, sub, cfg, ctx):
        memo = self.memo(sub, "keep")
        hit = memo.get(cfg.knobs)
        if hit is None:
            if _SPACE not in memo:          # first question on this subgraph: the whole space at once
                self._keep_space(sub, memo)
                hit = memo.get(cfg.knobs)
            if hit is None:
                hit = memo[cfg.knobs] = self._keep(sub, cfg, ctx)
        return hit

    def any_kept(self, sub):
        """Whether some config of the space passes :meth:`keep` (what check_support needs)."""
        memo = self.memo(sub, "keep")
        if _SPACE not in memo:
            self._keep_space(sub, memo)
        return memo[_SPACE]

    def knob_static(self, cfg):
        """Per knob values (remembered): (the knob values' own status, GemmConfig, TILE_SIZE, SPLIT_K,
        the kernel check for 4-byte and 8-byte accumulators, whether the engine's ``keep_extra``
        applies, atomic split-K)."""
        d = self.kstatic
        hit = d.get(cfg.knobs)
        if hit is None:
            gcfg = self.gemm_config(cfg)
            split = cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1)
            hit = d[cfg.knobs] = (self.knobs_ok(None, cfg, None), gcfg, cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE),
                                  split, check(gcfg, 4), check(gcfg, 8), self.engine.needs_extra(cfg),
                                  split > 1 and cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1) == 0)
        return hit

    def default_config(self, sub):
        """The default config (the knobs do not depend on the subgraph: made once)."""
        hit = self._default
        if hit is None:
            hit = self._default = Engine.default_config(self.engine, sub)
        return hit

    def _keep_space(self, sub, memo):
        """:meth:`_keep` of every config of the space into ``memo`` (knob values -> (status, reason)),
        the problem read once; ``memo[_SPACE]``: whether one passed. The GEMM checks are
        ``gc.keep_config``'s (gemm/tiles.py; tests/engines/conv/test_conv_ranking_order.py holds them equal)."""
        eng = self.engine
        space = self.space(sub)
        try:
            p = eng.problem(sub)
        except gc.Reject:
            memo[_SPACE] = False            # (an empty space) _keep answers one config at a time
            return
        M, N, K_, B = eng.gemm_shape(p)
        fp64, name, extra = p.fp64, eng.name, eng.keep_extra
        atomic_ok = p.epi.linear and p.epi.spec.out_dtype in ("float32", "float64")
        kst, static = self.kstatic, self.knob_static
        success, bad, big = S.CUDNN_STATUS_SUCCESS, S.CUDNN_STATUS_NOT_SUPPORTED, gc.MAX_GRID_YZ
        anyok = False
        for c in space:
            ks = kst.get(c.knobs) or static(c)
            st = ks[0]
            if st[0] == success:
                g = ks[1]
                ok, why = ks[5] if fp64 else ks[4]
                split = g.SPLIT_K
                if not ok:
                    st = (bad, f"{name}: {why}")
                elif -(-M // g.BLOCK_M) > big:
                    st = (bad, f"{name}: M = {M} needs more than {big} tile rows at BLOCK_M {g.BLOCK_M}")
                elif B * split > big:
                    st = (bad, f"{name}: batch {B} x SPLIT_K {split} > {big} (grid z)")
                elif split > 1 and K_ < split * g.BLOCK_K:
                    st = (bad, f"{name}: SPLIT_K {split} leaves empty slices of K = {K_} (BLOCK_K {g.BLOCK_K})")
                elif split > 1 and g.SPLIT_MODE == "atomic" and not atomic_ok:
                    st = (bad, f"{name}: atomic split-K needs an alpha/beta-only epilogue and an fp32/fp64 output")
                else:
                    st = extra(sub, c, p) if ks[6] else OK
                    anyok = anyok or st[0] == success
            memo[c.knobs] = st
        memo[_SPACE] = anyok

    def knobs_ok(self, sub, cfg, ctx):
        """(status, reason) of the knob values alone (ranges, powers of 2): the same for every subgraph,
        remembered per knob values."""
        d = self._knobs_memo
        hit = d.get(cfg.knobs)
        if hit is None:
            hit = Engine.keep(self.engine, sub, cfg, ctx)
            if hit[0] == S.CUDNN_STATUS_SUCCESS:
                for k in (K.CUDNN_KNOB_TYPE_SPLIT_K, K.CUDNN_KNOB_TYPE_SWIZZLE):
                    if not gc.is_pow2(cfg.get(k)):
                        hit = (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.engine.name}: {k.name} = {cfg.get(k)} is "
                               "not a power of 2")
                        break
            d[cfg.knobs] = hit
        return hit

    def _keep(self, sub, cfg, ctx):
        st, why = self.knobs_ok(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        eng = self.engine
        try:
            p = eng.problem(sub)
        except gc.Reject as e:
            return e.status, e.reason
        M, N, K_, B = eng.gemm_shape(p)
        ok, why = gc.keep_config(eng.name, self.gemm_config(cfg), p.fp64, M, N, K_, B, p.epi.linear,
                                 p.epi.spec.out_dtype)
        if not ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED, why
        return OK if eng.keep_extra is None else eng.keep_extra(sub, cfg, p)

    def config_notes(self, sub, cfg):
        ks = self.kstatic.get(cfg.knobs)
        atomic = ks[7] if ks is not None else \
            cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1) > 1 and cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1) == 0
        last = self._last_memo
        memo = last[1].get("notes") if last is not None and last[0] is sub else None
        if memo is None:
            memo = self.memo(sub, "notes")
        hit = memo.get(atomic)
        if hit is None:
            notes = self.engine.numerical_notes
            if atomic:
                notes += (NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC,)
            try:
                out = self.engine.problem(sub).epi.out
                hit = tuple(dict.fromkeys(notes + gc.tail_notes(sub, out)))
            except gc.Reject:
                hit = notes
            memo[atomic] = hit
        return hit

    def config(self, base, t, s, buf, sw, rs):
        """``base`` with TILE_SIZE, SPLIT_K, SPLIT_K_BUF, SWIZZLE (and SPLIT_RS unless None) set: one
        Config object per knob values, shared by every problem (its hash is computed once)."""
        d = self.made
        key = (base.knobs, t, s, buf, sw, rs)
        hit = d.get(key)
        if hit is None:
            c = base.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, t).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, s)
            c = c.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, buf).with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, sw)
            hit = d[key] = c if rs is None else c.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_RS, rs)
        return hit

    def space(self, sub):
        memo = self.memo(sub, "space")
        hit = memo.get(None)
        if hit is None:
            hit = memo[None] = self.engine.make_space(sub)
        return hit

    # ---- ranking: every valid config costed once, in one pass

    def candidates(self, sub, ctx):
        """The curated space, valid configs only, cheapest predicted first (<= 64)."""
        dev = ctx.device if ctx is not None else None
        memo = self.memo(sub, "candidates")
        hit = memo.get(dev)
        if hit is None:
            hit = memo[dev] = self._candidates(sub, ctx)
        return hit

    def _candidates(self, sub, ctx):
        eng = self.engine
        keep = self.memo(sub, "keep")
        if _SPACE not in keep:
            self._keep_space(sub, keep)
        success = S.CUDNN_STATUS_SUCCESS
        good = [c for c in self.space(sub) if (keep.get(c.knobs) or eng.keep(sub, c, ctx))[0] == success]
        dev = ctx.device if ctx is not None else None
        if dev is None or len(good) <= 1:
            return tuple(good[:64])
        memo = self.memo(sub, dev)
        todo = [c for c in good if c.knobs not in memo]
        if todo:
            self.cost_many(sub, todo, dev, memo)
        return eng.rank_configs(sub, good, memo)

    def rank(self, configs, costs, best_tiles=4, limit=24):
        """``gc.rank_candidates`` (gemm/tiles.py) over ``configs`` with ``costs`` (knob values -> seconds) known:
        every tile unsplit first, then every split / swizzle variant of the ``best_tiles`` best tiles,
        cheapest first (stable), at most ``limit``."""
        kst = self.kstatic
        rows = []
        plain = {}
        for i, c in enumerate(configs):
            ks = kst.get(c.knobs) or self.knob_static(c)
            t, cost = ks[2], costs[c.knobs]
            rows.append((cost, i, t, c))
            if ks[3] == 1:
                cur = plain.get(t)
                if cur is None or cost < cur[0]:
                    plain[t] = (cost, len(plain) if cur is None else cur[1])
        if plain:
            order = sorted([(v[0], v[1], t) for t, v in plain.items()])
            top = set()
            for r in order[:best_tiles]:
                top.add(r[2])
            out = sorted([r for r in rows if r[2] in top])
        else:
            out = sorted(rows)
        return tuple([r[3] for r in out[:limit]])

    def cost_many(self, sub, cfgs, device, memo):
        """The cost of each of ``cfgs`` into ``memo`` (knob values -> seconds), the problem's shape and
        the device's per-config constants looked up once."""
        shape = self._shape(sub)
        if shape is None:
            for c in cfgs:
                memo[c.knobs] = math.inf
            return
        M, N, K_, B, in_b, out_b, extra, fp64, eff, tail = shape
        statics = self._statics(device, fp64)
        adjust = self.engine.adjust_cost
        for c in cfgs:
            st = statics.get(c.knobs)
            if st is None:
                st = self._static(c, device, fp64)
            t = tile_cost(st, device, M, N, K_, B, in_b, out_b, extra, fp64, eff) + tail
            memo[c.knobs] = t if adjust is None else adjust(sub, c, t, device)

    def workspace_size(self, sub, cfg):
        last = self._last_memo
        memo = last[1].get("workspace") if last is not None and last[0] is sub else None
        if memo is None:
            memo = self.memo(sub, "workspace")
        hit = memo.get(cfg.knobs)
        if hit is None:
            shared = memo.get(None)
            if shared is None:
                try:
                    p = self.engine.problem(sub)
                except gc.Reject:
                    return 0
                M, N, _, B = self.engine.gemm_shape(p)
                shared = memo[None] = (M, N, B, p.fp64, gc.tail_workspace(sub, p.epi.out))
            M, N, B, fp64, tail = shared
            if self.knobs_ok(sub, cfg, None)[0] != S.CUDNN_STATUS_SUCCESS:
                return 0                # keep refuses it: no tile to size
            ws = gc.split_workspace(self.gemm_config(cfg), M, N, B, fp64)
            hit = memo[cfg.knobs] = gc.vector_workspace(self.engine.problem(sub).epi, ws if ws > tail else tail)
        return hit

    def cost(self, sub, cfg, device):
        last = self._last_cost             # the heuristics ask for one subgraph's configs in a row
        if last is not None and last[0] is sub and last[1] is device:
            memo = last[2]
        else:
            memo = self.memo(sub, device)
            self._last_cost = (sub, device, memo)
        hit = memo.get(cfg.knobs)
        if hit is None:
            hit = memo[cfg.knobs] = self.config_cost(sub, cfg, device)
        return hit

    def candidate_costs(self, sub, device):
        """The per-subgraph cost table :meth:`cost` reads (filled by :meth:`candidates`); None when the
        engine's ``cost`` is replaced on the class or the instance."""
        eng = self.engine
        if type(eng).cost is not self.own_cost or "cost" in eng.__dict__ or device is None:
            return None
        return self.memo(sub, device)

    def _shape(self, sub):
        """What the cost of every config of ``sub`` shares: (M, N, K, batch, input / output bytes,
        epilogue bytes, fp64, the engine's efficiency, the tail's time); None for a rejected subgraph."""
        memo = self.memo(sub, "shape")
        hit = memo.get(None, memo)
        if hit is memo:
            eng = self.engine
            try:
                p = eng.problem(sub)
                hit = (*eng.gemm_shape(p), p.in_bytes, p.out_bytes, p.extra_bytes, p.fp64, eng.efficiency(p),
                       gc.tail_time(sub, p.epi.out))
            except gc.Reject:
                hit = None
            memo[None] = hit
        return hit

    def config_cost(self, sub, cfg, device):
        """The seconds of one config (what :meth:`cost` remembers): the tile's cost, then the engine's
        ``adjust_cost``."""
        shape = self._shape(sub)
        if shape is None or self.knobs_ok(sub, cfg, None)[0] != S.CUDNN_STATUS_SUCCESS:
            t = math.inf                # (a knob value out of range indexes no tile)
        else:
            M, N, K_, B, in_b, out_b, extra, fp64, eff, tail = shape
            t = tile_cost(self._static(cfg, device, fp64), device, M, N, K_, B, in_b, out_b, extra, fp64, eff) \
                + tail
        adjust = self.engine.adjust_cost
        return t if adjust is None else adjust(sub, cfg, t, device)

    def _statics(self, device, fp64):
        """Knob values -> :func:`tile_static` on (``device``, ``fp64``)."""
        d = self._statics_memo
        key = (device, fp64)
        t = d.get(key)
        if t is None:
            if len(d) > 64:
                d.clear()
            t = d[key] = {}
        return t

    def _static(self, cfg, device, fp64):
        """What the cost of ``cfg`` shares across problems on ``device`` (:func:`tile_static`),
        remembered per (device, fp64, knob values)."""
        d = self._statics(device, fp64)
        hit = d.get(cfg.knobs)
        if hit is None:
            hit = d[cfg.knobs] = tile_static(self.engine.TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)],
                                             self.gemm_config(cfg), device, fp64)
        return hit
