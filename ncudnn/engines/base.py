"""The one small interface every engine shares (cudnn-frontend's oss_engine_interface habit).

An engine accepts some subgraph patterns. For a subgraph it says whether it can run it and, if not,
why (``check_support -> (status, reason)``); it lists its knobs; it sizes its workspace exactly for
a config; and it builds a :class:`SubPlan` whose ``execute`` launches kernels. Knobs are data: the
heuristic, the autotuner and a hand-picked config all produce the same frozen :class:`Config`.
"""
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, Optional, Tuple

from ..memory import to_numba
from ..platform import simulator_enabled
from ..types import (cudnnBackendBehaviorNote_t, cudnnBackendKnobType_t, cudnnBackendLayoutType_t,
                     cudnnBackendNumericalNote_t, cudnnStatus_t)
from . import device as _device

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
BN = cudnnBackendBehaviorNote_t
OK = (S.CUDNN_STATUS_SUCCESS, "")
#: configs per engine the heuristics rank at most
MAX_CANDIDATES = 64


@dataclass(frozen=True)
class KnobSpec:
    """One tunable knob, in cudnnBackendKnobType_t terms (what KNOB_INFO descriptors report)."""

    type: K
    min: int
    max: int
    stride: int = 1
    default: int = 0
    #: for knobs that index a table (e.g. TILE_SIZE), what each value means
    labels: Tuple[str, ...] = ()

    def values(self):
        return range(self.min, self.max + 1, self.stride)

    def valid(self, v):
        return self.min <= v <= self.max and (v - self.min) % self.stride == 0


@dataclass(frozen=True)
class Config:
    """An engine and a value for each of its knobs (sorted by knob type): hashable, serializable."""

    engine: str
    knobs: Tuple[Tuple[int, int], ...] = ()

    def get(self, knob_type, default=None):
        kt = int(knob_type)
        for k, v in self.knobs:
            if k == kt:
                return v
        return default

    def with_knob(self, knob_type, value):
        """This config with knob ``knob_type`` set to ``value`` (added when absent), knobs sorted by type."""
        d = dict(self.knobs)
        d[int(knob_type)] = int(value)
        return Config(self.engine, tuple(sorted(d.items())))

    def __hash__(self):  # memo keys hash configs often: computed once (the dataclass is frozen)
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash((self.engine, self.knobs))
        return h

    def __reduce__(self):  # pickles / copies rebuild it (the cached hash is per process)
        return (Config, (self.engine, self.knobs))

    def to_json(self):
        return {"engine": self.engine, "knobs": {K(k).name: v for k, v in self.knobs}}

    @classmethod
    def from_json(cls, d):
        return cls(d["engine"], tuple(sorted((int(K[k]), int(v)) for k, v in d["knobs"].items())))

    def __str__(self):
        ks = ", ".join(f"{K(k).name.replace('CUDNN_KNOB_TYPE_', '')}={v}" for k, v in self.knobs)
        return f"{self.engine}({ks})"


@dataclass
class BuildContext:
    """What an engine may look at while checking or building: the handle's device, math settings."""

    device: object = None          # ncudnn device properties (name, cc, sm_count, ...) or None in the simulator
    allow_tf32: bool = False       # math type allows down-converting FP32 inputs
    allow_tensor_cores: bool = True  # BF16/FP16/FP8 on tensor cores (FP32 accumulate); FP32 needs allow_tf32
    deterministic: bool = False    # reject NONDETERMINISTIC configs
    simulator: bool = False
    handle: object = None          # the ncudnn handle (its caches hold the plan cache), or None
    extra: Dict[str, object] = field(default_factory=dict)



def context(ctx=None):
    """A BuildContext with its device filled in, from a BuildContext, a handle, or None."""
    if isinstance(ctx, BuildContext):
        if ctx.device is None:
            ctx = replace(ctx, device=_device.current(), simulator=simulator_enabled())
        return ctx
    cached = getattr(ctx, "caches", None)
    if cached is not None:
        c = cached.get("build_context")
        if c is None:
            c = cached["build_context"] = BuildContext(device=_device.current(), simulator=simulator_enabled(),
                                                       handle=ctx)
        return c
    return BuildContext(device=_device.current(), simulator=simulator_enabled())

class SubPlan:
    """A built (subgraph, config): kernels compiled, launch arguments prepared where possible.

    The hot path is :meth:`prepare` (once per distinct set of buffer addresses) returning a
    ``run(stream)`` callable the plan caches; engines with a fast launcher override it. The default
    converts the views to numba arrays once and calls :meth:`execute` on each run.
    """

    def __init__(self, engine, sub, config, workspace_size=0):
        self.engine = engine
        self.sub = sub
        self.config = config
        self.workspace_size = workspace_size

    def prepare(self, views, scratch):
        """``views``: uid -> DeviceView for every tensor the subgraph touches (by-value scalars as
        Python numbers); ``scratch``: a uint8 DeviceView of ``workspace_size`` bytes or None.
        Returns ``run(stream)``."""
        arrays = {u: (to_numba(v) if hasattr(v, "ptr") else v) for u, v in views.items()}
        ws = to_numba(scratch) if scratch is not None else None
        return lambda stream: self.execute(arrays, ws, stream)

    def launches(self, views, scratch):
        """The kernel launches (``kernels.runtime.launch.PreparedLaunch``) ``prepare`` would run, for the native
        CUDA graph path; None when the engine cannot give them (the default)."""
        return None

    def execute(self, buffers, workspace, stream):
        """Run on ``buffers`` (uid -> numba device array with the tensor's dims and strides, or a
        scalar) using ``workspace`` (a numba uint8 array of at least ``workspace_size`` bytes, or None)."""
        raise NotImplementedError


class Engine:
    """Base class; subclasses set the class data and override the methods."""

    name = "engine"
    #: subgraph kinds accepted (a fast pre-filter before check_support)
    kinds: Tuple[str, ...] = ()
    numerical_notes: Tuple[NN, ...] = ()
    behavior_notes: Tuple[BN, ...] = (BN.CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION,)
    preferred_layout: Optional[cudnnBackendLayoutType_t] = None
    #: a FALLBACK engine supports the widest range of problems, not the fastest path
    fallback = False
    global_index = -1  # set by the registry

    def check_support(self, sub, ctx) -> Tuple[S, str]:
        if sub.kind not in self.kinds:
            return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, \
                f"{self.name}: accepts {self.kinds}, not a {sub.kind} subgraph"
        return OK

    def knobs(self, sub) -> Tuple[KnobSpec, ...]:
        return ()

    def default_config(self, sub) -> Config:
        return Config(self.name, tuple(sorted((int(k.type), k.default) for k in self.knobs(sub))))

    def configs(self, sub, ctx) -> Iterable[Config]:
        """Every config worth trying (the autotuner's search space), pruned by :meth:`keep`."""
        specs = self.knobs(sub)
        out = [Config(self.name, ())]
        for spec in specs:
            out = [c.with_knob(spec.type, v) for c in out for v in spec.values()]
        return [c for c in out if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]

    def candidates(self, sub, ctx) -> Iterable[Config]:
        """Valid configs the heuristics rank (default: the default config, then the search space, at
        most ``MAX_CANDIDATES``); memoized per :meth:`candidates_key` when that is not None."""
        ck = self.candidates_key(sub)
        memo = self.__dict__.setdefault("_candidates", {})
        if ck is not None and ck in memo:
            return memo[ck]
        out = []
        default = self.default_config(sub)
        if self.keep(sub, default, ctx)[0] == S.CUDNN_STATUS_SUCCESS:
            out.append(default)
        seen = set(out)
        for c in self.configs(sub, ctx):
            if len(out) >= MAX_CANDIDATES:
                break
            if c not in seen:
                seen.add(c)
                out.append(c)
        out = tuple(out)
        if ck is not None:
            memo[ck] = out
        return out

    def candidates_key(self, sub):
        """What the candidate list depends on (None: recompute for every subgraph)."""
        return None

    def keep(self, sub, cfg, ctx) -> Tuple[S, str]:
        """Is this config valid for this subgraph? (status, reason)."""
        for spec in self.knobs(sub):
            v = cfg.get(spec.type)
            if v is None or not spec.valid(v):
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: knob {spec.type.name} = {v} is outside " \
                    f"[{spec.min}, {spec.max}] step {spec.stride}"
        return OK

    def config_notes(self, sub, cfg) -> Tuple[NN, ...]:
        """Numerical notes of a particular config (default: the engine's)."""
        return self.numerical_notes

    def workspace_size(self, sub, cfg) -> int:
        return 0

    def cost(self, sub, cfg, device) -> float:
        """Predicted seconds on ``device`` (the analytic model of heuristic mode A)."""
        return 1.0

    def candidate_costs(self, sub, device):
        """knob values -> the seconds :meth:`cost` gives on ``device``, for configs of ``sub`` already
        costed (e.g. while choosing the candidates), so a ranking need not ask :meth:`cost` again; None
        (the default) when the engine keeps no such table. A config missing from it is asked for."""
        return None

    def build(self, sub, cfg, ctx) -> SubPlan:
        raise NotImplementedError

    def __repr__(self):
        return f"<Engine {self.global_index}: {self.name}>"
