"""Softmax / log-softmax over one axis (axis) and the persistent long-row kernel (persist)."""
