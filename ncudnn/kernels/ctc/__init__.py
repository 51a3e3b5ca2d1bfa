"""CTC loss kernels (loss.py): alpha / beta in log space, one block per batch entry. Engine: ncudnn.engines.ctc."""
