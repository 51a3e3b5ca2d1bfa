"""Finalize of EXECUTION_PLAN, VARIANT_PACK and KERNEL_CACHE descriptors."""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendAttributeType_t as T
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnStatus_t as S
from ..report import bad, fail, unsupported
from .engine import _handle_ok


def finalize_execution_plan(d):
    from .. import serialize
    _handle_ok(d, A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE)
    if d.values(A.CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS, []):
        unsupported(d, A.CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS,
                    "running only intermediates is not supported: no engine exposes intermediates")
    cfg_desc = d.value(A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)
    if cfg_desc is None:
        text = d.value(A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION)
        if not text:
            bad(d, A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                "required attribute not set (or set CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION to deserialize)")
        cfg_desc = serialize.load_plan(d, text, d.value(A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE))
    st = cfg_desc.state
    d.state.update(engine=st["engine"], graph=st["graph"], config=st["config"], plan=st["plan"],
                   engine_config=cfg_desc)
    d.attrs[A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE] = (T.CUDNN_TYPE_INT64, [int(st["plan"].workspace_size)])
    d.attrs[A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION] = (T.CUDNN_TYPE_CHAR, serialize.dump_plan(cfg_desc))
    cache = d.value(A.CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE)
    if cache is not None:
        from .kernel_cache import add
        add(cache, cfg_desc)


def finalize_variant_pack(d):
    uids = d.values(A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, [])
    ptrs = d.values(A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, [])
    if len(uids) != len(ptrs):
        bad(d, A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
            f"{len(ptrs)} data pointer(s) for {len(uids)} unique id(s): the counts must match")
    dup = sorted({u for u in uids if uids.count(u) > 1})
    if dup:
        fail(S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, d, A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
             f"unique id(s) {dup} appear more than once")
    d.state["buffers"] = dict(zip(uids, ptrs))
    d.state["workspace"] = d.value(A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE)


def finalize_kernel_cache(d):
    d.state["entries"] = set()
    d.attrs[A.CUDNN_ATTR_KERNEL_CACHE_ENTRY_COUNT] = (T.CUDNN_TYPE_INT64, [0])


FINALIZERS = {
    D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: finalize_execution_plan,
    D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: finalize_variant_pack,
    D.CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR: finalize_kernel_cache,
}
