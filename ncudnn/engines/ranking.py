"""Ranking (engine, config) pairs for one subgraph, and the :class:`EngineConfig` the API hands out.

Modes (cudnnBackendHeurMode_t): INSTANT and A rank by the analytic model (``Engine.cost``); B by the
model corrected with this device's autotuning records (:mod:`.heuristics` tables); FALLBACK keeps the
engines flagged ``fallback`` (widest support), ranked by the model.
"""
import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Tuple

from .. import log as _log
from ..types import cudnnBackendHeurMode_t, cudnnBackendNumericalNote_t, cudnnSeverity_t, cudnnStatus_t
from . import heuristics, registry
from .base import Config, Engine
from .plan import _round_up

S = cudnnStatus_t
HM = cudnnBackendHeurMode_t
NN = cudnnBackendNumericalNote_t
INFO = cudnnSeverity_t.CUDNN_SEV_INFO


@dataclass(frozen=True)
class EngineConfig:
    """An engine with a knob config for a graph, its notes, exact workspace and predicted time.

    ``parts`` (composite engine only): the EngineConfig of each subgraph, in execution order.
    """

    engine: object
    config: Config
    numerical_notes: Tuple = ()
    behavior_notes: Tuple = ()
    workspace_size: int = 0
    predicted_time: float = math.inf   # seconds (model, or mode-B corrected)
    parts: Tuple = ()
    why: str = field(default="", compare=False)  # how the prediction was made (logged)

    @property
    def name(self):
        return self.engine.name

    @property
    def global_index(self):
        return self.engine.global_index

    def ident(self):
        """Hashable identity: engine, knobs, and the parts' identities."""
        return (self.config, tuple(p.ident() for p in self.parts))

    def to_json(self):
        d = {"engine": self.engine.name, "global_index": self.engine.global_index,
             "config": self.config.to_json()}
        if self.parts:
            d["parts"] = [p.to_json() for p in self.parts]
        return d

    def __str__(self):
        s = str(self.config)
        if self.parts:
            s += "[" + "; ".join(str(p) for p in self.parts) + "]"
        return s


def log_enabled():
    return _log.enabled(INFO)


def log(msg):
    _log.log(INFO, msg)


class _Pending:
    """What an EngineConfig from :func:`engine_config` needs to fill its numerical notes and
    workspace size on first read: the subgraph (engine and config are the object's own fields)."""

    __slots__ = ("sub",)

    def __init__(self, sub):
        self.sub = sub


class _LazyField:
    """A data descriptor for the EngineConfig fields a ranking leaves pending (numerical_notes,
    workspace_size): the instance dict holds the value, or a :class:`_Pending` that the first read
    replaces with the engine's answer (both fields at once, dropping the subgraph). Reading from the
    class gives the field's default."""

    __slots__ = ("name", "default")

    def __init__(self, name, default):
        self.name, self.default = name, default

    def __get__(self, ec, owner=None):
        if ec is None:
            return self.default
        d = ec.__dict__
        v = d[self.name]
        if v.__class__ is _Pending:
            _resolve(ec, v.sub)
            v = d[self.name]
        return v

    def __set__(self, ec, value):       # the dataclass __init__ (object.__setattr__) lands here
        ec.__dict__[self.name] = value


def _resolve(ec, sub):
    d = ec.__dict__
    engine, cfg = d["engine"], d["config"]
    notes = engine.config_notes(sub, cfg)
    ws = engine.workspace_size(sub, cfg)
    d["numerical_notes"] = notes if type(notes) is tuple else tuple(notes)
    d["workspace_size"] = _round_up(ws) if ws else 0


EngineConfig.numerical_notes = _LazyField("numerical_notes", ())
EngineConfig.workspace_size = _LazyField("workspace_size", 0)


def _getstate(self):
    """The fields' values (pending ones filled: a pickle carries no subgraph)."""
    return {f: getattr(self, f) for f in _FIELDS}


EngineConfig.__getstate__ = _getstate
_FIELDS = ("engine", "config", "numerical_notes", "behavior_notes", "workspace_size", "predicted_time", "parts",
           "why")


def engine_config(engine, sub, cfg, ctx, predicted=math.inf, why=""):
    """The EngineConfig of ``cfg`` on ``sub`` (one subgraph: its scratch is the plan's workspace).

    Its numerical notes and workspace size are asked of the engine when first read (a ranking hands
    out every config; a caller reads these of the one or two it builds): the same values, equality,
    hash and repr as the constructor's object once read."""
    behavior = engine.behavior_notes
    # the frozen dataclass's __init__ sets each field through object.__setattr__: filling __dict__
    # makes the same object (same fields, order, equality, hash) in half the time
    ec = _new(EngineConfig)
    pend = _Pending(sub)
    ec.__dict__.update(engine=engine, config=cfg, numerical_notes=pend,
                       behavior_notes=behavior if type(behavior) is tuple else tuple(behavior),
                       workspace_size=pend, predicted_time=predicted, parts=(), why=why)
    return ec


_new = object.__new__


def _ctx_flags(ctx):
    """What of a build context rankings, support checks and plans depend on (memo keys): the device
    properties themselves (a frozen dataclass: an 8-SM variant of a device is another key) and the
    math / determinism switches."""
    if ctx is None:
        return None
    dev = ctx.device
    try:
        hash(dev)
    except TypeError:
        dev = id(dev)
    return (dev, ctx.allow_tf32, ctx.allow_tensor_cores, ctx.deterministic)


def support(engine, sub, ctx, memo=None):
    """(status, reason) of ``engine`` on one subgraph, with the subgraph named in the reason
    (remembered on the subgraph per context flags and engine). ``memo``: :func:`support_memo` of
    (sub, ctx), when the caller already has it (a ranking asks for every engine)."""
    if memo is None:
        memo = support_memo(sub, ctx)
    hit = memo.get(engine.name)
    if hit is None:
        hit = memo[engine.name] = _support(engine, sub, ctx)
    return hit


def support_memo(sub, ctx):
    """The subgraph's support verdicts under ``ctx``'s flags: engine name -> (status, reason)."""
    memo = sub.__dict__.get("_support")
    if memo is None:
        memo = sub.__dict__["_support"] = {}
    flags = _ctx_flags(ctx)
    per = memo.get(flags)
    if per is None:
        per = memo[flags] = {}
    return per


def _support(engine, sub, ctx):
    try:
        st, why = engine.check_support(sub, ctx)
    except Exception as e:  # an engine's check must never take the API down
        st, why = S.CUDNN_STATUS_INTERNAL_ERROR, f"{engine.name}: check_support raised {type(e).__name__}: {e}"
    if st != S.CUDNN_STATUS_SUCCESS:
        return S(st), f"{describe(sub)}: {why}"
    return _OK


_OK = (S.CUDNN_STATUS_SUCCESS, "")


def describe(sub):
    """``sub.describe()``, remembered on the subgraph (refusal reasons name it)."""
    d = sub.__dict__
    hit = d.get("_described")
    if hit is None:
        hit = d["_described"] = sub.describe()
    return hit


#: heuristic modes by value (an IntEnum member hashes and compares as its int)
_MODES = {m: m for m in HM}

_BY_KIND = {}


def engines_for(kind):
    """``registry.engines()`` that may accept a ``kind`` subgraph (no ``kinds``, or ``kind`` among
    them), in global-index order; remembered per registry state (generation, engine table, its size)."""
    key = (registry.generation, id(registry._ENGINES), len(registry._ENGINES), kind)
    hit = _BY_KIND.get(key)
    if hit is None:
        engs = registry.engines()
        key = (registry.generation, id(registry._ENGINES), len(registry._ENGINES), kind)
        if len(_BY_KIND) > 256:
            _BY_KIND.clear()
        hit = _BY_KIND[key] = tuple([e for e in engs if not e.kinds or kind in e.kinds])
    return hit


def refusal(reasons):
    """(status, reasons) summarizing several engines' refusals of one graph, given as (status, text)
    pairs: the engines that accept its pattern and refuse something else (a layout, a type, a size)
    come first and decide the status (NOT_SUPPORTED when they differ); NOT_SUPPORTED_GRAPH_PATTERN
    when no engine accepts the pattern."""
    pattern = S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN
    near = [(S(st), w) for st, w in reasons if int(st) != int(pattern)]
    far = [(S(st), w) for st, w in reasons if int(st) == int(pattern)]
    statuses = {st for st, _ in (near or far)}
    status = statuses.pop() if len(statuses) == 1 else S.CUDNN_STATUS_NOT_SUPPORTED
    return status, near + far


def config_status(engine, sub, cfg, ctx, checked=False):
    """(status, reason) of one config: the engine's support (unless ``checked``), then the knob
    values, then notes vs ctx."""
    if not checked:
        st, why = support(engine, sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
    st, why = engine.keep(sub, cfg, ctx)
    if st != S.CUDNN_STATUS_SUCCESS:
        return S(st), f"{sub.describe()}: {why}"
    if ctx is not None and ctx.deterministic and NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC in \
            engine.config_notes(sub, cfg):
        return S.CUDNN_STATUS_NOT_SUPPORTED, f"{sub.describe()}: {cfg} is nondeterministic, " \
            "and determinism was requested"
    return S.CUDNN_STATUS_SUCCESS, ""


#: the base class's candidate_costs (no table)
_NO_TABLE = Engine.candidate_costs

#: a scored row's sort key: (demoted, predicted time, engine global index, candidate position)
_RANK_KEY = itemgetter(0, 1, 2, 3)


def rank_subgraph(sub, mode, ctx, graph_key=None, explain=None):
    """Ranked EngineConfigs for one subgraph (best first; ties keep global-index / candidate order;
    configs :func:`heuristics.demotion` names come after the others, in model order).

    ``explain``: a list that receives one line per candidate (and per rejected engine)."""
    m = _MODES.get(mode)
    mode = HM(int(mode)) if m is None else m
    device = ctx.device
    table = heuristics.table(device) if mode == HM.CUDNN_HEUR_MODE_B else None
    scored = []
    verdicts = support_memo(sub, ctx)
    strict = ctx is not None and ctx.deterministic
    for eng in (registry.engines() if explain is not None else engines_for(sub.kind)):
        if eng.name == "composite":
            continue
        if eng.kinds and sub.kind not in eng.kinds:  # the base check_support's refusal, without the call
            if explain is not None:
                explain.append(f"  {eng.name}: accepts {eng.kinds}, not a {sub.kind} subgraph")
            continue
        if mode == HM.CUDNN_HEUR_MODE_FALLBACK and not eng.fallback:
            if explain is not None:
                explain.append(f"  {eng.name}: skipped (not a fallback engine)")
            continue
        st, why = support(eng, sub, ctx, verdicts)
        if st != S.CUDNN_STATUS_SUCCESS:
            if explain is not None:
                explain.append(f"  {eng.name}: {st.name}: {why}")
            continue
        demoted = heuristics.demotion(eng, sub)
        if demoted and explain is not None:
            explain.append(f"  {eng.name}: ranked after the others: {demoted}")
        cands = eng.candidates(sub, ctx)  # valid configs by contract
        # what choosing them already costed (each config costed once; no call for an engine without a table)
        known = eng.candidate_costs(sub, device) if type(eng).candidate_costs is not _NO_TABLE else None
        if known is not None and table is None and not strict:
            # the common case written out: every candidate's cost known, no correction, no filter
            late, gi, how = bool(demoted), eng.global_index, "model; demoted" if demoted else "model"
            get = known.get
            for i, cfg in enumerate(cands):
                t = get(cfg.knobs)
                if type(t) is not float:
                    break
                if t - t != 0.0:     # inf or nan: not math.isfinite
                    if explain is not None:
                        explain.append(f"  {cfg}: dropped, the model says a block cannot fit on an SM")
                    continue
                scored.append((late, t, gi, i, eng, cfg, how))
            else:
                continue
            cands = cands[i:]       # from the first candidate without a known float cost: the general loop
            first = i
        else:
            first = 0
        for i, cfg in enumerate(cands, first):
            if strict and NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC in eng.config_notes(sub, cfg):
                continue
            t = known.get(cfg.knobs) if known is not None else None
            try:
                t = float(eng.cost(sub, cfg, device) if t is None else t)
            except Exception as e:  # a cost-model bug must not take the heuristics down
                if explain is not None:
                    explain.append(f"  {cfg}: dropped, cost() raised {type(e).__name__}: {e}")
                continue
            if not math.isfinite(t):  # the model says it cannot launch (registers / shared memory)
                if explain is not None:
                    explain.append(f"  {cfg}: dropped, the model says a block cannot fit on an SM")
                continue
            how = "model"
            if table is not None:
                t, how = table.correct(eng.name, t, graph_key, cfg)
            late = bool(demoted) and how != "measured"
            if late:
                how += "; demoted"
            scored.append((late, t, eng.global_index, i, eng, cfg, how))
    scored.sort(key=_RANK_KEY)
    # engine_config per row, written out: one pending marker for the subgraph's configs
    pend, new, out = _Pending(sub), _new, []
    for _, t, _, _, eng, cfg, how in scored:
        behavior = eng.behavior_notes
        ec = new(EngineConfig)
        ec.__dict__.update(engine=eng, config=cfg, numerical_notes=pend,
                           behavior_notes=behavior if type(behavior) is tuple else tuple(behavior),
                           workspace_size=pend, predicted_time=t, parts=(), why=how)
        out.append(ec)
    if explain is not None:
        for ec in out:
            explain.append(f"  {ec.predicted_time * 1e6:10.2f} us  {ec.config}  ({ec.why}; "
                           f"workspace {ec.workspace_size} B)")
    return out
