"""The CTC loss kernel's sm_90 compile cases (each normalization and gradient mode, with and without gradients).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing.
"""
from ..runtime.compile_check import register_compile_case
from . import loss


def register_cases():
    for softmax, zero_oob, grads, block in ((False, True, True, 128), (True, True, True, 128),
                                            (True, False, True, 256), (False, True, False, 128)):
        name = (f"ctc_loss_{'softmax' if softmax else 'probs'}_{'zero' if zero_oob else 'skip'}_oob"
                f"{'' if grads else '_costs_only'}_b{block}")
        register_compile_case(name, loss.ctc_kernel(softmax, zero_oob, grads, block), loss.signature(),
                              max_registers=128)   # no spills; one block per entry, not occupancy-bound


register_cases()
