"""The cudnn_graph backend functions, C-style: each returns ``(status, *outs)`` and never raises.

    err, desc = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR)
    err, = cudnnBackendSetAttribute(desc, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, [n, c, h, w])
    err, = cudnnBackendFinalize(desc)
    err, count, values = cudnnBackendGetAttribute(desc, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 8)

``arrayOfElements`` is a list (or a scalar when elementCount is 1); Get returns a list of at most
requestedElementCount elements (requestedElementCount 0: a count-only query). For descriptor-typed
attributes Get fills the descriptors passed as ``arrayOfElements`` (as the C API fills caller-created
ones) or new ones, and returns them. Every failure sets the last-error message naming the
descriptor, the attribute and what was wrong (``cudnnGetLastErrorString``).
"""
from .. import log as _log
from ..errors import c_api
from . import execute as _execute
from . import machinery as _m


@c_api(1)
def cudnnBackendCreateDescriptor(descriptorType):
    """(status, descriptor): a new, empty descriptor of ``descriptorType``."""
    _log.api_call("cudnnBackendCreateDescriptor", {"descriptorType": descriptorType})
    return _m.create(descriptorType)


@c_api(0)
def cudnnBackendDestroyDescriptor(descriptor):
    """(status,): release ``descriptor``; it cannot be used afterwards."""
    _m.check_descriptor(descriptor)
    descriptor.destroyed = True
    descriptor.state = {}


@c_api(0)
def cudnnBackendInitialize(descriptor, descriptorType=None, sizeInBytes=None):
    """(status,): reset ``descriptor`` to unfinalized with no attributes set (deprecated in cuDNN 9.2).

    With ``descriptorType`` the descriptor is re-purposed to that type, as the older signature did.
    """
    _m.check_descriptor(descriptor)
    dtype = None
    if descriptorType is not None:
        dtype = _m.descriptor_type(descriptorType)
        if dtype not in _m.SCHEMA:
            _m.unsupported(dtype, None, "this descriptor type is not supported by ncudnn")
    descriptor.reset(dtype)


@c_api(0)
def cudnnBackendSetAttribute(descriptor, attributeName, attributeType, elementCount, arrayOfElements):
    """(status,): set ``elementCount`` elements of ``attributeName`` (of ``attributeType``)."""
    _log.api_call("cudnnBackendSetAttribute", {"descriptor": descriptor, "attributeName": attributeName,
                                               "attributeType": attributeType, "elementCount": elementCount})
    _m.set_attribute(descriptor, attributeName, attributeType, elementCount, arrayOfElements)


@c_api(2)
def cudnnBackendGetAttribute(descriptor, attributeName, attributeType, requestedElementCount,
                             arrayOfElements=None):
    """(status, elementCount, arrayOfElements): the attribute's element count and its first
    ``requestedElementCount`` elements."""
    return _m.get_attribute(descriptor, attributeName, attributeType, requestedElementCount, arrayOfElements)


@c_api(0)
def cudnnBackendFinalize(descriptor):
    """(status,): check the attributes set and make the descriptor usable (and read-only)."""
    _log.api_call("cudnnBackendFinalize", {"descriptor": descriptor})
    _m.finalize(descriptor)


@c_api(0)
def cudnnBackendExecute(handle, executionPlan, variantPack):
    """(status,): run the finalized plan on the variant pack's buffers, on the handle's stream."""
    _log.api_call("cudnnBackendExecute", {"handle": handle, "executionPlan": executionPlan,
                                          "variantPack": variantPack}, handle=handle)
    _execute.execute(handle, executionPlan, variantPack)


@c_api(1)
def cudnnGetExecutionPlanWorkspaceSize(handle, executionPlan, variantPack=None):
    """(status, workspaceSizeInBytes) of a finalized execution plan."""
    from ..handle import get_handle_or_raise
    from ..types import cudnnBackendDescriptorType_t as D
    from ..types import cudnnStatus_t as S
    get_handle_or_raise(handle)
    _m.check_descriptor(executionPlan, "executionPlan")
    if executionPlan.type != D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        _m.fail(S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, executionPlan, None, "not an execution plan")
    if not executionPlan.finalized:
        _m.fail(S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, executionPlan, None, "not finalized")
    return int(executionPlan.state["plan"].workspace_size)


@c_api(0)
def cudnnBackendPopulateCudaGraph(handle, executionPlan, variantPack, cudaGraph):
    """(status,): build the plan into the empty ``cudaGraph`` (engines with the native CUDA graph note)."""
    _execute.cuda_graph(handle, executionPlan, variantPack, cudaGraph, update=False)


@c_api(0)
def cudnnBackendUpdateCudaGraph(handle, executionPlan, variantPack, cudaGraph):
    """(status,): point a populated ``cudaGraph`` at a new variant pack's buffers."""
    _execute.cuda_graph(handle, executionPlan, variantPack, cudaGraph, update=True)
