"""Generic Create / Destroy / Initialize / Set / Get / Finalize semantics (machinery.py), exact statuses."""
import pytest

from backend_build import A, D, DT, S, T, create, expect, finalize, get, make, ok, set_attr, tensor
from ncudnn.backend import (cudnnBackendCreateDescriptor, cudnnBackendDestroyDescriptor, cudnnBackendFinalize,
                            cudnnBackendGetAttribute, cudnnBackendInitialize, cudnnBackendSetAttribute)
from ncudnn.backend.attrs import PLACEHOLDER, READONLY
from ncudnn.backend.schema import SCHEMA
from ncudnn.types import cudnnConvolutionMode_t

#: Every descriptor type of cuDNN 9 (all 51 are created, issue #28).
DOCUMENTED = list(D)


@pytest.mark.parametrize("dtype", DOCUMENTED, ids=lambda d: d.name)
def test_every_documented_descriptor_type_is_created(dtype):
    d = ok(cudnnBackendCreateDescriptor(dtype))
    assert d.type == dtype and not d.finalized
    ok(cudnnBackendDestroyDescriptor(d))


def test_create_invalid_types():
    expect(cudnnBackendCreateDescriptor(999), S.CUDNN_STATUS_BAD_PARAM, "999")
    assert cudnnBackendCreateDescriptor(999) == (S.CUDNN_STATUS_BAD_PARAM, None)


def test_destroyed_descriptor_is_refused_everywhere():
    d = create(D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
    ok(cudnnBackendDestroyDescriptor(d))
    expect(cudnnBackendDestroyDescriptor(d), S.CUDNN_STATUS_BAD_PARAM, "destroyed")
    expect(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64, 1), S.CUDNN_STATUS_BAD_PARAM,
           "destroyed")
    expect(cudnnBackendFinalize(d), S.CUDNN_STATUS_BAD_PARAM, "destroyed")


def test_null_and_foreign_descriptors():
    expect(cudnnBackendFinalize(None), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL")
    expect(cudnnBackendSetAttribute(object(), A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, 1, 1),
           S.CUDNN_STATUS_BAD_PARAM, "not a cudnnBackendDescriptor_t")


def test_initialize_resets_and_repurposes():
    d = tensor(1, [2, 3])
    ok(cudnnBackendInitialize(d))
    assert not d.finalized and not d.attrs and d.type == D.CUDNN_BACKEND_TENSOR_DESCRIPTOR
    ok(cudnnBackendInitialize(d, D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, 0))
    assert d.type == D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR
    expect(cudnnBackendInitialize(None), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)


def _knob_choice(fin=False):
    return make(D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, {
        A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE: (T.CUDNN_TYPE_KNOB_TYPE, 2),
        A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE: (T.CUDNN_TYPE_INT64, 5)}, fin)


def test_knob_choice_round_trip():
    d = _knob_choice(fin=True)
    assert get(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.CUDNN_TYPE_KNOB_TYPE) == (1, [2])
    count, vals = get(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64)
    assert (count, vals) == (1, [5])
    assert get(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.CUDNN_TYPE_KNOB_TYPE)[1][0].name == "CUDNN_KNOB_TYPE_TILE_SIZE"


def test_attribute_of_another_descriptor_is_bad_param():
    d = _knob_choice()
    expect(set_attr(d, A.CUDNN_ATTR_TENSOR_UNIQUE_ID, T.CUDNN_TYPE_INT64, 1), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR", "CUDNN_ATTR_TENSOR_UNIQUE_ID", "CUDNN_BACKEND_TENSOR_DESCRIPTOR")
    expect(set_attr(d, 123456, T.CUDNN_TYPE_INT64, 1), S.CUDNN_STATUS_BAD_PARAM, "123456")


def test_unimplemented_attribute_of_this_descriptor_is_not_supported():
    d = create(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    expect(set_attr(d, A.CUDNN_ATTR_OPERATIONGRAPH_IS_SAME_TOPOLOGY, T.CUDNN_TYPE_BOOLEAN, True),
           S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_ATTR_OPERATIONGRAPH_IS_SAME_TOPOLOGY")


def test_wrong_attribute_type():
    d = _knob_choice()
    expect(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT32, 5),
           S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE", "CUDNN_TYPE_INT32",
           "CUDNN_TYPE_INT64")
    expect(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, 77, 5), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "77")


def test_wrong_element_count():
    d = _knob_choice()
    expect(cudnnBackendSetAttribute(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64, 2, [1, 2]),
           S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE", "exactly 1")
    expect(cudnnBackendSetAttribute(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64, -1, [1]),
           S.CUDNN_STATUS_BAD_PARAM, "elementCount")
    t = create(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR)
    expect(cudnnBackendSetAttribute(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, 9, [1] * 9),
           S.CUDNN_STATUS_BAD_PARAM, "1 to 8")
    expect(cudnnBackendSetAttribute(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, 3, [1, 2]),
           S.CUDNN_STATUS_BAD_PARAM, "holds 2")
    expect(cudnnBackendSetAttribute(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, 2, None),
           S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)


@pytest.mark.parametrize("value, fragment", [
    (True, "not an integer"), (2 ** 63, "out of the int64_t range"), (1.5, "not an integer"), (["3"], "not an integer")])
def test_bad_int64_values(value, fragment):
    expect(set_attr(_knob_choice(), A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64, value),
           S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE", fragment)


def test_bad_enum_values():
    d = _knob_choice()
    expect(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.CUDNN_TYPE_KNOB_TYPE, 4000), S.CUDNN_STATUS_BAD_PARAM,
           "4000 is not a valid cudnnBackendKnobType_t")
    expect(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.CUDNN_TYPE_KNOB_TYPE,
                    cudnnConvolutionMode_t.CUDNN_CONVOLUTION), S.CUDNN_STATUS_BAD_PARAM, "cudnnConvolutionMode_t")
    expect(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.CUDNN_TYPE_KNOB_TYPE, 46), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_KNOB_TYPE_COUNTS")


def test_set_after_finalize_is_not_initialized():
    d = _knob_choice(fin=True)
    expect(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64, 3), S.CUDNN_STATUS_NOT_INITIALIZED,
           "CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR", "CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE", "already finalized")
    assert get(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64) == (1, [5])


def test_get_before_finalize_is_not_finalized():
    d = _knob_choice()
    expect(cudnnBackendGetAttribute(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64, 1),
           S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE", "not finalized")
    assert cudnnBackendGetAttribute(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.CUDNN_TYPE_INT64, 1) == \
        (S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, None, None)


def test_get_count_only_partial_and_bad_requests():
    t = tensor(7, [2, 3, 4, 5])
    assert get(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, 0) == (4, [])
    assert get(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, 2) == (4, [2, 3])
    assert get(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, 9) == (4, [2, 3, 4, 5])
    expect(cudnnBackendGetAttribute(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_INT64, -1),
           S.CUDNN_STATUS_BAD_PARAM, "requestedElementCount")
    expect(cudnnBackendGetAttribute(t, A.CUDNN_ATTR_TENSOR_DIMENSIONS, T.CUDNN_TYPE_DOUBLE, 4),
           S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "CUDNN_ATTR_TENSOR_DIMENSIONS")
    expect(cudnnBackendGetAttribute(t, A.CUDNN_ATTR_CONVOLUTION_DILATIONS, T.CUDNN_TYPE_INT64, 4),
           S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_CONVOLUTION_DILATIONS")


def test_missing_required_attributes_are_named():
    d = create(D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
    ok(set_attr(d, A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.CUDNN_TYPE_KNOB_TYPE, 0))
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR",
           "required attribute(s) not set: CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE")
    assert not d.finalized


def test_double_finalize_and_unfinalized_references():
    d = _knob_choice(fin=True)
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "already finalized")
    engine_cfg = create(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    engine = create(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR)
    ok(set_attr(engine_cfg, A.CUDNN_ATTR_ENGINECFG_ENGINE, T.CUDNN_TYPE_BACKEND_DESCRIPTOR, engine))
    expect(finalize(engine_cfg), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_ENGINECFG_ENGINE",
           "CUDNN_BACKEND_ENGINE_DESCRIPTOR", "not finalized")


def test_descriptor_element_of_wrong_type():
    cfg = create(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    expect(set_attr(cfg, A.CUDNN_ATTR_ENGINECFG_ENGINE, T.CUDNN_TYPE_BACKEND_DESCRIPTOR, _knob_choice()),
           S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "CUDNN_ATTR_ENGINECFG_ENGINE",
           "CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR", "expected CUDNN_BACKEND_ENGINE_DESCRIPTOR")
    expect(set_attr(cfg, A.CUDNN_ATTR_ENGINECFG_ENGINE, T.CUDNN_TYPE_BACKEND_DESCRIPTOR, 5),
           S.CUDNN_STATUS_BAD_PARAM, "not a cudnnBackendDescriptor_t")


def test_read_only_and_placeholder_attributes():
    cfg = create(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    expect(set_attr(cfg, A.CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, T.CUDNN_TYPE_INT64, 0), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE", "read-only")
    expect(set_attr(cfg, A.CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO, T.CUDNN_TYPE_BACKEND_DESCRIPTOR,
                    create(D.CUDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR)),
           S.CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO", "placeholder")


@pytest.mark.parametrize("dtype", [D.CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, D.CUDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR,
                                   D.CUDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR], ids=lambda d: d.name)
def test_library_filled_descriptors_cannot_be_set_or_finalized(dtype):
    d = create(dtype)
    name = next(iter(SCHEMA[dtype].attrs))
    expect(set_attr(d, name, SCHEMA[dtype].attrs[name].types[0], 1), S.CUDNN_STATUS_BAD_PARAM, "read-only")
    expect(finalize(d), S.CUDNN_STATUS_NOT_SUPPORTED, dtype.name, "cannot be finalized")
    expect(cudnnBackendGetAttribute(d, name, SCHEMA[dtype].attrs[name].types[0], 1),
           S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)


def _settable():
    for dtype, schema in SCHEMA.items():
        for name, attr in schema.attrs.items():
            if attr.kind not in (READONLY, PLACEHOLDER) and schema.user_finalizable:
                yield dtype, name, attr


@pytest.mark.parametrize("dtype, name, attr", list(_settable()), ids=lambda x: getattr(x, "name", ""))
def test_every_settable_attribute_rejects_a_wrong_type_and_count(dtype, name, attr):
    d = create(dtype)
    wrong = next(t for t in (T.CUDNN_TYPE_CHAR, T.CUDNN_TYPE_INT32, T.CUDNN_TYPE_HANDLE) if t not in attr.types)
    expect(cudnnBackendSetAttribute(d, name, wrong, 1, [0]), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
           dtype.name, name.name)
    lo, hi = attr.count
    if hi is not None:
        expect(cudnnBackendSetAttribute(d, name, attr.types[0], hi + 1, [0] * (hi + 1)), S.CUDNN_STATUS_BAD_PARAM,
               dtype.name, name.name, "elementCount")
    if lo > 0:
        expect(cudnnBackendSetAttribute(d, name, attr.types[0], 0, []), S.CUDNN_STATUS_BAD_PARAM, name.name)


def test_schema_covers_every_documented_descriptor():
    assert set(DOCUMENTED) <= set(SCHEMA)
    for dtype, schema in SCHEMA.items():
        for name in schema.attrs:
            assert name.name.startswith(schema.prefix), (dtype, name)


def test_float_double_recast_and_defaults():
    pw = make(D.CUDNN_BACKEND_POINTWISE_DESCRIPTOR, {
        A.CUDNN_ATTR_POINTWISE_MODE: (T.CUDNN_TYPE_POINTWISE_MODE, 100),
        A.CUDNN_ATTR_POINTWISE_MATH_PREC: (T.CUDNN_TYPE_DATA_TYPE, DT.CUDNN_DATA_FLOAT),
        A.CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP: (T.CUDNN_TYPE_FLOAT, 0.1)})
    import numpy as np
    assert get(pw, A.CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, T.CUDNN_TYPE_DOUBLE) == (1, [float(np.float32(0.1))])
    assert get(pw, A.CUDNN_ATTR_POINTWISE_ELU_ALPHA, T.CUDNN_TYPE_FLOAT) == (1, [1.0])
    assert get(pw, A.CUDNN_ATTR_POINTWISE_AXIS, T.CUDNN_TYPE_INT64) == (1, [-1])
    assert get(pw, A.CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, T.CUDNN_TYPE_NAN_PROPOGATION)[1][0].name == \
        "CUDNN_NOT_PROPAGATE_NAN"
    expect(set_attr(create(D.CUDNN_BACKEND_POINTWISE_DESCRIPTOR), A.CUDNN_ATTR_POINTWISE_ELU_ALPHA,
                    T.CUDNN_TYPE_FLOAT, ["x"]), S.CUDNN_STATUS_BAD_PARAM, "not a float")


def test_references_are_checked_all_the_way_down():
    from ncudnn.backend.api import cudnnBackendInitialize
    from backend_build import graph, pointwise_desc, pointwise_op
    x = tensor(1, [4])
    op = pointwise_op(pointwise_desc(14), x=x, y=tensor(2, [4]))  # CUDNN_POINTWISE_FLOOR
    ok(cudnnBackendInitialize(x))
    expect(finalize(graph([op], fin=False)), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATIONGRAPH_OPS",
           "CUDNN_BACKEND_TENSOR_DESCRIPTOR", "not finalized", "reached through")
    x2 = tensor(1, [4])
    op2 = pointwise_op(pointwise_desc(14), x=x2, y=tensor(2, [4]))
    ok(cudnnBackendDestroyDescriptor(x2))
    expect(finalize(graph([op2], fin=False)), S.CUDNN_STATUS_BAD_PARAM, "was destroyed")
