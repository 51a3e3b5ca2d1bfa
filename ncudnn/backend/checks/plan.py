"""Finalize of EXECUTION_PLAN, VARIANT_PACK and KERNEL_CACHE descriptors."""
from ...errors import CudnnError
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendAttributeType_t as T
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnStatus_t as S
from .. import engine_bridge as bridge
from ..report import bad, fail, unsupported
from .deviceprop import device_context
from .engine import _handle_ok
from .kernel_cache import add


def finalize_execution_plan(d):
    _handle_ok(d, A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE)
    if d.values(A.CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS, []):
        unsupported(d, A.CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS,
                    "running only intermediates is not supported: no engine exposes intermediates")
    handle = d.value(A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE)
    cfg_desc = d.value(A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)
    if cfg_desc is None:
        text = d.value(A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION)
        if not text:
            bad(d, A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                "required attribute not set (or set CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION to deserialize)")
        try:
            plan = bridge.plan_from_json(text, bridge.context(handle))
        except CudnnError as e:
            fail(e.status, d, A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, e.message)
        ec = plan.engine_config
        d.state.update(engine=ec.engine if ec is not None else None, graph=plan.graph, ec=ec, plan=plan)
    else:
        ec, graph = cfg_desc.state["ec"], cfg_desc.state["graph"]
        try:
            ctx = device_context(d, A.CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, bridge.context(handle))
            plan = bridge.build_plan(graph, ec, ctx)
        except CudnnError as e:
            fail(e.status, d, A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, e.message)
        d.state.update(engine=ec.engine, graph=graph, ec=ec, plan=plan, engine_config=cfg_desc)
        cache = d.value(A.CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE)
        if cache is not None:
            add(cache, cfg_desc)
    d.attrs[A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE] = (T.CUDNN_TYPE_INT64, [int(plan.workspace_size)])
    d.attrs[A.CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION] = (T.CUDNN_TYPE_CHAR, bridge.plan_to_json(plan))


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
