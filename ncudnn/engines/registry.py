"""The engine registry: stable global indices and readable names.

Global indices are positions in :data:`ENGINE_ORDER`, so they never change when engines are added:
a new engine is appended to the list. The backend API's ENGINE_GLOBAL_INDEX and
OPERATIONGRAPH_ENGINE_GLOBAL_COUNT come from here.
"""
import importlib

#: Every engine ncudnn ships, in global-index order. Append only.
ENGINE_ORDER = [
    "pointwise_fused",        # runtime-fused pointwise DAG: one generated kernel
    "composite",              # a graph of several subgraphs, each on its own engine
]

#: modules that define engines; importing one registers its engines
ENGINE_MODULES = [
    "ncudnn.engines.composite",
    "ncudnn.engines.pointwise",
]

_ENGINES = {}
_loaded = False
#: bumped by every registration (cached rankings include it)
generation = 0


def register(engine_cls):
    """Class decorator: instantiate and register an engine under its ``name``."""
    name = engine_cls.name
    if name not in ENGINE_ORDER:
        raise ValueError(f"engine {name!r} is not in ENGINE_ORDER (append it there for a stable index)")
    global generation
    eng = engine_cls()
    eng.global_index = ENGINE_ORDER.index(name)
    _ENGINES[name] = eng
    generation += 1
    return engine_cls


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
