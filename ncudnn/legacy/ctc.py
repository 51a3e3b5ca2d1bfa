"""The CTC loss of cudnn_adv.h: cudnnCTCLossDescriptor_t, cudnnCTCLoss (labels and lengths on the host),
cudnnCTCLoss_v8 (on the device) and their workspace sizes, lowered onto one ctc_loss node (engine "ctc").

probsDesc / gradientsDesc: 3-d (T, N, A) FLOAT tensors of one geometry (A classes, label 0 the blank).
Under CUDNN_LOSS_NORMALIZATION_NONE ``probs`` holds probabilities (softmax applied); under
CUDNN_LOSS_NORMALIZATION_SOFTMAX pre-softmax activations, normalized over A inside. Either way ``costs`` (N
floats) gets -log p(labels | input) and ``gradients`` the gradients with respect to the pre-softmax
activations (softmax(x) - the label occupancy), zero for t >= inputLengths[n]; ``gradients`` may be NULL
(costs only). Labels are the concatenation of every entry's labels (values in [1, A - 1]); each label
length is at most 256 (and at most maxLabelLength for the _v8 calls); each input length in [1, T]. An entry
whose labels cannot fit its input length (L plus its adjacent repeats > T_n) gets cost inf and, by the
descriptor's ctcGradMode (cudnnSetCTCLossDescriptor_v9), zero gradients (ZERO_OOB, the default) or none
written (SKIP_OOB); an entry whose probabilities give every alignment probability 0 is treated the same way.

Defaults of a descriptor set without them: normMode NONE, gradMode NOT_PROPAGATE_NAN (stored, reported, not
used: NaN inputs propagate), ctcGradMode ZERO_OOB, maxLabelLength 256. Both algorithms run the same
deterministic kernel. compType and the tensors must be FLOAT (cuDNN's documented type): anything else is
NOT_SUPPORTED. A workspace smaller than the size query says is BAD_PARAM_SIZE_INSUFFICIENT.

Workspace: the engine's (the forward variables, sized by the longest label: the host label lengths for
cudnnCTCLoss, maxLabelLength for _v8), then for cudnnCTCLoss the host labels and lengths, uploaded there.
cudnnCTCLoss_v8 reads the device lengths and labels back to check them (a synchronizing copy of N + sum(L)
ints) before the kernel reads them on the device.
"""
import numpy as np

from .. import memory
from ..errors import BadParamError, NotSupportedError, c_api
from ..handle import get_handle_or_raise
from ..ir.ops.ctc_loss import MAX_LABEL_LENGTH, CtcLoss
from ..memory import device_pointer
from ..types import (cudnnCTCGradMode_t, cudnnCTCLossAlgo_t, cudnnDataType_t, cudnnLossNormalizationMode_t,
                     cudnnNanPropagation_t, cudnnStatus_t)
from . import lower as L
from ._util import Descriptor, desc_arg, enum_arg, int_arg, int_array, need_ptr, optional_ptrs, size_arg
from .tensor_desc import TensorDescriptor

S = cudnnStatus_t
DT = cudnnDataType_t
NORM = cudnnLossNormalizationMode_t
GM = cudnnCTCGradMode_t
F32, I32 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_INT32
ALIGN = 256


def _align(n):
    return (int(n) + ALIGN - 1) // ALIGN * ALIGN


class CTCLossDescriptor(Descriptor):
    KIND = "CTCLoss"

    def __init__(self):
        super().__init__()
        self.comp_type, self.norm_mode = F32, NORM.CUDNN_LOSS_NORMALIZATION_NONE
        self.nan_mode, self.grad_mode = cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN, GM.CUDNN_CTC_ZERO_OOB_GRADIENTS
        self.max_label_length = MAX_LABEL_LENGTH

    def set(self, comp_type, norm_mode=None, nan_mode=None, grad_mode=None, max_label_length=None):
        """Every field at once (enumerants checked by the caller); those not given take the defaults."""
        fresh = CTCLossDescriptor()
        self.comp_type = comp_type
        self.norm_mode = fresh.norm_mode if norm_mode is None else norm_mode
        self.nan_mode = fresh.nan_mode if nan_mode is None else nan_mode
        self.grad_mode = fresh.grad_mode if grad_mode is None else grad_mode
        self.max_label_length = fresh.max_label_length if max_label_length is None else max_label_length
        self.is_set = True


@c_api(1)
def cudnnCreateCTCLossDescriptor():
    return CTCLossDescriptor()


@c_api(0)
def cudnnDestroyCTCLossDescriptor(ctcLossDesc):
    if ctcLossDesc is None:
        return
    desc_arg(ctcLossDesc, CTCLossDescriptor, "ctcLossDesc", need_set=False).destroyed = True


def _desc(d):
    return desc_arg(d, CTCLossDescriptor, "ctcLossDesc", need_set=False)


def _max_len(v):
    n = int_arg(v, "maxLabelLength")
    if n < 0:
        raise BadParamError(f"maxLabelLength = {n} is negative")
    return n


@c_api(0)
def cudnnSetCTCLossDescriptor(ctcLossDesc, compType):
    _desc(ctcLossDesc).set(enum_arg(DT, compType, "compType"))


@c_api(0)
def cudnnSetCTCLossDescriptorEx(ctcLossDesc, compType, normMode, gradMode):
    _desc(ctcLossDesc).set(enum_arg(DT, compType, "compType"), enum_arg(NORM, normMode, "normMode"),
                           enum_arg(cudnnNanPropagation_t, gradMode, "gradMode"))


@c_api(0)
def cudnnSetCTCLossDescriptor_v8(ctcLossDesc, compType, normMode, gradMode, maxLabelLength):
    _desc(ctcLossDesc).set(enum_arg(DT, compType, "compType"), enum_arg(NORM, normMode, "normMode"),
                           enum_arg(cudnnNanPropagation_t, gradMode, "gradMode"),
                           max_label_length=_max_len(maxLabelLength))


@c_api(0)
def cudnnSetCTCLossDescriptor_v9(ctcLossDesc, compType, normMode, ctcGradMode, maxLabelLength):
    _desc(ctcLossDesc).set(enum_arg(DT, compType, "compType"), enum_arg(NORM, normMode, "normMode"),
                           grad_mode=enum_arg(GM, ctcGradMode, "ctcGradMode"),
                           max_label_length=_max_len(maxLabelLength))


def _set(d):
    return desc_arg(d, CTCLossDescriptor, "ctcLossDesc")


@c_api(1)
def cudnnGetCTCLossDescriptor(ctcLossDesc):
    return _set(ctcLossDesc).comp_type


@c_api(3)
def cudnnGetCTCLossDescriptorEx(ctcLossDesc):
    d = _set(ctcLossDesc)
    return d.comp_type, d.norm_mode, d.nan_mode


@c_api(4)
def cudnnGetCTCLossDescriptor_v8(ctcLossDesc):
    d = _set(ctcLossDesc)
    return d.comp_type, d.norm_mode, d.nan_mode, d.max_label_length


@c_api(4)
def cudnnGetCTCLossDescriptor_v9(ctcLossDesc):
    d = _set(ctcLossDesc)
    return d.comp_type, d.norm_mode, d.grad_mode, d.max_label_length


# ------------------------------------------------------------------------------------- checks

class _Problem:
    """A call's checked geometry: T, N, A, the descriptors, the CTC descriptor."""

    def __init__(self, handle, algo, ctcLossDesc, probsDesc, gradientsDesc):
        self.h = get_handle_or_raise(handle)
        enum_arg(cudnnCTCLossAlgo_t, algo, "algo")
        self.d = _set(ctcLossDesc)
        self.pd = desc_arg(probsDesc, TensorDescriptor, "probsDesc")
        self.gd = None if gradientsDesc is None else desc_arg(gradientsDesc, TensorDescriptor, "gradientsDesc")
        if len(self.pd.dims) != 3:
            raise BadParamError(f"probsDesc has {len(self.pd.dims)} dims {list(self.pd.dims)}: (T, N, A) expected")
        if self.gd is not None and tuple(self.gd.dims) != tuple(self.pd.dims):
            raise BadParamError(f"gradientsDesc dims {list(self.gd.dims)} differ from probsDesc dims "
                                f"{list(self.pd.dims)}")
        self.T, self.N, self.A = (int(x) for x in self.pd.dims)
        if self.d.comp_type != F32:
            raise NotSupportedError(f"ctcLossDesc compType {self.d.comp_type.name}: the CTC loss computes in FLOAT")
        for desc, name in ((self.pd, "probsDesc"), (self.gd, "gradientsDesc")):
            if desc is not None and desc.dtype != F32:
                raise NotSupportedError(f"{name} data type {desc.dtype.name}: the CTC loss takes FLOAT")
            if desc is not None and desc.vect != 1:
                raise NotSupportedError(f"{name} is vectorized: the CTC loss takes plain tensors")

    def lengths(self, label_lengths, input_lengths, limit):
        """(label lengths, input lengths) checked: each label length in [0, limit], each input length in [1, T]."""
        ll, il = [int(x) for x in label_lengths], [int(x) for x in input_lengths]
        for n, x in enumerate(ll):
            if not 0 <= x <= limit:
                raise BadParamError(f"labelLengths[{n}] = {x} is outside [0, {limit}]"
                                    + (" (cuDNN's label length limit)" if limit == MAX_LABEL_LENGTH
                                       else " (maxLabelLength of ctcLossDesc)"))
        for n, x in enumerate(il):
            if not 1 <= x <= self.T:
                raise BadParamError(f"inputLengths[{n}] = {x} is outside [1, {self.T}] (probsDesc's T)")
        return ll, il

    def labels(self, labels):
        lab = [int(x) for x in labels]
        for i, c in enumerate(lab):
            if not 1 <= c < self.A:
                raise BadParamError(f"labels[{i}] = {c} is outside [1, {self.A - 1}] (0 is the blank; A = {self.A})")
        return lab

    def lower(self, n_labels, max_label, with_grads):
        d, pd = self.d, self.pd
        gd = self.gd if with_grads else None
        dims = (self.T, self.N, self.A)
        key = ("ctc_loss", dims, tuple(pd.strides), tuple(gd.strides) if gd is not None else None, n_labels,
               max_label, int(d.norm_mode), int(d.grad_mode))

        def build(b):
            ins = {"PROBS": b.raw("probs", dims, pd.strides, F32),
                   "LABELS": b.raw("labels", (max(n_labels, 1),), (1,), I32),
                   "LABEL_LENGTHS": b.raw("labelLengths", (self.N,), (1,), I32),
                   "INPUT_LENGTHS": b.raw("inputLengths", (self.N,), (1,), I32)}
            outs = {"COSTS": b.raw("costs", (self.N,), (1,), F32)}
            if gd is not None:
                outs["GRADS"] = b.raw("gradients", dims, gd.strides, F32)
            b.add(CtcLoss("ctc_loss", ins, outs, normalization=d.norm_mode, grad_mode=d.grad_mode,
                          max_label_length=max_label))

        low = L.lower(self.h, key, build)
        return low, L.plan_of(low)

    def engine_workspace(self, n_labels, max_label, with_grads=True):
        return _align(self.lower(n_labels, max_label, with_grads)[1][0].workspace_size)


def _host_ints(values, count, name):
    return int_array(values, count, name) if count else ()


def _device_ints(ptr, count, name):
    """``count`` int32 values of device buffer ``ptr``, copied to the host (a synchronizing copy)."""
    if not count:
        return np.zeros(0, np.int32)
    view = memory.as_view(ptr, dims=(count,), strides=(1,), dtype=I32)
    return memory.to_numba(view).copy_to_host()


def _upload(ptr, values):
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.int32).reshape(-1))
    if arr.size:
        view = memory.as_view(ptr, dims=(arr.size,), strides=(1,), dtype=I32)
        memory.to_numba(view).copy_to_device(arr)


def _host_layout(p, labels, label_lengths, input_lengths):
    """(checked labels, label lengths, input lengths, engine workspace bytes, total bytes) of cudnnCTCLoss."""
    ll, il = p.lengths(_host_ints(label_lengths, p.N, "labelLengths"), _host_ints(input_lengths, p.N, "inputLengths"),
                       MAX_LABEL_LENGTH)
    lab = p.labels(_host_ints(labels, sum(ll), "labels"))
    eng = p.engine_workspace(len(lab), max(ll, default=0), p.gd is not None)
    return lab, ll, il, eng, eng + _align(max(len(lab), 1) * 4) + 2 * _align(p.N * 4)


def _v8_max(p):
    m = p.d.max_label_length
    if m > MAX_LABEL_LENGTH:
        raise BadParamError(f"ctcLossDesc maxLabelLength = {m} exceeds cuDNN's label length limit {MAX_LABEL_LENGTH}")
    return m


def _workspace(ptr, size, need):
    if size_arg(size, "workSpaceSizeInBytes") < need:
        raise BadParamError(f"workSpaceSizeInBytes = {size}, {need} needed (cudnnGetCTCLossWorkspaceSize)",
                            S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    return device_pointer(need_ptr(ptr, "workspace"))


def _run(p, low_plan, bind, ws, eng_bytes):
    low, plan = low_plan
    L.execute(p.h, low, bind, workspace=ws, workspace_size=eng_bytes, plan=plan)


def _no_alias(probs, gradients):
    if gradients is not None and device_pointer(gradients) == device_pointer(probs):
        raise NotSupportedError("gradients and probs are the same buffer: the CTC loss does not run in place")


# ------------------------------------------------------------------------------------- calls

@c_api(1)
def cudnnGetCTCLossWorkspaceSize(handle, probsDesc, gradientsDesc, labels, labelLengths, inputLengths, algo,
                                 ctcLossDesc):
    """(status, sizeInBytes) of cudnnCTCLoss with these host labels and lengths."""
    p = _Problem(handle, algo, ctcLossDesc, probsDesc, gradientsDesc)
    return _host_layout(p, labels, labelLengths, inputLengths)[4]


@c_api(1)
def cudnnGetCTCLossWorkspaceSize_v8(handle, algo, ctcLossDesc, probsDesc, gradientsDesc):
    """(status, sizeInBytes) of cudnnCTCLoss_v8: labels up to the descriptor's maxLabelLength."""
    p = _Problem(handle, algo, ctcLossDesc, probsDesc, gradientsDesc)
    return p.engine_workspace(1, _v8_max(p), p.gd is not None)


@c_api(0)
def cudnnCTCLoss(handle, probsDesc, probs, hostLabels, hostLabelLengths, hostInputLengths, costs, gradientsDesc,
                 gradients, algo, ctcLossDesc, workspace, workSpaceSizeInBytes):
    p = _Problem(handle, algo, ctcLossDesc, probsDesc, gradientsDesc)
    need_ptr(probs, "probs")
    need_ptr(costs, "costs")
    optional_ptrs(gradients=gradients)
    if gradients is not None and p.gd is None:
        raise BadParamError("gradientsDesc is NULL but gradients is not")
    _no_alias(probs, gradients)
    lab, ll, il, eng, total = _host_layout(p, hostLabels, hostLabelLengths, hostInputLengths)
    ws = _workspace(workspace, workSpaceSizeInBytes, total)
    off_lab = eng
    off_ll = off_lab + _align(max(len(lab), 1) * 4)
    off_il = off_ll + _align(p.N * 4)
    _upload(ws + off_lab, lab)
    _upload(ws + off_ll, ll)
    _upload(ws + off_il, il)
    bind = {"probs": probs, "labels": ws + off_lab, "labelLengths": ws + off_ll, "inputLengths": ws + off_il,
            "costs": costs}
    if gradients is not None:
        bind["gradients"] = gradients
    _run(p, p.lower(len(lab), max(ll, default=0), gradients is not None), bind, ws, eng)


@c_api(0)
def cudnnCTCLoss_v8(handle, algo, ctcLossDesc, probsDesc, probs, labels, labelLengths, inputLengths, costs,
                    gradientsDesc, gradients, workSpaceSizeInBytes, workspace):
    p = _Problem(handle, algo, ctcLossDesc, probsDesc, gradientsDesc)
    limit = _v8_max(p)
    for ptr, name in ((probs, "probs"), (labels, "labels"), (labelLengths, "labelLengths"),
                      (inputLengths, "inputLengths"), (costs, "costs")):
        need_ptr(ptr, name)
    optional_ptrs(gradients=gradients)
    if gradients is not None and p.gd is None:
        raise BadParamError("gradientsDesc is NULL but gradients is not")
    _no_alias(probs, gradients)
    ll, _ = p.lengths(_device_ints(labelLengths, p.N, "labelLengths"), _device_ints(inputLengths, p.N, "inputLengths"),
                      limit)
    n_labels = int(sum(ll))
    p.labels(_device_ints(labels, n_labels, "labels"))
    low_plan = p.lower(n_labels, limit, gradients is not None)
    eng = _align(low_plan[1][0].workspace_size)
    ws = _workspace(workspace, workSpaceSizeInBytes, eng)
    bind = {"probs": probs, "labels": labels, "labelLengths": labelLengths, "inputLengths": inputLengths,
            "costs": costs}
    if gradients is not None:
        bind["gradients"] = gradients
    _run(p, low_plan, bind, ws, eng)
