"""Strided copy kernels of the data-movement engine (strided_copy)."""
