"""Per-descriptor finalize checks, one small module per family; FINALIZERS maps descriptor type ->
the function ``cudnnBackendFinalize`` calls after the generic checks (machinery.finalize)."""
from . import attention, block_scale, conv_ops, deviceprop, engine, matmul_reduction, misc_ops, norm_ops, operators, plan
from . import new_ops, pointwise_op, resample_ops, tensor

FINALIZERS = {}
for _m in (tensor, operators, conv_ops, pointwise_op, matmul_reduction, norm_ops, resample_ops, misc_ops,
           block_scale, attention, new_ops, deviceprop, engine, plan):
    FINALIZERS.update(_m.FINALIZERS)
