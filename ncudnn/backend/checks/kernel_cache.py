"""The kernel cache descriptor's bookkeeping: which (graph key, engine, config) plans were built with it."""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendAttributeType_t as T


def _key(cfg_desc):
    st = cfg_desc.state
    graph = st["graph"]
    return (graph.key(dynamic=True), st["ec"].ident())


def add(cache, cfg_desc):
    entries = cache.state.setdefault("entries", set())
    entries.add(_key(cfg_desc))
    cache.attrs[A.CUDNN_ATTR_KERNEL_CACHE_ENTRY_COUNT] = (T.CUDNN_TYPE_INT64, [len(entries)])


def is_cached(cache, cfg_desc):
    return _key(cfg_desc) in cache.state.get("entries", set())
