"""The CTC loss engine (loss.py). Kernels: ncudnn.kernels.ctc."""
