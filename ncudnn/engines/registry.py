"""The engine registry: stable global indices and readable names.

Global indices are positions in :data:`ENGINE_ORDER` (the backend API's ENGINE_GLOBAL_INDEX; its
length is OPERATIONGRAPH_ENGINE_GLOBAL_COUNT), so they never change when engines are added: a new
engine appends its name there. A listed name whose module has not landed yet has no engine
(``by_index`` gives None: NOT_SUPPORTED in the backend).

Engine modules are :data:`ENGINE_MODULES` plus every module of the family packages of
``ncudnn.engines`` (``conv/``, ``matmul/``, ``norm/``, ...) and every other top-level module outside
:data:`INFRASTRUCTURE` (discovered on first use, without importing anything to find them). A discovered
module that fails to import is left out, its error kept in :data:`load_errors` and logged as a warning;
a listed one raises.
"""
import importlib
import os
import pkgutil

from .. import log
from ..types import cudnnSeverity_t

#: Engines with an index by position. Append only.
ENGINE_ORDER = [
    "pointwise_fused",        # runtime-fused pointwise DAG: one generated kernel
    "composite",              # a graph of several subgraphs, each on its own engine
    "reduction",              # REDUCTION: deterministic row / column reduce kernels
    "genstats",               # GENSTATS: per-channel sum and sum of squares, one pass
    "bn_finalize",            # BN_FINALIZE: equivalent scale / bias, saved stats, running stats
    "norm_batch",             # NORM_FWD / NORM_BWD batch and instance norm (+ pointwise epilogue)
    "norm_rows",              # NORM_FWD / NORM_BWD layer and RMS norm (row kernels)
    "resample",               # RESAMPLE_FWD / RESAMPLE_BWD pooling, nearest, bilinear
    "rng_philox",             # RNG: Philox4x32-10
    "softmax_fused",          # softmax / log-softmax recognized from its pointwise + reduction pattern
    "bn_bwd_weights",         # BN_BWD_WEIGHTS: dscale, dbias, dx coefficients per channel
    "matmul_simt",            # batched matmul, large SIMT tiles, fused epilogue
    "matmul_small",           # batched matmul, small tiles / split-K (small, skinny problems)
    "conv_implicit_gemm",     # implicit-GEMM conv fprop / dgrad / wgrad (IMPLICIT_GEMM)
    "conv_implicit_precomp",  # implicit-GEMM conv, precomputed offset table (IMPLICIT_PRECOMP_GEMM)
    "conv_gemm_1x1",          # 1x1 stride-1 unpadded conv fprop as one plain GEMM
    "conv_winograd_nonfused", # 3x3 stride-1 conv fprop: Winograd F(2x2 | 4x4, 3x3) transforms + batched GEMM
    "conv_winograd_fused",    # 3x3 stride-1 conv: Winograd F(2x2, 3x3) transforms + products + epilogue in one kernel
    "matmul_tc",              # batched matmul on tensor cores (mma.sync bf16 / f16 / tf32 / fp8)
    "conv_tc",                # implicit-GEMM conv on tensor cores (NHWC preferred)
    "data_movement",          # concat, reshape, transpose, slice: strided copy kernels
    "conv_direct",            # direct convolution: depthwise and tiny channel counts
    "matmul_wgmma",           # batched matmul on Hopper warpgroup MMA (wgmma.mma_async bf16 / f16, sm_90a)
    "attention_flash_fwd",    # SDPA forward: flash attention, online softmax, masks / bias / ALiBi (attention/)
    "attention_flash_bwd",    # SDPA backward: deterministic dK/dV and dQ passes from the stats (attention/)
    "attention_tc_fwd",       # SDPA forward on tensor cores: mma.sync flash attention, FP16 / BF16 (attention/)
    "attention_tc_bwd",       # SDPA backward on tensor cores: mma.sync dK/dV and dQ passes, FP16 / BF16 (attention/)
    "attention_wgmma_fwd",    # SDPA forward on Hopper warpgroup MMA (wgmma.mma_async, sm_90a), FP16 / BF16 (attention/)
    "ctc",                    # CTC_LOSS (legacy cudnnCTCLoss): log-space alpha / beta, one block per entry (ctc/)
]

#: modules of the package that are machinery, not engines
INFRASTRUCTURE = frozenset({"api", "autotune", "base", "buffers", "cudagraph", "device", "heuristics", "plan",
                            "plancache", "ranking", "registry", "serialize"})

#: engine modules always imported (errors raise)
ENGINE_MODULES = [
    "ncudnn.engines.composite",
    "ncudnn.engines.pointwise.fused",
]

_ENGINES = {}
_loaded = False
#: bumped by every registration (cached rankings include it)
generation = 0
#: discovered module -> the import error that left it out
load_errors = {}


def register(engine_cls):
    """Class decorator: instantiate and register an engine under its ``name``."""
    global generation
    name = engine_cls.name
    if name not in ENGINE_ORDER:
        raise ValueError(f"engine {name!r} is not in ENGINE_ORDER (append it there for a stable index)")
    eng = engine_cls()
    eng.global_index = ENGINE_ORDER.index(name)
    _ENGINES[name] = eng
    generation += 1
    return engine_cls


def _discovered():
    """Engine modules by name: the top-level modules outside INFRASTRUCTURE and every module of each
    family package one level down (a family's ``__init__`` is imported with its first module)."""
    from . import __path__ as pkg_path

    found = []
    for m in pkgutil.iter_modules(pkg_path):
        if m.name in INFRASTRUCTURE or m.name.startswith("_"):
            continue
        if not m.ispkg:
            found.append(f"{__package__}.{m.name}")
            continue
        family = [os.path.join(p, m.name) for p in pkg_path]
        found += [f"{__package__}.{m.name}.{s.name}" for s in pkgutil.iter_modules(family)
                  if not s.name.startswith("_")]
    return sorted(found)


def _load():
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in ENGINE_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
    for mod in _discovered():
        if mod in ENGINE_MODULES:
            continue
        try:
            importlib.import_module(mod)
        except Exception as e:  # a half-written engine must not take the others down
            load_errors[mod] = f"{type(e).__name__}: {e}"
            _warn(f"engine module {mod} was not loaded: {load_errors[mod]}")


def _warn(msg):
    log.log(cudnnSeverity_t.CUDNN_SEV_WARNING, msg)


def engines():
    """Registered engines in global-index order."""
    _load()
    return sorted(_ENGINES.values(), key=lambda e: e.global_index)


def by_name(name):
    _load()
    return _ENGINES[name]


def get(name):
    """The engine called ``name``, or None."""
    _load()
    return _ENGINES.get(name)


def by_index(index):
    _load()
    for e in _ENGINES.values():
        if e.global_index == index:
            return e
    return None


def global_count():
    return len(ENGINE_ORDER)


def fingerprint():
    """What of the registry a remembered ranking depends on: its generation, and the engines with their
    classes' check_support and cost (a ranking made before an engine was removed, or one of these was
    replaced, e.g. by a test, is not reused)."""
    _load()  # loads the engine modules before the generation is read
    engs = _ENGINES.values()
    return generation, hash(tuple([type(e).check_support for e in engs] + [type(e).cost for e in engs]))


def graph_order(supported):
    """The engines of one operation graph in the order of its ENGINE_GLOBAL_INDEX. In cuDNN an engine's
    global index is meaningful per operation graph, so index 0 (and every index the heuristics report)
    names an engine that runs the graph: ``supported`` (the engines that run it, global-index order)
    first, then every other registered engine (those indices refuse with the engine's reason)."""
    first = list(supported)
    return first + [e for e in engines() if e not in first]
